"""Alerts: every alert rule that fired in the session, by turn, with severity. Selecting one
(Enter or click) asks the app to jump to its turn.

A rule or message too long for its column ends with an ellipsis, and the alert under the cursor is then
shown whole in the panel's last rows, wrapped (it was cut at the panel's edge with no sign: at 120
columns a message's first 18 characters were all there was to read).

Virtualised: rows are plain tuples and only the visible lines are drawn (Textual's line API), so a
10,000-turn recording with thousands of alerts costs one list append per alert, not one DataTable
row (with its cell measuring) per alert."""

from __future__ import annotations

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding
from textual.content import Content
from textual.geometry import Size
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from panels.fmt import fit_cells, one_line
from panels.keys import ROW_CURSOR_KEYS, TURN_KEYS
from panels.navigation import JumpToTurn

SEVERITY_STYLE = {"critical": "bold red", "error": "bold red", "warning": "yellow", "info": "cyan"}
COLUMNS = (("turn", 6), ("severity", 9), ("rule", 15))  # then the message, to the right edge
FIXED = sum(w for _, w in COLUMNS)


class AlertsPanel(ScrollView, can_focus=True):
    BINDINGS = [
        *TURN_KEYS,
        *ROW_CURSOR_KEYS,
        Binding("enter", "select", "Jump to turn", show=False),
    ]
    COMPONENT_CLASSES = {"alerts--header", "alerts--cursor", "alerts--zebra", "alerts--detail"}
    DEFAULT_CSS = """
    AlertsPanel { height: 1fr; overflow-x: hidden; }
    AlertsPanel > .alerts--header { text-style: bold; color: $text-muted; }
    AlertsPanel > .alerts--cursor { background: $block-cursor-blurred-background; }
    AlertsPanel:focus > .alerts--cursor { background: $block-cursor-background; color: $block-cursor-foreground; text-style: bold; }
    AlertsPanel > .alerts--zebra { background: $foreground 4%; }
    AlertsPanel > .alerts--detail { background: $panel; color: $text; }
    """
    cursor_row: reactive[int] = reactive(0)

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        # (timeline position, turn, severity, rule, message) per row
        self._rows: list[tuple[int, int, str, str, str]] = []
        # The cursor's alert whole, as the panel's last rows: (row, width, height) -> its lines ([] when the
        # row is not cut). Made once per cursor move or resize, not once per line drawn.
        self._detail: tuple[tuple[int, int, int], list[str]] | None = None

    def on_mount(self) -> None:
        self.border_title = "Alerts"

    @property
    def row_count(self) -> int:
        return len(self._rows)

    def reset(self, traces: list[dict]) -> None:
        """Every row again, from the timeline's traces (some were filled in place since they came)."""
        self._rows.clear()
        self.add_traces(traces, 0)
        self.cursor_row = min(self.cursor_row, max(0, len(self._rows) - 1))

    def add_traces(self, traces: list[dict], first_index: int) -> None:
        """Append the alerts of newly received traces; nothing is rebuilt or measured."""
        for offset, trace in enumerate(traces):
            for alert in trace.get("alerts") or []:
                self._rows.append((first_index + offset, trace["turn"], str(alert.get("severity", "info")),
                                   one_line(str(alert.get("rule", ""))), one_line(str(alert.get("message", "")))))
        self.border_title = f"Alerts ({len(self._rows)})"
        self._detail = None
        self._resize_virtual()
        self.refresh()

    def _resize_virtual(self) -> None:
        # The header, the rows, and the detail's rows under them: the last row scrolls into view above it.
        self.virtual_size = Size(self.size.width, len(self._rows) + 1 + len(self.detail_lines()))

    def on_resize(self) -> None:
        # Fewer rows (a smaller terminal; the detail takes some): the cursor's row stays in view.
        self._keep_cursor_in_view()

    def on_focus(self) -> None:
        # Focused, the panel draws a border (app.tcss): two rows fewer, with no Resize. At 80x24 that left
        # the cursor's row under the detail, out of view. Once the new styles are laid out:
        self.call_after_refresh(self._keep_cursor_in_view)

    def on_blur(self) -> None:
        self.call_after_refresh(self._keep_cursor_in_view)

    # ---- the cursor's alert, whole -------------------------------------------------------------

    def detail_lines(self) -> list[str]:
        """The alert under the cursor as the panel's last rows, wrapped to its width, when its rule or
        message is cut in its row; else none. At most half the panel's rows, or all but the header and the
        cursor's row in a small panel (the last then ends "…")."""
        region = self.scrollable_content_region
        width, height, row = region.width, region.height, self.cursor_row
        key = (row, width, height)
        if self._detail is not None and self._detail[0] == key:
            return self._detail[1]
        lines: list[str] = []
        if 0 <= row < len(self._rows) and width > 0:
            _, turn, sev, rule, message = self._rows[row]
            if cell_len(rule) >= COLUMNS[2][1] or cell_len(message) > width - FIXED:
                wrapped = [line.plain for line in Content(f"▸ {rule}: {message}").wrap(width)]
                # Half the rows under the header; in a panel of a few rows (80x24 gives it 3 under the
                # header), all but the cursor's row, up to 3.
                room = max(1, (height - 1) // 2, min(height - 2, 3))
                if len(wrapped) > room:
                    wrapped = [*wrapped[: room - 1], fit_cells(wrapped[room - 1] + " …", width)]
                lines = wrapped
        self._detail = (key, lines)
        return lines

    # ---- cursor ---------------------------------------------------------------------------------

    def move_cursor(self, *, row: int) -> None:
        self.cursor_row = row

    def validate_cursor_row(self, row: int) -> int:
        return min(max(0, row), max(0, len(self._rows) - 1))

    def watch_cursor_row(self) -> None:
        self._keep_cursor_in_view()

    def _keep_cursor_in_view(self) -> None:
        # The detail's rows follow the cursor: the rows they leave for the list may change with it.
        self._resize_virtual()
        # Keep the cursor in view (line 0 is the header, so row r is on virtual line r + 1).
        visible = max(1, self.scrollable_content_region.height - 1 - len(self.detail_lines()))
        top = int(self.scroll_y)
        if self.cursor_row < top:
            self.scroll_to(y=self.cursor_row, animate=False, immediate=True)
        elif self.cursor_row >= top + visible:
            self.scroll_to(y=self.cursor_row - visible + 1, animate=False, immediate=True)
        self.refresh()

    def action_cursor(self, delta: int) -> None:
        self.cursor_row += delta

    def action_page(self, delta: int) -> None:
        self.cursor_row += delta * max(1, self.scrollable_content_region.height - 1 - len(self.detail_lines()))

    def action_select(self) -> None:
        if 0 <= self.cursor_row < len(self._rows):
            self.post_message(JumpToTurn(self._rows[self.cursor_row][0]))

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None or offset.y == 0:
            return
        if offset.y >= self.scrollable_content_region.height - len(self.detail_lines()):
            return  # the cursor's alert, shown whole: not a row
        row = int(self.scroll_y) + offset.y - 1
        if 0 <= row < len(self._rows):
            self.cursor_row = row
            self.action_select()

    # ---- drawing --------------------------------------------------------------------------------

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        if y == 0:  # the header stays put while the rows scroll under it
            style = self.get_component_rich_style("alerts--header")
            text = "".join(label.ljust(w) for label, w in COLUMNS) + "message"
            return Strip([Segment(text[:width].ljust(width), style)], width)
        detail = self.detail_lines()
        first = self.scrollable_content_region.height - len(detail)
        if detail and y >= first:
            if y - first >= len(detail):  # under a scrollbar: not shown
                return Strip.blank(width, self.rich_style)
            style = self.rich_style + self.get_component_rich_style("alerts--detail")
            return Strip([Segment(detail[y - first], style)]).crop_extend(0, width, style)
        row = int(self.scroll_y) + y - 1
        if row >= len(self._rows):
            return Strip.blank(width, self.rich_style)
        _, turn, sev, rule, message = self._rows[row]
        base = self.rich_style
        if row == self.cursor_row:
            base = base + self.get_component_rich_style("alerts--cursor")
        elif row % 2:
            base = base + self.get_component_rich_style("alerts--zebra")
        cells = [(str(turn).ljust(COLUMNS[0][1]), None),
                 (sev.ljust(COLUMNS[1][1]), Style.parse(SEVERITY_STYLE.get(sev, "none"))),
                 (fit_cells(rule, COLUMNS[2][1] - 1).ljust(COLUMNS[2][1]), None), (fit_cells(message, width - FIXED), None)]
        segments = [Segment(text, base + style if style else base) for text, style in cells]
        return Strip(segments).crop_extend(0, width, base)
