"""Skipped optimizations (each gated-off step, why, and what it would have saved), with the
steps that did apply underneath for contrast."""

from __future__ import annotations

from textual.content import Content
from textual.geometry import Size
from textual.reactive import reactive
from textual.widget import Widget

from engine.trace_schema import Trace
from panels.fmt import literal, tok

SAVED_SCALE = "tokens saved: the engine's (cl100k), as the sections manifest counts"


class SkippedPanel(Widget):
    DEFAULT_CSS = "SkippedPanel { height: auto; }"
    # Not a repainting reactive: the panel sits behind another tab most of the time, and repainting a
    # widget that is not on screen makes the compositor map the whole screen again (~1 ms a step).
    trace: reactive[Trace | None] = reactive(None, repaint=False)

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._stale = False

    def on_mount(self) -> None:
        self.border_title = "Skipped optimizations"

    def watch_trace(self) -> None:
        if self.region:  # on screen (a hidden tab's widgets have no region)
            self.refresh(layout=True)  # height: auto
        else:
            self._stale = True

    def on_show(self) -> None:
        if self._stale:
            self._stale = False
            self.refresh(layout=True)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self._rows(width))

    def render(self) -> Content:
        return Content("\n").join(self._rows(self.content_region.width))

    def _rows(self, width: int) -> list[Content]:
        """The panel's rows at `width` cells: an entry too long for it wraps under its own text, past the
        ✗ or ✓ that starts it (a hanging indent). Wrapped whole, its second row began at the panel's
        edge, under the ✓, and the entries ran together ("...the 1 / turns it is expected to last")."""
        rows: list[Content] = []
        for lead, text in self._entries():
            body = Content.from_markup(text)
            hang = Content.from_markup(lead).cell_length
            if width <= hang + 8 or hang + body.cell_length <= width:  # (too narrow to indent: as is)
                rows.append(Content.from_markup(lead + text))
                continue
            for n, part in enumerate(body.wrap(width - hang)):
                rows.append((Content.from_markup(lead) if n == 0 else Content(" " * hang)) + part.rstrip())
        return rows

    def _entries(self) -> list[tuple[str, str]]:
        """The panel's entries as (lead, text) markup: the lead (a mark, indented) and what it says."""
        t = self.trace
        if t is None:
            return []
        lines: list[tuple[str, str]] = []
        skipped = t.get("skipped") or []
        if not skipped:
            lines.append(("", "[$success]✓ no optimization was skipped on this turn[/]"))
        # Figures say they are tokens, and a step that saves none (reorder, place_markers: they move
        # things for the cache) says nothing of it: "saved 0" after each read as if it had failed. The
        # figure is in parentheses, as explain gives it: run on after the reason it read as the reason's
        # ("... costs more than waiting for a deeper one  would save 3.7k tokens").
        for s in skipped:
            saves = (
                f"  ([$text-muted]would save[/] [bold]{tok(s.get('tokens_saved'))}[/] tokens)"
                if s.get("tokens_saved")
                else ""
            )
            lines.append(
                (
                    "[bold $warning]✗[/] ",
                    f"[bold $warning]{literal(s['step'])}[/]  {literal(s.get('reason', ''))}{saves}",
                )
            )
        would = sum(s.get("tokens_saved") or 0 for s in skipped)
        if would:
            lines.append(("", f"[$text-muted]total left on the table:[/] [bold]{tok(would)}[/] tokens"))
        lines.append(("", ""))
        actions = t.get("actions") or []
        lines.append(
            ("", "[$text-muted]applied:[/]" if actions else "[$text-muted]applied: nothing[/]")
        )
        for a in actions:
            saved = (
                f"  ([$text-muted]saved[/] {tok(a.get('tokens_saved'))} tokens)"
                if a.get("tokens_saved")
                else ""
            )
            lines.append(("  [$success]✓[/] ", f"{literal(a['step'])}  {literal(a.get('detail', ''))}{saved}"))
        if would or any(a.get("tokens_saved") for a in actions):
            # The steps measure what they save with the engine's tokenizer (as the manifest and explain
            # count it), not on the provider's scale the tier and the timeline show: said once, under them.
            lines.append(("", ""))
            lines.append(("", f"[$text-muted]{SAVED_SCALE}[/]"))
        return lines
