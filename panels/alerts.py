"""Alerts: every alert rule that fired in the session, by turn, with severity. Selecting one
(Enter or click) asks the app to jump to its turn."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import DataTable

from inspector.messages import JumpToTurn
from panels.keys import TURN_KEYS

SEVERITY_STYLE = {"critical": "bold red", "error": "bold red", "warning": "yellow", "info": "cyan"}


class AlertsPanel(DataTable):
    BINDINGS = TURN_KEYS

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)
        self._indices: list[int] = []  # timeline position for each row

    def on_mount(self) -> None:
        self.border_title = "Alerts"
        for label in ("turn", "severity", "rule", "message"):
            self.add_column(label, key=label)

    def add_traces(self, traces: list[dict], first_index: int) -> None:
        """Append alerts of newly received traces; rows are never rebuilt, so 10k turns stay cheap."""
        for offset, trace in enumerate(traces):
            for alert in trace.get("alerts") or []:
                sev = alert.get("severity", "info")
                self.add_row(str(trace["turn"]), Text(sev, style=SEVERITY_STYLE.get(sev, "")),
                             alert.get("rule", ""), alert.get("message", ""))
                self._indices.append(first_index + offset)
        self.border_title = f"Alerts ({len(self._indices)})"

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        if 0 <= event.cursor_row < len(self._indices):
            self.post_message(JumpToTurn(self._indices[event.cursor_row]))
