"""Section manifest: the request's sections in send order with budget, planned and sent tokens,
form, a short content hash and whether the section changed since the previous turn."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.message import Message
from textual.widgets import DataTable
from textual.widgets.data_table import ColumnKey

from engine.trace_schema import Trace, TraceSection
from panels.fmt import tok
from panels.keys import TURN_KEYS

COLUMNS = ("section", "kind", "scope", "prio", "budget", "plan", "sent", "form", "Δ", "hash")
# Narrow terminals drop the columns a person can live without, so 80 columns need no scrolling.
COMPACT_COLUMNS = ("section", "scope", "prio", "budget", "plan", "sent", "form", "Δ")
FORM_STYLE = {"full": "", "trimmed": "yellow", "cleared": "cyan", "spilled": "magenta",
              "dropped": "red strike", "degraded": "bold red"}


def form_text(section: TraceSection) -> Text:
    form = section["form"]
    label = f"trimmed −{tok(section['omitted'])}" if form == "trimmed" and section.get("omitted") else form
    return Text(label, style=FORM_STYLE.get(form, ""))


@dataclass
class SectionSelected(Message):
    section_id: str


class ManifestPanel(DataTable):
    """A DataTable whose Left/Right/Home/End step turns, as everywhere else in the app."""

    BINDINGS = TURN_KEYS

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)
        self._trace: Trace | None = None
        self._cells: dict[str, dict[str, str | Text]] = {}  # section id -> column -> cell, as shown
        self.compact = False

    def on_mount(self) -> None:
        self.border_title = "Sections (send order)"
        self._add_columns()

    def _add_columns(self) -> None:
        for label in COMPACT_COLUMNS if self.compact else COLUMNS:
            self.add_column(label, key=label)

    def set_compact(self, compact: bool) -> None:
        if compact != self.compact:
            self.compact = compact
            self.clear(columns=True)
            self._add_columns()
            trace, self._trace, self._cells = self._trace, None, {}
            self.show(trace)

    def show(self, trace: Trace | None) -> None:
        """Show a turn's sections, keeping the cursor on the same section.

        Consecutive turns usually have the same sections in the same order: then only the cells that
        differ are updated in place. Clearing and re-adding every row moved the cursor, which posted
        a second SectionSelected (a second content fetch) per step.
        """
        selected = self.selected_section()
        prev_ids = [s["id"] for s in self._trace["sections"]] if self._trace is not None else None
        self._trace = trace
        if trace is None:
            self._cells = {}
            self.clear()
            return
        columns = COMPACT_COLUMNS if self.compact else COLUMNS
        ids = [s["id"] for s in trace["sections"]]
        rows = {s["id"]: self._row_cells(s) for s in trace["sections"]}
        if ids == prev_ids and self.row_count == len(ids) and self._cells:
            for sid, cells in rows.items():
                old = self._cells.get(sid, {})
                for c in columns:
                    if old.get(c) != cells[c]:
                        self.update_cell(sid, c, cells[c], update_width=self._wider(c, cells[c]))
            self._cells = rows
            return
        self._cells = rows
        self.clear()
        for sid in ids:
            self.add_row(*(rows[sid][c] for c in columns), key=sid)
        if selected in ids:
            self.move_cursor(row=ids.index(selected), animate=False)

    @staticmethod
    def _row_cells(s: TraceSection) -> dict[str, str | Text]:
        over = s["tokens"] > s["budget"]
        return {
            "section": s["name"][:16], "kind": s["kind"], "scope": s["scope"], "prio": s["priority"],
            "budget": Text(tok(s["budget"]), justify="right"),
            "plan": Text(tok(s["planned"]), justify="right"),
            "sent": Text(tok(s["tokens"]), style="bold red" if over else "bold", justify="right"),
            "form": form_text(s), "Δ": "●" if s["changed"] else "", "hash": s["sha256"][:7],
        }

    def _wider(self, column: str, value: str | Text) -> bool:
        """Does `value` need a wider column? (Measuring every cell on every step would re-lay the table.)"""
        width = value.cell_len if isinstance(value, Text) else len(value)
        return width > self.columns[ColumnKey(column)].content_width

    def selected_section(self) -> str | None:
        if self._trace is None or not self.row_count:
            return None
        row = min(self.cursor_row, len(self._trace["sections"]) - 1)
        return self._trace["sections"][row]["id"] if row >= 0 else None

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        if event.row_key.value is not None:
            self.post_message(SectionSelected(event.row_key.value))
