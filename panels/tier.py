"""Tier panel: the compaction tier of this turn and why (raw, predictive, recovery escalation)."""

from __future__ import annotations

from textual.content import Content
from textual.reactive import reactive
from textual.visual import VisualType
from textual.widget import Widget

from engine.capture.lineage import AMBIGUOUS_KEY, BRANCH_KEY, ambiguous_short, branch_short
from engine.trace_schema import Trace
from engine.wording import counted
from panels.fmt import one_line, signed, tier_style
from panels.line_panel import LinePanel
from panels.provider_scale import PROVIDER, ratio, sent, shown


class TierPanel(LinePanel):
    DEFAULT_CSS = "TierPanel { height: auto; }"
    trace: reactive[Trace | None] = reactive(None, repaint=False)
    _whole_error: str | None = None  # the error line whole, when it is shown cut (the tooltip)

    def on_mount(self) -> None:
        self.border_title = "Tier"

    def watch_trace(self) -> None:
        self.redraw()

    def lines(self, width: int) -> list[Content]:
        # Assembled from (text, style) parts, not markup: parsing markup was most of a step's work
        # in this panel, and the texts (reasons, errors) need no escaping this way.
        t = self.trace
        self._whole_error = None  # (set by _cut, for the tooltip)
        if t is None:
            return [Content("")]
        why = t["tier_reason"]
        muted = "$text-muted"
        recovery = ("yes", "bold $error") if why.get("recovery") else "no"
        # On the provider's scale, as the timeline's "sent" and the cache layout's "of": the engine's own
        # counts here (planned 16k -> sent 16k) beside the provider's count there (of 18k) read as two sizes
        # of one prompt. Sent is the provider's count once it arrives; the plan, which it does not count, is
        # estimated with this request's own ratio (≈), as the cache layout's prefix is.
        size, estimated = sent(t)
        per = ratio(t)
        planned = round(t["estimated_tokens"] * per)
        saved = size - planned
        alerts = len(t.get("alerts") or [])
        lines = [
            Content.assemble((t["tier"], f"bold {tier_style(t['tier'])}"), "  ", ("turn", muted), f" {t['turn']}",
                             *(("  ", (counted(alerts, "alert"), "$warning")) if alerts else ())),
            Content.assemble(("why", muted), f" {why.get('text', '')}"),
            _tiers(why.get("raw", "-"), why.get("predictive", "-"), recovery, width),
            _planned(shown(planned, True), shown(size, estimated), signed(saved),
                     counted(len(t.get("actions") or []), "action")),
        ]
        # The scale after the figures where the row holds it, else on a row of its own while the panel has
        # one spare (the pressure panel beside it has five; at 120 columns this one is 46 wide).
        if lines[-1].cell_length + len(SCALE) <= width:
            lines[-1] += Content.styled(SCALE, muted)
        else:
            lines.append(Content.styled(SCALE_ROW, muted))
        branch = t.get(BRANCH_KEY)
        if isinstance(branch, dict):
            # A captured session's first turn: its conversation shares another session's opening (a
            # restart, another attempt, a fork). Second, under the tier: at 80x24 the panel shows three
            # lines. `?` and the status line's tooltip say it whole, on every turn (status_whole).
            lines.insert(1, Content.assemble(("new session", "$accent"), f" {branch_short(branch)}"))
        unsure = t.get(AMBIGUOUS_KEY)
        if isinstance(unsure, dict):
            # A captured request other sessions fit as well, filed with the earliest of them: this turn may
            # be another attempt's. Under the tier (and the branch) for the same reason; the status line's
            # tooltip and `?` say it whole (status_whole), as explain does.
            at = 2 if isinstance(branch, dict) else 1
            lines.insert(at, Content.assemble(("unsure", "$warning"), f" {ambiguous_short(unsure)}"))
        tried = t.get("retries")
        if isinstance(tried, list) and tried:
            # Failed attempts the agent's SDK sent again before this call's answer (a 429, an overload:
            # engine/capture/proxy/retries.py), as explain's "retried:" line says them. Under the tier (the
            # error, when every attempt failed, above it): at 80x24 the panel shows three rows, and a
            # rate-limited agent's turns looked like any other here.
            said = ", ".join("not reached" if a.get("status") is None else f"HTTP {a['status']}" for a in tried)
            lines.insert(1, Content.assemble(("retried", "$warning"), f" after {said}"))
        if t.get("error"):
            # The call got no answer (an upstream 429/500, a broken stream): first under the tier, above
            # the notes. Last, it was under the panel's edge at 120x40 (the scale's own row above it) and
            # at 80x24 (three rows): an error turn looked like any other but for the timeline's "!".
            # The trace says "KIND: MESSAGE"; a failure of no known kind is "error: ...", which read
            # "error error: cp-inspect proxy: could not reach the upstream ..." after the label.
            said = one_line(t["error"] or "").removeprefix("error: ")
            error = Content.assemble(("error", "bold $error"), f" {said}")
            if isinstance(tried, list) and tried:
                # Every attempt failed: the error (an API's JSON body) wrapped over every row the panel
                # has, under it the "retried after" line, out of view at 80x24 and 120x40. Cut to the
                # rows left beside the tier's and the retried line's, with "…"; the whole error is the
                # panel's tooltip (and explain's "call failed:").
                error = self._cut(error, width, self.size.height - 2)
            lines.insert(1, error)
        return lines

    @property
    def tooltip(self) -> VisualType | None:
        return self._whole_error if self._whole_error is not None else self._tooltip

    @tooltip.setter
    def tooltip(self, tooltip: VisualType | None) -> None:
        Widget.tooltip.fset(self, tooltip)  # type: ignore[attr-defined]

    def _cut(self, line: Content, width: int, rows: int) -> Content:
        """`line` in at most `rows` rows of `width` (at least one), wrapped as the panel wraps it, the
        last row ending with "…" when cut; the whole line is then the tooltip."""
        wrapped = line.wrap(width)
        if len(wrapped) <= max(1, rows):
            return line
        self._whole_error = line.plain
        kept = wrapped[:max(1, rows)]
        last = kept[-1]
        kept[-1] = last + "…" if last.cell_length < width else last.truncate(width - 1) + "…"
        return Content("\n").join(kept)


def _tiers(raw: str, pred: str, recovery: str | tuple[str, str], width: int) -> Content:
    """The tier each pressure asks for, and whether an error escalated it. At 80 columns (a 40-column
    panel) "raw TrimSchemas · pred TrimSchemas · recovery no" was cut after "pred TrimSchemas ·" with no
    sign: one tier named once when both ask for it, and a cut that still does not fit ends with "…"."""
    muted = "$text-muted"
    line = Content.assemble(("raw", muted), f" {raw} ", ("· pred", muted), f" {pred} ", ("· recovery", muted), " ",
                            recovery)
    if line.cell_length > width and raw == pred:
        line = Content.assemble(("raw, pred", muted), f" {raw} ", ("· recovery", muted), " ", recovery)
    return line if line.cell_length <= width else line.truncate(width, ellipsis=True)


SCALE = f"  {PROVIDER}"
SCALE_ROW = f"planned, sent: the {PROVIDER}"


def _planned(planned: str, sent: str, saved: str, actions: str) -> Content:
    """The plan's size against what was sent, both on the provider's scale (the plan estimated: ≈)."""
    muted = "$text-muted"
    return Content.assemble(("planned", muted), f" {planned} ", ("→ sent", muted), " ", (sent, "bold"),
                            f" ({saved}), {actions}")
