"""The fleet table of `cp-inspect top`: one row per agent (or proxy session), sortable and filterable.

Rows are keyed by target, so a refresh updates only the cells that changed (DataTable.update_cell) and
adds or removes rows as agents come and go; the cursor stays on the agent it was on."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.binding import Binding
from textual.message import Message
from textual.widgets import DataTable

from engine.fleet import AgentRow
from panels.fmt import tok

# (column key, header, sort key)
COLUMNS: tuple[tuple[str, str], ...] = (
    ("target", "PID"), ("model", "MODEL"), ("turn", "TURN"), ("pressure", "PRESS"), ("tier", "TIER"),
    ("hit_recent", "HIT 10"), ("hit", "HIT"), ("cost", "COST $"), ("alerts", "ALERTS"), ("rate", "TOK/MIN"),
    ("state", "STATE"), ("command", "COMMAND"),
)
# Fixed widths for columns whose content changes, so a new value never re-measures the table.
WIDTHS = {"target": 9, "model": 18, "turn": 5, "pressure": 5, "tier": 15, "hit_recent": 6, "hit": 4,
          "cost": 9, "alerts": 6, "rate": 7, "state": 7}
SORT_KEYS = tuple(k for k, _ in COLUMNS if k != "command")
TIER_STYLE = {"Normal": "green", "TrimSchemas": "cyan", "CompactHistory": "yellow", "AggressivePrune": "bold red"}


def _sort_value(a: AgentRow, key: str) -> tuple[float, str]:
    numeric = {
        "turn": a.last_turn, "pressure": a.pressure, "hit_recent": a.hit_rate_recent or 0.0,
        "hit": a.hit_rate or 0.0, "cost": a.cost_usd, "alerts": a.alerts, "rate": a.tokens_per_min,
        "tier": ("Normal", "TrimSchemas", "CompactHistory", "AggressivePrune").index(a.tier)
        if a.tier in TIER_STYLE else -1,
    }
    if key in numeric:
        return (float(numeric[key]), a.target)
    text = {"target": a.target.zfill(12), "model": a.model, "state": a.state}.get(key, a.target)
    return (0.0, text)


def cells(a: AgentRow) -> tuple[Text, ...]:
    live = a.state == "live"
    dim = "" if live else "dim"
    return (
        Text(a.target, style=dim),
        Text((a.model or "?")[:18], style=dim),
        Text(str(a.last_turn) if a.last_turn >= 0 else "-", justify="right"),
        Text(f"{a.pressure:.2f}" if a.turns else "-", justify="right",
             style="bold red" if a.pressure >= 0.9 else "yellow" if a.pressure >= 0.8 else ""),
        Text(a.tier or "-", style=TIER_STYLE.get(a.tier, "")),
        Text("-" if a.hit_rate_recent is None else f"{a.hit_rate_recent:.0%}", justify="right"),
        Text("-" if a.hit_rate is None else f"{a.hit_rate:.0%}", justify="right"),
        Text(f"{a.cost_usd:.4f}" + ("" if a.priced else "+"), justify="right"),
        Text(str(a.alerts), justify="right", style="yellow" if a.alerts else ""),
        Text(tok(a.tokens_per_min), justify="right"),
        Text(a.state, style="green" if live else "dim red"),
        Text(a.command[:60], style="dim"),
    )


class FleetTable(DataTable[str | Text]):
    BINDINGS = [Binding("enter", "attach", "Attach", show=True)]

    @dataclass
    class AttachRequested(Message):
        target: str

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)
        self.sort_key = "cost"
        self.reverse = True
        self.filter = ""
        # Rows are slots keyed "0".."n-1"; an agent moves between slots as the order changes, so a
        # re-sort costs the cells that differ, never a rebuild of the table.
        self._slots: list[str] = []  # target shown in each slot
        self._cells: list[tuple[Text, ...]] = []

    def on_mount(self) -> None:
        for key, label in COLUMNS:
            self.add_column(label, key=key, width=WIDTHS.get(key))

    def show(self, agents: list[AgentRow]) -> None:
        """Bring the table to `agents` (sorted and filtered); the cursor stays on the agent it was on."""
        wanted = [a for a in agents if self._matches(a)]
        wanted.sort(key=lambda a: _sort_value(a, self.sort_key), reverse=self.reverse)
        selected = self.selected_target()
        while len(self._slots) > len(wanted):
            self.remove_row(str(len(self._slots) - 1))
            self._slots.pop()
            self._cells.pop()
        for i, a in enumerate(wanted):
            row = cells(a)
            if i == len(self._slots):
                self.add_row(*row, key=str(i))
                self._slots.append(a.target)
                self._cells.append(row)
                continue
            old = self._cells[i]
            for (key, _), new, prev in zip(COLUMNS, row, old, strict=True):
                if new.plain != prev.plain or new.style != prev.style:
                    self.update_cell(str(i), key, new)
            self._slots[i], self._cells[i] = a.target, row
        if selected in self._slots and self._slots.index(selected) != self.cursor_row:
            self.move_cursor(row=self._slots.index(selected), animate=False)

    def selected_target(self) -> str | None:
        if not self.row_count or not 0 <= self.cursor_row < len(self._slots):
            return None
        return self._slots[self.cursor_row]

    def _matches(self, a: AgentRow) -> bool:
        if not self.filter:
            return True
        needle = self.filter.lower()
        return any(needle in s.lower() for s in (a.target, a.model, a.tier, a.state, a.command, a.provider))

    def action_attach(self) -> None:
        target = self.selected_target()
        if target is not None:
            self.post_message(self.AttachRequested(target))
