"""Pressure gauge: raw and predictive pressure against the tier thresholds, the reserves that make
up the difference, and a sparkline of predictive pressure over the turns leading here."""

from __future__ import annotations

from bisect import bisect_right

from textual.content import Content
from textual.reactive import reactive

from engine.trace_schema import Trace
from panels.fmt import block, tier_style, tok
from panels.line_panel import Keyed, Line, LinePanel, merge_runs

SCALE = 1.1  # predictive pressure can exceed 1.0; keep the overflow visible
TICKS = (("trim_schemas", "T"), ("compact_history", "C"), ("aggressive_prune", "A"))


class PressurePanel(LinePanel):
    DEFAULT_CSS = "PressurePanel { height: auto; }"
    trace: reactive[Trace | None] = reactive(None, repaint=False)

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        # (predictive pressure, tier) of the turns up to the current one, newest last. A plain
        # attribute, set before `trace`: the panel redraws once per step, when the trace is set.
        self.recent: list[tuple[float, str]] = []
        self._columns: list[float] = []  # see _fractions
        self._cells: dict[tuple[float, str], tuple[str, str]] = {}  # (pressure, tier) -> its sparkline cell

    def on_mount(self) -> None:
        self.border_title = "Pressure"

    def watch_trace(self) -> None:
        self.redraw()

    def lines(self, width: int) -> list[Line]:
        t = self.trace
        if t is None:
            return [Content("waiting for the first turn…")]
        raw, pred = t["pressure"]["raw"], t["pressure"]["predictive"]
        style = tier_style(t["tier"])
        thresholds = tuple(t["thresholds"][k] for k, _ in TICKS)
        # Each line is keyed by what it shows (panels/line_panel.py, Keyed): a step that leaves a line's
        # figures as they were builds nothing for it. The bar by how many of its cells each fill covers
        # (the columns' fractions ascend, so a bisection counts them), not by the pressures themselves,
        # which differ in the last digits on nearly every turn.
        col = self._fractions(width)
        full, part = _covered(col, raw), _covered(col, pred)
        muted = "$text-muted"
        # Pressure is over what will be sent (the compacted history); the uncompacted figure beside it.
        whole = t["pressure"].get("raw_history")
        window = f"of {tok(t['usable'])} usable / {tok(t['limit'])}" if width >= 50 else None
        raw_s, pred_s = f"{raw:.2f}", f"{pred:.2f}"
        beside, label = uncompacted(whole, raw, len(raw_s) + len(pred_s), window, width)
        # The head is one line: wrapped (the uncompacted figure on a line of its own at 80 columns), it
        # pushed the bar down and the tier marks (T C A) out of the narrow layout's three rows.
        if len(raw_s) + len(pred_s) + (len(beside) + 2 if beside else 0) + 17 > width:
            label = "pred"
        head = (raw_s, pred_s, style, beside, window, label, width)
        res = t["reserves"]
        reserves = (f" response {tok(res.get('response', 0))} · thinking {tok(res.get('thinking', 0))} · schema "
                    f"{tok(res.get('schema', 0))}  ", f"(+{pred - raw:.2f})")
        recent = tuple(self.recent[-(width - 8):])
        return [
            Keyed(("head", *head), lambda: _head(*head)),
            Keyed(("bar", full, part, style, thresholds), lambda: _bar(width, full, part, style, thresholds)),
            Keyed(("labels", thresholds), lambda: _labels(width, thresholds)),
            Keyed(("reserves", *reserves), lambda: Content.assemble(("reserves", muted), reserves[0],
                                                                    (reserves[1], muted))),
            Keyed(("history", recent), lambda: self._history(recent)),
        ]

    def _fractions(self, width: int) -> list[float]:
        """The pressure at the middle of each column of the bar (ascending), kept for the width."""
        if len(self._columns) != width:
            self._columns = [(i + 0.5) / width * SCALE for i in range(width)]
        return self._columns

    def _history(self, recent: tuple[tuple[float, str], ...]) -> Content:
        cells = self._cells
        if len(cells) > 4096:
            cells.clear()
        spark = []
        for point in recent:
            cell = cells.get(point)
            if cell is None:
                cell = cells[point] = (block(point[0], SCALE), tier_style(point[1]))
            spark.append(cell)
        return Content.assemble(("history ", "$text-muted"), *merge_runs(spark))


def times_window(whole: float) -> str:
    """A multiple of the window in at most four characters: 0.95, 1.50, 15.5, 152."""
    if whole < 9.995:
        return f"{whole:.2f}"
    if whole < 99.95:
        return f"{whole:.1f}"
    return f"{whole:.0f}"


def uncompacted(
    whole: float | None, raw: float, figures: int, window: str | None, width: int
) -> tuple[str | None, str]:
    """The whole conversation's tokens as a multiple of the window, beside pressure over what is sent
    (None when nothing was compacted away), and the word for predictive pressure. Read bare, the
    demo's "15.52" beside "0.37" looked like a pressure gone wrong; it is fifteen and a half windows of
    conversation (the demo's grep of every `def` in the repository is 13 windows on its own, sent
    spilled). The longest wording that leaves the head on one line with the window's size, shortening
    "predictive" to "pred" before the wording (`figures`: the raw and predictive figures' characters;
    "raw " and "  predictive " are 17, "pred" 6 fewer)."""
    if whole is None or whole <= raw + 0.005:
        return None, "predictive"
    m = times_window(whole)
    rest = figures + (len(window) + 2 if window else 0)
    for words in (f"uncompacted {m}× the window", f"uncompacted {m}× window"):
        for label, around in (("predictive", 17), ("pred", 11)):
            if rest + around + 2 + len(words) <= width:
                return words, label
    return f"uncompacted {m}×", "predictive"


def _covered(fractions: list[float], pressure: float) -> int:
    """How many columns have `fraction <= pressure` (none for a NaN, which compares false to all)."""
    return bisect_right(fractions, pressure) if pressure == pressure else 0


def _ticks(width: int, thresholds: tuple[float, ...]) -> dict[int, str]:
    return {min(width - 1, int(value / SCALE * width)): mark for value, (_, mark) in zip(thresholds, TICKS, strict=True)}


def _head(raw: str, pred: str, style: str, beside: str | None, window: str | None, label: str = "predictive",
          width: int | None = None) -> Content:
    muted = "$text-muted"
    head = Content.assemble("raw ", (raw, "bold"), f"  {label} ", (pred, f"bold {style}"),
                            *(("  ", (beside, muted)) if beside is not None else ()),
                            *(("  ", (window, muted)) if window is not None else ()))
    # Narrower still, the end is cut (with an ellipsis) rather than wrapped onto the bar's row.
    return head if width is None or head.cell_length <= width else head.truncate(width, ellipsis=True)


def _bar(width: int, full: int, part: int, style: str, thresholds: tuple[float, ...]) -> Content:
    """The gauge: raw pressure's columns filled, predictive's shaded, the tier thresholds' ticks over them."""
    ticks = _ticks(width, thresholds)
    bar = []
    for i in range(width):
        if i in ticks:
            bar.append(("┃", "bold $foreground"))
        elif i < full:
            bar.append(("█", style))
        elif i < part:
            bar.append(("▒", style))
        else:
            bar.append(("─", "$gauge-empty"))
    return Content.assemble(*merge_runs(bar))


def _labels(width: int, thresholds: tuple[float, ...]) -> Content:
    labels = [" "] * width
    for i, mark in _ticks(width, thresholds).items():
        if 0 <= i:  # as the bar's loop places them (a negative threshold gets no tick)
            labels[i] = mark
    one = min(width - 1, int(1.0 / SCALE * width))
    if labels[one] == " ":
        labels[one] = "|"
    return Content.assemble(("".join(labels), "$text-muted"))
