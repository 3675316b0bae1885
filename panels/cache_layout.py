"""Cache-marker layout: the request as a strip of blocks proportional to tokens, coloured by cache
scope, with marker positions, the cacheable prefix, what the provider served from cache, and the
block where this turn's cache broke (with its cause)."""

from __future__ import annotations

import re

from rich.cells import cell_len
from textual.content import Content
from textual.reactive import reactive

from engine.optimize.markers import note_of as marker_note
from engine.trace_schema import Trace
from engine.wording import counted
from panels.fmt import fit_cells, one_line, scope_style, tok
from panels.line_panel import Keyed, Line, LinePanel, merge_runs

# The same every turn: parsed once (theme variables are resolved when drawn, so a theme change is fine).
LEGEND = Content.from_markup(
    "[$text on $scope-global] global [/] [$text on $scope-session] session [/] "
    "[$text on $scope-none] none [/] [$text-muted]blocks ∝ tokens, in send order[/]"
)


def _columns(tokens: list[int], width: int) -> list[int]:
    """Cells per section: proportional, at least one for any non-empty section, summing to width."""
    total = sum(tokens) or 1
    cells = [max(1, round(n / total * width)) if n else 0 for n in tokens]
    while sum(cells) > width and max(cells) > 1:
        cells[cells.index(max(cells))] -= 1
    if cells and sum(cells) < width:
        cells[cells.index(max(cells))] += width - sum(cells)
    return cells


class CacheLayoutPanel(LinePanel):
    DEFAULT_CSS = "CacheLayoutPanel { height: auto; }"
    trace: reactive[Trace | None] = reactive(None, repaint=False)

    def on_mount(self) -> None:
        self.border_title = "Cache layout"

    def watch_trace(self) -> None:
        self.redraw()

    def lines(self, width: int) -> list[Line]:
        t = self.trace
        if t is None:
            return [Content("")]
        sections = [s for s in t["sections"] if s["tokens"] > 0]
        total = sum(s["tokens"] for s in sections) or 1
        cells = _columns([s["tokens"] for s in sections], width)
        broke = (t.get("cache_break") or {}).get("section")
        # Each line keyed by what it shows (panels/line_panel.py, Keyed): the sections' cells and the
        # cache line's columns move far less often than the token counts under them change.
        blocks = tuple((s["name"], s["scope"], s["id"] == broke, n) for s, n in zip(sections, cells, strict=True))

        def col(offset: int) -> int:
            return min(width - 1, round(offset / total * width))

        markers = tuple(max(0, col(m["offset_tokens"]) - 1) for m in t.get("markers") or [])
        prefix_tokens = t.get("cacheable_prefix_tokens") or 0
        prefix = col(prefix_tokens)
        usage = t.get("usage") or {}
        read = usage.get("cache_read_tokens") or 0
        prompt = usage.get("input_tokens") or 0
        # The reads are the provider's tokens, the strip's scale the engine's (its sections): the served
        # line covers the share of the request the provider read from cache, the hit rate printed
        # beside it, not the provider's count laid on the engine's axis (6% further on the demo agent's
        # recording, past what the hit rate says). The figure printed is on that scale too: the
        # provider's count beside the engine's prefix read "prefix 33k ━ served 37k (98%)", a part
        # larger than its whole; the provider's own count follows, labelled.
        served_tokens = round(min(read / prompt, 1.0) * total) if prompt else read
        served = col(served_tokens)
        hit = f"{read / (prompt or 1):.0%}" if usage else "n/a"
        cause = f"✖ broke at {broke}: {(t['cache_break'] or {}).get('cause', '')}" if broke else None
        # Past the prefix the engine marked only when the provider caches on its own (OpenAI's automatic
        # prefix caching reads whatever the previous request shared): said, not left to look like an error.
        # (Said when the printed figures differ: the share scaled to the engine's count is a few tokens off.)
        beyond = served_tokens > prefix_tokens and tok(served_tokens) != tok(prefix_tokens)
        provider = (tok(read), tok(prompt)) if read and prompt else None
        summary = (len(markers), tok(prefix_tokens), tok(served_tokens), hit, provider, beyond, cause, width)
        out: list[Line] = [
            Keyed(("blocks", blocks), lambda: _blocks(blocks)),
            Keyed(("cache", markers, served, prefix), lambda: _cache_line(width, markers, served, prefix)),
            Keyed(("summary", *summary), lambda: _summary(*summary)),
        ]
        # Why fewer markers than the provider allows (a flipped latch, prefixes under the model's
        # minimum): "0 marker(s)" alone reads like a fault.
        note = marker_note(t.get("steps") or [])
        if note:
            out.append(Keyed(("why", note, width), lambda: _left_out(note, width)))
        out.append(LEGEND)
        return out


LEFT_OUT = "▲ left out: "


def _left_out(note: str, width: int) -> Content:
    """Why markers were left out, on its one row. The note names each short prefix's place in parentheses
    ("(end of tools at 224, global scope boundary at 278, ...)"): at 120 columns the row was cut at the
    edge inside them with no sign. Too long, the places go first (explain and the Skipped tab give them
    whole); what still does not fit ends with an ellipsis."""
    if cell_len(LEFT_OUT + note) > width:
        note = re.sub(r" \([^()]*\)", "", note)
    return Content.assemble((LEFT_OUT, "$text-muted"), fit_cells(note, width - cell_len(LEFT_OUT)))


def _blocks(blocks: tuple[tuple[str, str, bool, int], ...]) -> Content:
    """The request as blocks: each section's name in its cells, coloured by its cache scope."""
    strip: list[tuple[str, str]] = []
    for name, scope, broke, n in blocks:
        name = "✖ " + one_line(name) if broke else one_line(name)
        label = (name[: n - 1] + " ").ljust(n) if n >= 4 else " " * n
        style = "bold $text on $cache-break" if broke else f"$text on {scope_style(scope)}"
        strip.append((label, style))
    return Content.assemble(*strip)


def _cache_line(width: int, markers: tuple[int, ...], served: int, prefix: int) -> Content:
    """One line for the cache: ━ served by the provider, ─ rest of the cacheable prefix, ▲ markers."""
    marks = [" "] * width
    for x in markers:
        marks[x] = "▲"
    cache_line = [("▲", "bold $accent") if marks[i] == "▲" else ("━", "$cache-served") if i < served
                  else ("─", "$primary") if i < prefix else (" ", "") for i in range(width)]
    return Content.assemble(*merge_runs(cache_line))


def _summary(markers: int, prefix: str, served: str, hit: str, provider: tuple[str, str] | None, beyond: bool,
             cause: str | None, width: int) -> Content:
    """The cache line's figures, all in the engine's tokens (the strip's scale), then what explains them as
    far as the row holds: why served runs past the prefix when it does, and the provider's own count of
    its reads and of the prompt (what the hit rate is of). The break's cause is never pushed out by them."""
    # Assembled from (text, style) parts, not markup: parsing markup was most of this panel's work.
    parts: list[str | tuple[str, str]] = [
        ("▲", "$accent"), f" {counted(markers, 'marker')}  ", ("─", "$primary"), f" prefix {prefix}  ",
        ("━", "$cache-served"), f" served {served} ({hit})",
    ]
    broke = f"  {cause}" if cause is not None else ""
    used = sum(cell_len(p if isinstance(p, str) else p[0]) for p in parts) + cell_len(broke)
    extras = ["  read past the marked prefix" if beyond else "",
              f"  provider counts {provider[0]} of {provider[1]}" if provider is not None else ""]
    for extra in extras:  # each said whole or not at all: a cut figure would mislead
        if extra and used + cell_len(extra) <= width:
            parts.append((extra, "$text-muted"))
            used += cell_len(extra)
    if cause is not None:
        parts += ["  ", (cause, "bold $cache-break")]
    return Content.assemble(*parts)
