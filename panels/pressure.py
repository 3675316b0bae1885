"""Pressure gauge: raw and predictive pressure against the tier thresholds, the reserves that make
up the difference, and a sparkline of predictive pressure over the turns leading here."""

from __future__ import annotations

from textual.content import Content
from textual.reactive import reactive

from engine.trace_schema import Trace
from panels.fmt import block, tier_style, tok
from panels.line_panel import LinePanel, merge_runs

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

    def on_mount(self) -> None:
        self.border_title = "Pressure"

    def watch_trace(self) -> None:
        self.redraw()

    def lines(self, width: int) -> list[Content]:
        t = self.trace
        if t is None:
            return [Content("waiting for the first turn…")]
        raw, pred = t["pressure"]["raw"], t["pressure"]["predictive"]
        style = tier_style(t["tier"])
        col = [(i + 0.5) / width * SCALE for i in range(width)]
        ticks = {min(width - 1, int(t["thresholds"][k] / SCALE * width)): mark for k, mark in TICKS}
        one = min(width - 1, int(1.0 / SCALE * width))
        bar, labels = [], [" "] * width
        for i, frac in enumerate(col):
            if i in ticks:
                bar.append(("┃", "bold $foreground"))
                labels[i] = ticks[i]
            elif frac <= raw:
                bar.append(("█", style))
            elif frac <= pred:
                bar.append(("▒", style))
            else:
                bar.append(("─", "$gauge-empty"))
        if labels[one] == " ":
            labels[one] = "|"
        res = t["reserves"]
        muted = "$text-muted"
        # Assembled from (text, style) parts, not markup: parsing markup was most of this panel's work.
        window = (("  ", (f"of {tok(t['usable'])} usable / {tok(t['limit'])}", muted)) if width >= 50 else ())
        # Pressure is over what will be sent (the compacted history); the uncompacted figure beside it.
        whole = t["pressure"].get("raw_history")
        beside = (("  ", (f"uncompacted {whole:.2f}", muted)) if whole is not None and whole > raw + 0.005 else ())
        head = Content.assemble("raw ", (f"{raw:.2f}", "bold"), "  predictive ", (f"{pred:.2f}", f"bold {style}"),
                                *beside, *window)
        reserves = Content.assemble(
            ("reserves", muted), f" response {tok(res.get('response', 0))} · thinking "
            f"{tok(res.get('thinking', 0))} · schema {tok(res.get('schema', 0))}  ", (f"(+{pred - raw:.2f})", muted)
        )
        spark = merge_runs([(block(p, SCALE), tier_style(tier)) for p, tier in self.recent[-(width - 8):]])
        return [
            head,
            Content.assemble(*merge_runs(bar)),
            Content.assemble(("".join(labels), muted)),
            reserves,
            Content.assemble(("history ", "$text-muted"), *spark),
        ]
