"""Section manifest: the request's sections in send order with budget, planned and sent tokens,
form, a short content hash and whether the section changed since the previous turn.

A Line-API table, not a DataTable: a DataTable re-renders every cell (one Rich render each) whenever
any cell changes, two or three times a step, which alone took ~11 ms of a 16 ms frame. Here each row
is one rendered Strip, cached until that row's cells, the cursor on it, the column widths or the
styles change; a step re-renders only the rows whose figures moved, and a frame draws only the rows
on screen. It keeps DataTable's look (header, zebra stripes, row cursor, cell padding 1)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Region, Size, Spacing
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from engine.trace_schema import Trace, TraceSection
from panels.border_note import set_border_subtitle
from panels.content_viewer import MATCH_STYLE  # (the name of a section that holds the text searched for)
from panels.fmt import fit_cells, one_line, tok
from panels.keys import ROW_CURSOR_KEYS, TURN_KEYS
from panels.provider_scale import learned, prompt_count
from panels.repaint import repaint
from panels.row_frame import FramedRows, kept_rich_style

COLUMNS = ("section", "kind", "scope", "prio", "budget", "plan", "sent", "form", "Δ", "hash")
# Narrow terminals drop the columns a person can live without, so 80 columns need no scrolling.
COMPACT_COLUMNS = ("section", "scope", "prio", "budget", "plan", "sent", "form", "Δ")
FORM_STYLE = {"full": "", "trimmed": "yellow", "cleared": "cyan", "spilled": "magenta",
              "dropped": "red strike", "degraded": "bold red"}
PAD = 1  # cells of padding either side of a cell, as DataTable's cell_padding

Cell = str | Text


# In the padding after the name of a section whose trace carries a note (why it was sent as it was: a
# degraded binder, an empty message Bedrock got as text): the Content tab shows the note under the section's
# title. By the name, the one column on screen at every width (at 120 columns the form column is past the
# manifest's edge); in its padding, so that a note never widens the column (widths only grow: appended to the
# name, one note pushed the sent column past the edge at 120 columns for the rest of the session).
NOTE_MARK = "*"
NAME_CELLS = 16  # the most of a section's name the first column shows ("…" ends a longer one)


def form_text(section: TraceSection) -> Text:
    form = section["form"]
    label = f"trimmed −{tok(section['omitted'])}" if form == "trimmed" and section.get("omitted") else form
    return Text(label, style=FORM_STYLE.get(form, ""))


def name_cell(section: TraceSection) -> Cell:
    return one_line(fit_cells(section["name"], NAME_CELLS))


@dataclass
class SectionSelected(Message):
    """The person selected a section in the manifest."""
    section_id: str


def scale_note(trace: Trace | None, room: int) -> str:
    """What scale budget, plan and sent are on, the longest wording that fits `room` cells ("" for none):
    the engine's (cl100k), and what one of its tokens is on the provider's scale as the session has learned
    it (the trace's `calibration`, the ratio the plan used), or that nothing is learned yet.

    The session's figure, not this request's: the request's own ratio changed the border on 14 of 30 steps
    through pydicom-1413's first turns, and a new border repaints the whole table (~1.5-2.5 ms p50 a step,
    BENCHMARKS.md, session 35). The calibration settles as replies come in (9 of those 30 steps, then about
    one in 30); the request's exact ratio is in the cache layout, beside the provider's counts it is made of."""
    if trace is None:
        return ""
    per = learned(trace)
    if per != 1.0:
        to, short = f"the provider's ≈×{per:.2f}, learned", f"provider ≈×{per:.2f}"
    elif prompt_count(trace):  # counted, but fewer than three replies seen (or a trace from before the
        to, short = "not calibrated yet", "uncalibrated"  # calibration was recorded): nothing learned
    else:
        to, short = "no provider count yet", "uncalibrated"
    # (the last two for the compact table's header, which has only the cells its columns leave)
    for note in (f"the engine's tokens (cl100k), what budgets are planned in; {to}",
                 f"the engine's tokens (cl100k); {to}", f"engine's tokens; {short}", "engine's tokens",
                 "engine tokens", "engine tok"):
        if len(note) <= room:
            return note
    return ""


def _width(cell: Cell) -> int:
    return cell.cell_len if isinstance(cell, Text) else Text(cell).cell_len


class ManifestPanel(FramedRows, ScrollView, can_focus=True):
    """The manifest table. Up/Down/PageUp/PageDown move the row cursor (the shown section);
    Left/Right/Home/End step turns, as everywhere else in the app."""

    BINDINGS: ClassVar[list[BindingType]] = [
        *TURN_KEYS,
        *ROW_CURSOR_KEYS,
        Binding("enter", "select", "Show section", show=False),
    ]
    COMPONENT_CLASSES = {"manifest--header", "manifest--cursor", "manifest--even-row"}
    # DataTable's own rules, under this widget's names.
    DEFAULT_CSS = """
    ManifestPanel {
        background: $surface;
        color: $foreground;
        &:focus {
            background-tint: $foreground 5%;
            & > .manifest--cursor {
                background: $block-cursor-background;
                color: $block-cursor-foreground;
                text-style: $block-cursor-text-style;
            }
            & > .manifest--header { background-tint: $foreground 5%; }
        }
        &:dark > .manifest--even-row { background: $surface-darken-1 40%; }
        & > .manifest--header { text-style: bold; background: $panel; color: $foreground; }
        &:ansi > .manifest--header { background: ansi_bright_blue; color: ansi_default; }
        & > .manifest--even-row { background: $surface-lighten-1 50%; }
        & > .manifest--cursor {
            background: $block-cursor-blurred-background;
            color: $block-cursor-blurred-foreground;
            text-style: $block-cursor-blurred-text-style;
        }
    }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._trace: Trace | None = None
        self._ids: list[str] = []
        self._rows: list[dict[str, Cell]] = []  # per row: column -> cell, as shown
        self._widths: dict[str, int] = {}  # content width per column; only grows (no re-layout on steps)
        # row index (-1: header) -> the full row rendered; (row, scroll_x, width) -> the part shown
        self._strips: dict[int | tuple[int, int, int], Strip] = {}
        self.cursor_row = 0
        self.compact = False
        self._header_note = ""  # the scale, said after the compact table's column names (it has no border)
        self._header_width = 0  # the width the header was drawn at
        self._row_base: tuple[Style, int] | None = None  # (base style, width) while a frame is drawn
        self.marked: frozenset[str] = frozenset()  # ids of the sections that hold the searched text

    # ---- data ---------------------------------------------------------------------------------

    @property
    def columns(self) -> tuple[str, ...]:
        return COMPACT_COLUMNS if self.compact else COLUMNS

    @property
    def row_count(self) -> int:
        return len(self._rows)

    def on_mount(self) -> None:
        self.border_title = "Sections (send order)"

    def set_compact(self, compact: bool) -> None:
        if compact != self.compact:
            self.compact = compact
            self._widths = {}
            trace, self._trace, self._rows, self._ids = self._trace, None, [], []
            self.show(trace)

    def clear(self) -> None:
        self.show(None)

    def show(self, trace: Trace | None) -> None:
        """Show a turn's sections, keeping the cursor on the same section (or row, if it is gone).

        Only rows whose cells differ from what is shown are re-rendered, and the table is laid out
        again only when a column must widen or the number of rows changes."""
        selected = self.selected_section()
        self._trace = trace
        sections = trace["sections"] if trace is not None else []
        ids = [s["id"] for s in sections]
        rows = [self._row_cells(s) for s in sections]
        changed: list[int] | None = None  # rows to redraw; None: all of them
        if ids != self._ids:
            if selected in ids:
                self.cursor_row = ids.index(selected)
        else:
            changed = [i for i, (old, new) in enumerate(zip(self._rows, rows, strict=True)) if old != new]
        self._ids, self._rows = ids, rows
        self.cursor_row = max(0, min(self.cursor_row, len(rows) - 1))
        widths = {c: max([_width(c), self._widths.get(c, 0), *(_width(r[c]) for r in rows)]) for c in self.columns}
        if widths != self._widths:
            self._widths = widths
            changed = None
        size = Size(sum(w + 2 * PAD for w in widths.values()), len(rows) + 1)
        if size != self.virtual_size:
            self.virtual_size = size  # a layout pass: only when rows are added or removed, or a column widens
        if changed is None:
            self._strips.clear()
            self.refresh()
        else:
            for row in changed:
                self._refresh_row(row)
        self._say_scale()  # (after the widths: the compact header says it in the cells they leave)

    def _say_scale(self) -> None:
        """The table's scale, on its bottom border: the engine's tokens, which its budgets are planned in,
        beside panels (timeline, tier, cache layout) that show the provider's count of the same prompt; and
        what one of its tokens is on the provider's scale, so a person can go from one to the other.

        The compact table (80 columns) has no border: there it follows the column names, as far as the
        cells the columns leave hold it ("engine tok" on the demo recording at 80x24). Either is set only
        when its words change: a new border repaints the whole table, a new header note its one line."""
        if self.compact:
            if self._header_words(self.scrollable_content_region.width) != self._header_note:
                self._refresh_row(-1)  # (drawn again, its note worked out at the width it is drawn at)
                repaint(self, Region(0, 0, self.scrollable_content_region.width, 1))
            return
        note = scale_note(self._trace, self.size.width - 4)
        if note != (self.border_subtitle or ""):
            set_border_subtitle(self, note)  # (the border's row alone: panels/border_note.py)

    def on_resize(self) -> None:
        self._say_scale()

    def _size_updated(self, size: Size, virtual_size: Size, container_size: Size, layout: bool = True) -> bool:
        # Textual sets a widget's size as it lays the screen out, before it draws it; its Resize event
        # is handled after that frame. The scale note fits the width, so saying it here puts it in the
        # frame that first shows the table (the first screen), not the one after.
        resized = super()._size_updated(size, virtual_size, container_size, layout)
        if resized and self._trace is not None:
            self._say_scale()
        return resized

    def _header_words(self, width: int) -> str:
        """The compact header's note for a table `width` cells wide: the scale in the cells the columns
        leave (one space after them), "" when not even the shortest wording fits."""
        return scale_note(self._trace, width - sum(w + 2 * PAD for w in self._widths.values()) - 1)

    @staticmethod
    def _row_cells(s: TraceSection) -> dict[str, Cell]:
        over = s["tokens"] > s["budget"]
        return {
            "section": name_cell(s), "note": NOTE_MARK if s.get("note") else "", "kind": s["kind"], "scope": s["scope"], "prio": s["priority"],
            "budget": Text(tok(s["budget"]), justify="right"),
            "plan": Text(tok(s["planned"]), justify="right"),
            "sent": Text(tok(s["tokens"]), style="bold red" if over else "bold", justify="right"),
            "form": form_text(s), "Δ": "●" if s["changed"] else "", "hash": s["sha256"][:7],
        }

    def set_marked(self, ids: frozenset[str]) -> None:
        """Mark the sections with these ids (they hold the text searched for); only rows that change
        are drawn again."""
        if ids == self.marked:
            return
        changed = ids ^ self.marked
        self.marked = ids
        for row, section in enumerate(self._ids):
            if section in changed:
                self._refresh_row(row)

    def select(self, section_id: str) -> None:
        """Put the cursor on this section's row (the content shown follows), if the turn has it."""
        if section_id in self._ids:
            self.move_cursor(row=self._ids.index(section_id))

    def selected_section(self) -> str | None:
        if not self._ids:
            return None
        return self._ids[min(self.cursor_row, len(self._ids) - 1)]

    # ---- cursor -------------------------------------------------------------------------------

    def move_cursor(self, *, row: int, animate: bool = False) -> None:
        """Put the cursor on `row` (clamped), scroll it into view, and say which section is shown."""
        if not self._rows:
            return
        row = max(0, min(row, len(self._rows) - 1))
        if row != self.cursor_row:
            previous, self.cursor_row = self.cursor_row, row
            self._refresh_row(previous)
            self._refresh_row(row)
            self.post_message(SectionSelected(self._ids[row]))
        self._scroll_cursor_into_view(animate)

    def _refresh_row(self, row: int) -> None:
        """Forget one row's rendering and repaint only its line (the rest of the table stays cached)."""
        for key in [k for k in self._strips if k == row or (isinstance(k, tuple) and k[0] == row)]:
            del self._strips[key]
        y = row + 1 - int(self.scroll_y)
        if 0 < y < self.scrollable_content_region.height:
            repaint(self, Region(0, y, self.scrollable_content_region.width, 1))

    def show_cursor(self) -> None:
        """Scroll the cursor's row into view (after the panel was hidden: its moves then scrolled against
        no height, and the selected row could come back out of view)."""
        self._scroll_cursor_into_view()

    def _scroll_cursor_into_view(self, animate: bool = False) -> None:
        # Row r is virtual line r + 1 (the header is line 0 and stays on screen: one line of spacing).
        region = Region(int(self.scroll_x), self.cursor_row + 1, 1, 1)
        self.scroll_to_region(region, animate=animate, spacing=Spacing(1, 0, 0, 0), force=True, immediate=True)

    def action_cursor(self, delta: int) -> None:
        self.move_cursor(row=self.cursor_row + delta)

    def action_page(self, delta: int) -> None:
        self.move_cursor(row=self.cursor_row + delta * max(1, self.scrollable_content_region.height - 1))

    def action_select(self) -> None:
        if self._ids:
            self.post_message(SectionSelected(self._ids[self.cursor_row]))

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None or offset.y == 0:
            return  # the border or the header
        row = offset.y - 1 + int(self.scroll_y)
        if row < len(self._rows):
            event.stop()
            if row == self.cursor_row:
                self.action_select()
            else:
                self.move_cursor(row=row)

    def on_focus(self) -> None:
        self._strips.clear()  # the cursor and header styles differ with focus

    def on_blur(self) -> None:
        self._strips.clear()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._strips.clear()

    # ---- rendering ----------------------------------------------------------------------------

    def render_lines(self, crop: Region) -> list[Strip]:
        # The rows of one frame share the base style and width: `rich_style` walks the ancestors
        # (~60 us), and was read once a row.
        self._row_base = (kept_rich_style(self), self.scrollable_content_region.width)
        try:
            return super().render_lines(crop)
        finally:
            self._row_base = None

    def render_line(self, y: int) -> Strip:
        base, width = self._row_base or (self.rich_style, self.scrollable_content_region.width)
        row = -1 if y == 0 else y - 1 + int(self.scroll_y)
        if row < 0 and self.compact and width != self._header_width:
            # The header's note fits the width it is drawn at: a scrollbar that comes or goes narrows or
            # widens the table with no resize.
            self._header_width = width
            self._strips.pop(-1, None)
        if row >= len(self._rows):
            return Strip.blank(width, base)
        scroll_x = int(self.scroll_x)
        key = (row, scroll_x, width)
        shown = self._strips.get(key)
        if shown is None:
            strip = self._strips.get(row)
            if strip is None:
                strip = self._strips[row] = self._render_row(row, base)
            shown = self._strips[key] = strip.crop_extend(scroll_x, scroll_x + width, base)
        return shown

    def _render_row(self, row: int, base: Style) -> Strip:
        cells: dict[str, Cell] = dict(zip(self.columns, self.columns, strict=True)) if row < 0 else self._rows[row]
        line = Text(no_wrap=True, end="")
        for column in self.columns:
            cell = cells[column]
            text = cell if isinstance(cell, Text) else Text(cell)
            if column == "section" and row >= 0 and self._ids[row] in self.marked:
                text = text.copy()
                text.stylize(MATCH_STYLE)
            width = self._widths.get(column, len(column))
            if text.cell_len > width:
                text = text.copy()
                text.truncate(width)
            room = width - text.cell_len
            left = room if text.justify == "right" else room // 2 if text.justify == "center" else 0
            line.append(" " * (PAD + left))
            line.append_text(text)
            if column == "section" and cells.get("note") and row >= 0:
                line.append(" " * (room - left))
                line.append(NOTE_MARK, style="bold yellow")  # (PAD is 1: the mark takes the padding's cell)
            else:
                line.append(" " * (PAD + room - left))
        if row < 0:
            if self.compact:
                self._header_note = self._header_words(self._header_width)
                if self._header_note:
                    line.append(" " + self._header_note, style="not bold dim")
            pre, post = self.get_component_rich_style("manifest--header"), None
        elif row == self.cursor_row:
            # DataTable's defaults: the cursor's colour wins over a cell's, a cell's background over the cursor's.
            pre = self.get_component_rich_style("manifest--cursor")
            post = Style(color=pre.color) if pre.color is not None else None
        elif row % 2 == 0:
            pre, post = self.get_component_rich_style("manifest--even-row"), None
        else:
            pre, post = base, None
        segments = list(line.render(self.app.console))
        if post is not None:
            segments = [Segment(t, (s + post) if s else post, c) for t, s, c in segments]
        return Strip(Segment.apply_style(segments, pre), line.cell_len).simplify()
