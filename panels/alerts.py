"""Alerts: every alert rule that fired in the session, by turn, with severity. Selecting one
(Enter or click) asks the app to jump to its turn.

Virtualised: rows are plain tuples and only the visible lines are drawn (Textual's line API), so a
10,000-turn recording with thousands of alerts costs one list append per alert, not one DataTable
row (with its cell measuring) per alert."""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding
from textual.geometry import Size
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from panels.fmt import one_line
from panels.keys import ROW_CURSOR_KEYS, TURN_KEYS
from panels.navigation import JumpToTurn

SEVERITY_STYLE = {"critical": "bold red", "error": "bold red", "warning": "yellow", "info": "cyan"}
COLUMNS = (("turn", 6), ("severity", 9), ("rule", 15))  # then the message, to the right edge


class AlertsPanel(ScrollView, can_focus=True):
    BINDINGS = [
        *TURN_KEYS,
        *ROW_CURSOR_KEYS,
        Binding("enter", "select", "Jump to turn", show=False),
    ]
    COMPONENT_CLASSES = {"alerts--header", "alerts--cursor", "alerts--zebra"}
    DEFAULT_CSS = """
    AlertsPanel { height: 1fr; }
    AlertsPanel > .alerts--header { text-style: bold; color: $text-muted; }
    AlertsPanel > .alerts--cursor { background: $block-cursor-blurred-background; }
    AlertsPanel:focus > .alerts--cursor { background: $block-cursor-background; color: $block-cursor-foreground; text-style: bold; }
    AlertsPanel > .alerts--zebra { background: $foreground 4%; }
    """
    cursor_row: reactive[int] = reactive(0)

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        # (timeline position, turn, severity, rule, message) per row
        self._rows: list[tuple[int, int, str, str, str]] = []

    def on_mount(self) -> None:
        self.border_title = "Alerts"

    @property
    def row_count(self) -> int:
        return len(self._rows)

    def add_traces(self, traces: list[dict], first_index: int) -> None:
        """Append the alerts of newly received traces; nothing is rebuilt or measured."""
        for offset, trace in enumerate(traces):
            for alert in trace.get("alerts") or []:
                self._rows.append((first_index + offset, trace["turn"], str(alert.get("severity", "info")),
                                   one_line(str(alert.get("rule", ""))), one_line(str(alert.get("message", "")))))
        self.border_title = f"Alerts ({len(self._rows)})"
        self.virtual_size = Size(self.size.width, len(self._rows) + 1)
        self.refresh()

    # ---- cursor ---------------------------------------------------------------------------------

    def move_cursor(self, *, row: int) -> None:
        self.cursor_row = row

    def validate_cursor_row(self, row: int) -> int:
        return min(max(0, row), max(0, len(self._rows) - 1))

    def watch_cursor_row(self) -> None:
        # Keep the cursor in view (line 0 is the header, so row r is on virtual line r + 1).
        visible = max(1, self.scrollable_content_region.height - 1)
        top = int(self.scroll_y)
        if self.cursor_row < top:
            self.scroll_to(y=self.cursor_row, animate=False)
        elif self.cursor_row >= top + visible:
            self.scroll_to(y=self.cursor_row - visible + 1, animate=False)
        self.refresh()

    def action_cursor(self, delta: int) -> None:
        self.cursor_row += delta

    def action_page(self, delta: int) -> None:
        self.cursor_row += delta * max(1, self.scrollable_content_region.height - 1)

    def action_select(self) -> None:
        if 0 <= self.cursor_row < len(self._rows):
            self.post_message(JumpToTurn(self._rows[self.cursor_row][0]))

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None or offset.y == 0:
            return
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
                 (rule[: COLUMNS[2][1] - 1].ljust(COLUMNS[2][1]), None), (message, None)]
        segments = [Segment(text, base + style if style else base) for text, style in cells]
        return Strip(segments).crop_extend(0, width, base)
