"""Content viewer: one section's content, or the whole serialized request, highlighted.

The app fetches text from the source in a worker, which also splits and wraps it
(`panels.text_document.prepare`) and draws the first screenful, and calls `show()`; the viewer never
reads files. Rows are highlighted when they are drawn (`TextDocument.line`).

The body is a Line-API view over those prepared rows: a frame renders only the rows on screen (cached
as Strips), and new content changes only its virtual height, never the screen's layout. A Static that
held a 120,000-character history formatted and wrapped all of it on the UI thread at every step
(~0.3 s) and changed height, which laid out the whole screen again."""

from __future__ import annotations

from dataclasses import dataclass

from rich.cells import cell_len
from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.cache import LRUCache
from textual.color import Color
from textual.containers import Vertical
from textual.filter import LineFilter
from textual.geometry import Region, Size, Spacing
from textual.scroll_view import ScrollView
from textual.scrollbar import ScrollBar
from textual.selection import Selection
from textual.strip import Strip
from textual.style import Style as VisualStyle
from textual.widget import Widget

from panels.fmt import one_line
from panels.highlight import OMISSION
from panels.keys import TURN_KEYS
from panels.markup_line import MarkupLine
from panels.repaint import repaint
from panels.row_frame import FRAMING, kept_rich_style, styles_key
from panels.scrollbar_rows import RowScrollBar, rows_moved, thumb
from panels.text_document import TextDocument, prepare, rewrap, row_text

DEFAULT_WIDTH = 80  # wrap width before the view has been laid out


@dataclass(frozen=True)
class Screenful:
    """What drawing the first rows of a document as the frame will draw them needs from the view
    (read on the UI thread, used by the content worker): the rows on screen, the body's base style,
    the width a row is padded to (under the scrollbar) and the padding's style, and the app's line
    filters with the background they are applied on."""

    rows: int
    base: Style
    width: int
    pad: Style
    filters: tuple[LineFilter, ...]
    background: Color
    text_width: int = 0  # the columns left of the scrollbar (a step repaints only these)

    def finish(self, strip: Strip) -> Strip:
        """`strip` padded and filtered as ContentBody.render_lines does; the results are cached on
        the strips (Strip's own caches), so a frame that draws this row again finds them done."""
        strip = strip.adjust_cell_length(self.width, self.pad)
        for line_filter in self.filters:
            strip = strip.apply_filter(line_filter, self.background)
        return strip

    def finish_for_terminal(self, strip: Strip, console: Console) -> Strip:
        """`finish(strip)` with its terminal output (escape sequences) made too, and kept on the strip
        (Strip.render caches it): the frame that shows a prepared row hands this same strip to the
        driver, which then writes it without converting its segments on the UI thread (a History step
        at 200x60 writes about a screenful of new rows: 1-2 ms more in a terminal than headless)."""
        strip = self.finish(strip)
        strip.render(console)
        if 0 < self.text_width < self.width:
            # A step repaints the text, not the scrollbar beside it, so the frame cuts each row where
            # the scrollbar starts (Strip.divide, cached on the strip by its cuts) and writes the left
            # piece: that piece, made here, is the one the frame finds.
            strip.divide([self.text_width, self.width])[0].render(console)
        return strip


# A search hit in the text (`/`): the manifest marks the section's name the same way.
MATCH_STYLE = Style(color="black", bgcolor="yellow", bold=True)


class ContentBody(ScrollView, can_focus=True):
    """The prepared rows of a TextDocument. Scrolls with Up/Down/PageUp/PageDown, mouse and scrollbar;
    Left/Right/Home/End step turns. Text selection (mouse) and copy give the source text, not the wrap."""

    ALLOW_SELECT = True
    DEFAULT_CSS = """
    ContentBody { height: 1fr; overflow-y: scroll; overflow-x: hidden; }
    """
    BINDINGS = TURN_KEYS

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.document: TextDocument | None = None
        self._strips: LRUCache[int, Strip] = LRUCache(1024)
        # (base style, width, text selection) while a frame is drawn: read once a frame, not once a row
        self._frame: tuple[Style, int, Selection | None] | None = None
        self._screenful: tuple[tuple[object, ...], Screenful] | None = None  # (what it was made from, it)
        self.needle = ""  # the text searched for (lower case), highlighted where it occurs; "" for none

    @property
    def allow_select(self) -> bool:
        return True

    @property
    def vertical_scrollbar(self) -> ScrollBar:
        """The vertical scrollbar, a RowScrollBar (its moved rows are drawn from cached rows), made as
        Textual's Widget.vertical_scrollbar makes its own."""
        if self._vertical_scrollbar is None:
            bar = RowScrollBar(vertical=True, name="vertical", thickness=self.scrollbar_size_vertical)
            bar.display = False
            self._vertical_scrollbar = bar
            self.app._start_widget(self, bar)
        return self._vertical_scrollbar

    @property
    def wrap_width(self) -> int:
        """The width rows are wrapped to (the vertical scrollbar is always there, so it never changes
        with the content)."""
        width = self.scrollable_content_region.width
        return width if width > 0 else DEFAULT_WIDTH

    def set_document(self, document: TextDocument | None, *, scroll_home: bool = True) -> None:
        if document is not None and document.width != self.wrap_width and self.size.width:
            document = rewrap(document, self.wrap_width)  # prepared for another width (resized meanwhile)
        self.document = document
        self._strips.clear()
        size = Size(self.wrap_width, len(document.rows) if document else 0)
        if size != self.virtual_size:
            # The body's own size does not depend on its content (height 1fr, scrollbar always shown):
            # update the scrollable size and the scrollbar without laying out the screen.
            bar = self.vertical_scrollbar
            position = 0 if scroll_home else bar.position
            if bar.window_size > 0 and bar.size.height and position == bar.position:
                # A history grown by a turn moves the thumb's ends by a cell or two, if at all: only
                # those rows are repainted (repainting the whole bar was a tenth of a step's UI time).
                height = bar.size.height
                before = thumb(height, bar.window_virtual_size, bar.window_size, position)
                after = thumb(height, size.height, bar.window_size, position)
                self.set_reactive(Widget.virtual_size, size)
                bar.set_reactive(ScrollBar.window_virtual_size, size.height)
                self.scroll_y = self.validate_scroll_y(self.scroll_y)
                changed = rows_moved(height, before, after)
                if changed:
                    repaint(bar, *(Region(0, y, bar.size.width, 1) for y in changed))
            else:
                self.set_reactive(Widget.virtual_size, size)
                self._scroll_update(size)
        if scroll_home:
            self.scroll_to(0, 0, animate=False, immediate=True)
        # The text's rows only: the scrollbar beside them repaints itself where its drawing changes (the
        # rows its thumb's ends moved across, above, or all of it when the thumb moves with the
        # scroll). Repainting the whole body made every frame of a step draw the bar's every row
        # again (~1 ms at 200x60) to put back the same cells.
        text = self.scrollable_content_region
        if text.area:
            repaint(self, Region(0, 0, text.width, text.height))
        else:  # not laid out yet
            repaint(self)

    def set_query(self, needle: str) -> None:
        """Highlight the (lower-case) text `needle` wherever it occurs ("": nothing)."""
        if needle != self.needle:
            self.needle = needle
            self._strips.clear()
            self.refresh()

    def reveal(self, last: bool = True) -> bool:
        """Scroll the last (or first) occurrence of the query into view, a few rows below the top; False
        when the text shown has none."""
        doc, needle = self.document, self.needle
        if doc is None or not needle:
            return False
        lines = range(len(doc.plain) - 1, -1, -1) if last else range(len(doc.plain))
        for line_no in lines:
            low = doc.plain[line_no].lower()
            at = low.rfind(needle) if last else low.find(needle)
            if at < 0:
                continue
            row = next((i for i, (n, a, b) in enumerate(doc.rows) if n == line_no and a <= at < max(b, a + 1)), 0)
            self.scroll_to(0, max(0, row - 2), animate=False, immediate=True)
            return True
        return False

    def on_resize(self) -> None:
        doc = self.document
        if doc is not None and doc.width != self.wrap_width:
            self.set_document(rewrap(doc, self.wrap_width), scroll_home=False)

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._strips.clear()

    def selection_updated(self, selection: Selection | None) -> None:
        self._strips.clear()
        self.refresh()

    def get_selection(self, selection: Selection) -> tuple[str, str] | None:
        """The selected source text. Offsets in the rows' strips are (character in the source line,
        source line), so a selection across wrapped rows copies the line as it was, without breaks."""
        if self.document is None:
            return None
        return selection.extract("\n".join(self.document.plain_lines)), "\n"

    def screenful(self) -> Screenful:
        """What drawing a row as the frame draws it needs (see Screenful). A step asks twice (its frame,
        and the content worker it starts) and each time it was ~0.2 ms (`rich_style` and
        `background_colors` walk the ancestors), so it is kept for as long as nothing it is made from
        changes: the styles of this widget and its ancestors (Textual counts their updates), the size
        and the line filters."""
        filters = tuple(self.get_line_filters())
        key = (styles_key(self) if FRAMING else None, self.outer_size, self.scrollable_content_region, filters)
        kept = self._screenful
        if kept is not None and kept[0] == key and FRAMING:
            return kept[1]
        base_background, background = self.background_colors
        screenful = Screenful(max(self.size.height, 1), kept_rich_style(self), self.content_region.width,
                              VisualStyle(background=base_background + background).rich_style,
                              key[3], background, self.scrollable_content_region.width)
        self._screenful = (key, screenful)
        return screenful

    def _plain(self) -> bool:
        """No border, outline, padding, tint, opacity or hatch: a row on screen is the row's strip
        padded to the content width and filtered, nothing more."""
        styles = self.styles
        return (not any(edge for edge, _ in styles.border) and not any(edge for edge, _ in styles.outline)
                and styles.padding == Spacing(0, 0, 0, 0) and not styles.tint.a and self.opacity == 1
                and styles.text_opacity == 1 and not styles.has_rule("hatch")
                and self._border_title is None and self._border_subtitle is None)

    def render_lines(self, crop: Region) -> list[Strip]:
        # The rows of one frame share the base style, width and selection. rich_style walks the
        # ancestors' backgrounds (asked once a row it was the largest part of drawing a new screenful);
        # text_selection looks the screen up through the ancestors too.
        self._frame = (kept_rich_style(self), self.scrollable_content_region.width, self.text_selection)
        try:
            if not self._plain():
                return super().render_lines(crop)
            # Textual's general path wraps every changed row in a new Strip (borders, tint, opacity)
            # before the app's line filters, so a new screenful was filtered segment by segment on
            # every step even when the content worker had drawn it. Here a row's padded and filtered
            # strips are cached on the row (and warmed by the worker for the first screenful).
            # Nothing of Textual's styles cache is used here; emptied so that it never holds a stale row
            # if this widget later takes Textual's path. Private (Textual 8.2): a Textual without it
            # keeps no such rows there to go stale.
            cache = getattr(self, "_styles_cache", None)
            if cache is not None:
                cache.clear()
            screenful = self.screenful()
            strips = [screenful.finish(self.render_line(y)) for y in crop.line_range]
            if crop.column_span != (0, screenful.width):
                strips = [strip.crop(*crop.column_span) for strip in strips]
            return strips
        finally:
            self._frame = None

    def render_line(self, y: int) -> Strip:
        index = y + int(self.scroll_y)
        doc = self.document
        base, width, selection = self._frame or (self.rich_style, self.scrollable_content_region.width,
                                                 self.text_selection)
        if doc is None or index >= len(doc.rows):
            return Strip.blank(width, base)
        strip = self._strips.get(index)
        if strip is None:
            strip = self._strips[index] = self._render_row(index, width, base, selection)
        return strip

    def _render_row(self, index: int, width: int, base: Style, selection: Selection | None) -> Strip:
        assert self.document is not None
        doc = self.document
        if selection is None and doc.first_rows_style == base and width == doc.width and not self.needle:
            strip = doc.first_rows.get(index)  # drawn by the content worker
            if strip is not None:
                return strip
        selected: tuple[int, int, Style] | None = None
        line_no, start, end = doc.rows[index]
        if selection is not None and (span := selection.get_span(line_no)) is not None:
            lo, hi = span
            lo, hi = max(lo, start), end if hi == -1 else min(hi, end)
            if lo < hi:
                selected = (lo - start, hi - start, self.screen.get_component_rich_style("screen--selection"))
        return render_row(doc, index, width, base, self.app.console, selected, self._matches(line_no, start, end))

    def _matches(self, line_no: int, start: int, end: int) -> list[tuple[int, int]]:
        """The query's occurrences in source line `line_no` that fall in its characters start..end, as
        offsets in that row (the part of a match a wrap carried to the next row is drawn there)."""
        needle = self.needle
        doc = self.document
        if not needle or doc is None:
            return []
        low = doc.plain[line_no].lower()
        out: list[tuple[int, int]] = []
        at = low.find(needle, max(0, start - len(needle) + 1))
        while 0 <= at < end:
            lo, hi = max(at, start), min(at + len(needle), end)
            if lo < hi:
                out.append((lo - start, hi - start))
            at = low.find(needle, at + 1)
        return out


def render_row(doc: TextDocument, index: int, width: int, base: Style, console: Console,
               selected: tuple[int, int, Style] | None = None, matches: list[tuple[int, int]] | None = None) -> Strip:
    """Display row `index` of `doc` as a Strip `width` cells wide on `base`, with the (character,
    source line) offsets text selection reads; `matches`: spans of the row to highlight as search hits.
    Pure: the content worker draws the first screenful."""
    line_no, start, text = row_text(doc, index)
    if selected is not None or matches:
        text = text.copy()
    for lo, hi in matches or ():
        text.stylize(MATCH_STYLE, lo, hi)
    if selected is not None:
        text.stylize(selected[2], selected[0], selected[1])
    segments = Segment.apply_style(text.render(console), base)
    strip = Strip(segments, cell_len(text.plain)).crop_extend(0, width, base)
    return strip.apply_offsets(start, line_no)


def prerender(doc: TextDocument, screen: Screenful, console: Console) -> None:
    """Draw the first screenful of rows of `doc` as a frame will (in the content worker, so the UI
    thread does not)."""
    rows = {i: render_row(doc, i, doc.width, screen.base, console) for i in range(min(screen.rows, len(doc.rows)))}
    for strip in rows.values():
        screen.finish_for_terminal(strip, console)
    doc.first_rows = rows
    doc.first_rows_style = screen.base


# What scale the optimizer's omission markers count in ("[...812 tokens omitted...]", engine/assembly.py:
# the engine's own tokenizer, as the manifest's figures; the timeline and tier show the provider's count),
# said under the title of a text that holds one. Not in the title: at 120x40 the Content tab is 48 cells
# wide and the title alone fills it. Not beside each marker: the text is what was sent, as it was sent.
OMITTED_SCALE = "tokens omitted: the engine's tokens (cl100k)"


def has_omission(text: str) -> bool:
    """Whether the text holds an omission marker (a substring test first: most texts have none, and this
    runs for every new text a step shows)."""
    return "tokens omitted" in text and OMISSION.search(text) is not None


class ContentViewer(Vertical):
    DEFAULT_CSS = """
    ContentViewer { height: 1fr; }
    ContentViewer #content-title {
        color: $text-muted; text-style: bold; height: 1; text-wrap: nowrap; text-overflow: ellipsis;
    }
    ContentViewer #content-note { color: $warning; height: auto; max-height: 4; display: none; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._text, self._title, self._note = "", "", ""
        self._omits = False  # the text holds an omission marker (has_omission), worked out once per text
        self._note_shown: tuple[str, bool] = ("", False)  # what the note line says: (note, self._omits)
        self._theme_dark: bool | None = None
        self.key: tuple[str, str] | None = None  # (section id, content hash) of the text shown
        self._body: ContentBody | None = None
        self._title_line: MarkupLine | None = None
        self._note_line: MarkupLine | None = None
        self._reveal: str | None = None  # the title (its start) of a text to show the last search hit of

    def compose(self) -> ComposeResult:
        yield MarkupLine("select a section (Enter) or press b for the request body", id="content-title")
        # The section's note in the trace (why it was sent as it was), under the title; hidden when none.
        yield MarkupLine(id="content-note")
        yield ContentBody(id="content-body")

    @property
    def body(self) -> ContentBody:
        if self._body is None:  # looked up once: a step asks for it several times
            self._body = self.query_one("#content-body", ContentBody)
        return self._body

    @property
    def wrap_width(self) -> int:
        return self.body.wrap_width

    def first_screen(self) -> Screenful:
        """What the content worker needs to draw the first rows as the frame will."""
        return self.body.screenful()

    def show(self, title: str, text: str, document: TextDocument | Text | None = None,
             dark: bool | None = None, key: tuple[str, str] | None = None, note: str = "") -> None:
        """Show `text` under `title`. `document` is the text already prepared (off the UI thread) for
        the `dark` or light theme (a TextDocument); it is used when that is still the current theme,
        else the text is prepared here. `key` names the text (section id,
        content hash) so that a later turn with the same key can be titled at once (`retitle`). `note`:
        what the trace says of the section (shown under the title; "" for none)."""
        current = self.app.current_theme.dark
        self.key = key
        if text != self._text:
            self._omits = has_omission(text)
        self._set_note(note)
        if (title, text) == (self._title, self._text) and self._theme_dark == current:
            return  # the same section of the same turn: nothing to redraw
        same_body = text == self._text and self._theme_dark == current
        self._title, self._text, self._theme_dark = title, text, current
        body = self.body
        if not same_body:
            if isinstance(document, TextDocument) and document.dark == current:
                doc = document
            else:  # splitting and wrapping is cheap; highlighting waits until rows are drawn
                doc = prepare(text, current, body.wrap_width)
            body.set_document(doc)
        self._set_title(title)
        if self._reveal is not None and title.startswith(self._reveal):
            self._reveal = None
            body.reveal()

    def set_query(self, needle: str) -> None:
        """Highlight this (lower-case) text in what is shown ("": nothing)."""
        self.body.set_query(needle)
        if not needle:
            self._reveal = None

    def reveal_when_shown(self, title_start: str) -> None:
        """Scroll the last search hit into view in the text whose title starts so: now if it is shown,
        else once it is (a section's text comes from a worker)."""
        if self._title.startswith(title_start):
            self._reveal = None
            self.body.reveal()
        else:
            self._reveal = title_start

    def retitle(self, title: str, key: tuple[str, str], note: str = "") -> bool:
        """A step to a turn whose section text has the same key as the text shown: only the title (and
        the note) change, in the step's own frame (the content worker's copy, when it comes, changes
        nothing)."""
        if key != self.key or self._theme_dark != self.app.current_theme.dark:
            return False
        self._set_note(note)
        if title != self._title:
            self._title = title
            self._set_title(title)
        return True

    def _set_title(self, title: str) -> None:
        body = self.body
        language = body.document.language if body.document is not None else "text"
        # One line of fixed height: a new title never lays the screen out again.
        if self._title_line is None:
            self._title_line = self.query_one("#content-title", MarkupLine)
        # Literal text, not markup: a section's id is the agent's own (add_source), and `[/]` in it
        # raised MarkupError and ended the app when the section was selected.
        self._title_line.update([(f"{title}  ·  {language}  ·  {len(self._text):,} chars", "")])

    def _set_note(self, note: str) -> None:
        """The trace's note on the section, and the omission markers' scale when the text holds one."""
        if (note, self._omits) == self._note_shown:
            return  # (every step asks: most sections never have either, the rest keep theirs)
        self._note, self._note_shown = note, (note, self._omits)
        if self._note_line is None:
            self._note_line = self.query_one("#content-note", MarkupLine)
        # Literal text: the note quotes the agent's own (a message's text, a section's name).
        parts = [(f"note: {one_line(note)}", "")] if note else []
        if self._omits:
            parts += [("  " if note else "", ""), (OMITTED_SCALE, "$text-muted")]
        self._note_line.update(parts or "")
        self._note_line.display = bool(parts)

    @property
    def title(self) -> str:
        return self._title

    @property
    def note(self) -> str:
        """The note shown under the title ("" when none)."""
        return self._note

    @property
    def text(self) -> str:
        """The text shown (before highlighting)."""
        return self._text
