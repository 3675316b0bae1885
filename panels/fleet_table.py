"""The fleet table of `cp-inspect top`: one row per agent (or proxy session), sortable and filterable.

Rows are keyed by target, so a refresh updates only the cells that changed (DataTable.update_cell) and
adds or removes rows as agents come and go; the cursor stays on the agent it was on."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.binding import Binding
from textual.message import Message
from textual.widgets import DataTable

from engine.fleet import AGENT_GONE, AgentRow
from engine.probe.watch import NO_SOCKET, STOPPED
from panels.fmt import fit_cells, model_in, tok

# (column key, header, sort key)
COLUMNS: tuple[tuple[str, str], ...] = (
    ("target", "PID"), ("model", "MODEL"), ("turn", "TURN"), ("pressure", "PRESS"), ("tier", "TIER"),
    ("hit_recent", "HIT 10"), ("hit", "HIT"), ("cost", "COST $"), ("alerts", "ALERTS"), ("rate", "TOK/MIN"),
    ("state", "STATE"), ("command", "COMMAND"),
)
# Fixed widths for columns whose content changes, so a new value never re-measures the table.
WIDTHS = {"target": 9, "model": 18, "turn": 5, "pressure": 5, "tier": 15, "hit_recent": 6, "hit": 4,
          "cost": 9, "alerts": 6, "rate": 7, "state": 10}  # ("agent gone": at 9 it read "agent gon")
SORT_KEYS = tuple(k for k, _ in COLUMNS if k != "command")
# Which columns stay when the table is narrower than all of them, most wanted first: at 80 columns the
# whole row is 122 cells wide, and COST $ (the default sort) and STATE were past the right edge, behind
# a horizontal scroll bar. The sorted column always stays, right after PID.
KEEP_ORDER = ("target", "cost", "state", "model", "pressure", "hit_recent", "turn", "hit", "tier", "alerts",
              "rate", "command")
CELL_PAD = 2  # DataTable's cell padding, one cell each side
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
    if key == "target":
        # By number: as text (zero-padded) a PID.SESSION target sorted after longer PIDs (1234 < 123.4).
        pid, _, session = a.target.partition(".")
        return (float(pid) if pid.isdigit() else 0.0, session.zfill(12) if session.isdigit() else a.target)
    text = {"model": a.model, "state": a.state}.get(key, a.target)
    return (0.0, text)


def visible_columns(width: int, sort_key: str = "cost") -> tuple[str, ...]:
    """The column keys to show in `width` cells, in table order: KEEP_ORDER's (the sorted column second)
    while they fit, a column too wide for what is left skipped for narrower ones after it. COMMAND counts
    as its header's width (it takes what is left). Two cells are kept for a vertical scroll bar."""
    labels = dict(COLUMNS)
    room = width - 2
    keep: set[str] = set()
    for key in dict.fromkeys(("target", sort_key, *KEEP_ORDER)):
        need = WIDTHS.get(key, len(labels[key])) + CELL_PAD
        if need <= room or key == "target":
            keep.add(key)
            room -= need
    return tuple(k for k, _ in COLUMNS if k in keep)


def command_room(shown: tuple[str, ...], width: int) -> int:
    """The cells COMMAND (the last column) has at `width` when the columns `shown` are on screen: what the
    others leave, the scroll bar's two cells kept (as visible_columns counts), at least its header's."""
    used = sum(WIDTHS.get(k, 0) + CELL_PAD for k in shown if k != "command")
    return max(len("COMMAND"), width - 2 - used - CELL_PAD)


def cells(a: AgentRow, command_cells: int = 60) -> tuple[Text, ...]:
    """The row's cells; the command in at most `command_cells` cells, cut with an ellipsis (it was cut at
    60 characters with no mark whatever the width: at 200 columns half the room stayed empty and the
    cut command read as the whole one)."""
    live = a.state == "live"
    dim = "" if live else "dim"
    return (
        Text(a.target, style=dim),
        Text(fit_cells(model_in(a.model or "?", WIDTHS["model"]), WIDTHS["model"]), style=dim),
        Text(str(a.last_turn) if a.last_turn >= 0 else "-", justify="right"),
        Text(f"{a.pressure:.2f}" if a.turns else "-", justify="right",
             style="bold red" if a.pressure >= 0.9 else "yellow" if a.pressure >= 0.8 else ""),
        Text(a.tier or "-", style=TIER_STYLE.get(a.tier, "")),
        Text("-" if a.hit_rate_recent is None else f"{a.hit_rate_recent:.0%}", justify="right"),
        Text("-" if a.hit_rate is None else f"{a.hit_rate:.0%}", justify="right"),
        Text(f"{a.cost_usd:.4f}" + ("" if a.priced else "+"), justify="right"),
        Text(str(a.alerts), justify="right", style="yellow" if a.alerts else ""),
        Text(tok(a.tokens_per_min), justify="right"),
        # Not attachable but still followed (its figures move), or stopped (they move again once it
        # continues): yellow, not the ended rows' dim red.
        Text(a.state, style="green" if live else "yellow" if a.state in (NO_SOCKET, STOPPED, AGENT_GONE)
             else "dim red"),
        Text(fit_cells(a.command, command_cells), style="dim"),
    )


class FleetTable(DataTable[str | Text]):
    BINDINGS = [Binding("enter", "attach", "Attach", show=True, tooltip="open the inspector on the highlighted agent")]

    @dataclass
    class AttachRequested(Message):
        """Enter on a row: the inspector to open on that agent (`target`, as `cp-inspect attach` takes it)."""

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
        self._shown: tuple[str, ...] = ()  # the column keys on screen
        self._agents: list[AgentRow] = []
        self._reselect: str | None = None  # the agent the cursor was on before the columns changed

    def on_mount(self) -> None:
        self._set_columns(visible_columns(self.size.width or 200, self.sort_key))

    def on_resize(self) -> None:
        self.show(self._agents)

    def _set_columns(self, shown: tuple[str, ...]) -> None:
        selected = self.selected_target()
        self.clear(columns=True)
        self._slots, self._cells, self._shown = [], [], shown
        labels = dict(COLUMNS)
        for key in shown:
            self.add_column(labels[key], key=key, width=WIDTHS.get(key))
        self._reselect = selected

    def show(self, agents: list[AgentRow]) -> None:
        """Bring the table to `agents` (sorted and filtered); the cursor stays on the agent it was on."""
        self._agents = agents
        shown = visible_columns(self.size.width or 200, self.sort_key)
        if shown != self._shown:  # a resize, or a sort by a column that was left out
            self._set_columns(shown)
        index = [k for k, _ in COLUMNS]
        picks = [index.index(k) for k in self._shown]
        wanted = [a for a in agents if self._matches(a)]
        wanted.sort(key=lambda a: _sort_value(a, self.sort_key), reverse=self.reverse)
        selected = self.selected_target() or self._reselect
        self._reselect = None
        while len(self._slots) > len(wanted):
            self.remove_row(str(len(self._slots) - 1))
            self._slots.pop()
            self._cells.pop()
        room = command_room(self._shown, self.size.width or 200)
        for i, a in enumerate(wanted):
            full = cells(a, room)
            row = tuple(full[j] for j in picks)
            if i == len(self._slots):
                self.add_row(*row, key=str(i))
                self._slots.append(a.target)
                self._cells.append(row)
                continue
            old = self._cells[i]
            for key, new, prev in zip(self._shown, row, old, strict=True):
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
        else:  # Enter on an empty table did nothing at all: say why
            why = ("none matches the filter (Esc clears it)" if self.filter and self._agents
                   else "none is shown yet")
            self.app.notify(f"no agent to attach to: {why}", title="attach", severity="warning",
                            timeout=5, markup=False)
