"""Alerts: every alert rule that fired in the session, by turn, with severity. Selecting one
(Enter or click) asks the app to jump to its turn."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import DataTable

from inspector.messages import JumpToTurn
from panels.keys import TURN_KEYS

CHUNK = 300  # alert rows added per frame
SEVERITY_STYLE = {"critical": "bold red", "error": "bold red", "warning": "yellow", "info": "cyan"}


class AlertsPanel(DataTable):
    BINDINGS = TURN_KEYS

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)
        self._indices: list[int] = []  # timeline position for each row
        self._pending: list[tuple[int, int, dict]] = []

    def on_mount(self) -> None:
        self.border_title = "Alerts"
        for label in ("turn", "severity", "rule", "message"):
            self.add_column(label, key=label)

    def add_traces(self, traces: list[dict], first_index: int) -> None:
        """Queue alerts of newly received traces. Rows are appended, never rebuilt, and a big batch
        (a 10,000-turn recording) is added a chunk per frame so the first frame is not held up."""
        for offset, trace in enumerate(traces):
            for alert in trace.get("alerts") or []:
                self._pending.append((first_index + offset, trace["turn"], alert))
        self._drain()

    def _drain(self) -> None:
        chunk, self._pending = self._pending[:CHUNK], self._pending[CHUNK:]
        for index, turn, alert in chunk:
            sev = alert.get("severity", "info")
            self.add_row(str(turn), Text(sev, style=SEVERITY_STYLE.get(sev, "")),
                         alert.get("rule", ""), alert.get("message", ""))
            self._indices.append(index)
        self.border_title = f"Alerts ({len(self._indices)})"
        if self._pending:
            self.set_timer(0.01, self._drain)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        if 0 <= event.cursor_row < len(self._indices):
            self.post_message(JumpToTurn(self._indices[event.cursor_row]))
