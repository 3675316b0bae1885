"""Tier panel: the compaction tier of this turn and why (raw, predictive, recovery escalation)."""

from __future__ import annotations

from textual.content import Content
from textual.markup import escape
from textual.reactive import reactive

from engine.trace_schema import Trace
from panels.fmt import signed, tier_markup, tok
from panels.line_panel import LinePanel


class TierPanel(LinePanel):
    DEFAULT_CSS = "TierPanel { height: auto; }"
    trace: reactive[Trace | None] = reactive(None, repaint=False)

    def on_mount(self) -> None:
        self.border_title = "Tier"

    def watch_trace(self) -> None:
        self.redraw()

    def lines(self, width: int) -> list[Content]:
        t = self.trace
        if t is None:
            return [Content("")]
        why = t["tier_reason"]
        recovery = "[bold $error]yes[/]" if why.get("recovery") else "no"
        saved = t["final_tokens"] - t["estimated_tokens"]
        error = f"\n[bold $error]error[/] {escape(t['error'] or '')}" if t.get("error") else ""
        alerts = len(t.get("alerts") or [])
        alert_txt = f"  [$warning]{alerts} alert(s)[/]" if alerts else ""
        return [Content.from_markup(
            f"{tier_markup(t['tier'])}  [$text-muted]turn[/] {t['turn']}{alert_txt}\n"
            f"[$text-muted]why[/] {escape(why.get('text', ''))}\n"
            f"[$text-muted]raw[/] {escape(why.get('raw', '-'))} [$text-muted]· pred[/] "
            f"{escape(why.get('predictive', '-'))} [$text-muted]· recovery[/] {recovery}\n"
            f"[$text-muted]planned[/] {tok(t['estimated_tokens'])} [$text-muted]→ sent[/] "
            f"[bold]{tok(t['final_tokens'])}[/] ({signed(saved)}), {len(t.get('actions') or [])} action(s)"
            f"{error}"
        )]
