"""Cache-marker layout: the request as a strip of blocks proportional to tokens, coloured by cache
scope, with marker positions, the cacheable prefix, what the provider served from cache, and the
block where this turn's cache broke (with its cause)."""

from __future__ import annotations

import re

from rich.cells import cell_len
from textual.content import Content
from textual.reactive import reactive

from engine.marker_note import note_of as marker_note
from engine.trace_schema import Trace
from engine.wording import counted
from panels.fmt import fit_cells, one_line, scope_style, tok
from panels.line_panel import Keyed, Line, LinePanel, merge_runs
from panels.provider_scale import SCALE_COUNTED, SCALE_COUNTED_RATIO, SCALE_LEARNED, SCALE_UNCALIBRATED

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
        # The figures are the provider's tokens, what the cache is billed in: the reads and the prompt as the
        # provider counted them. The marked prefix it does not count: estimated on its scale, as its share of
        # the prompt the provider counted (this request's own ratio), or, before the provider's count
        # arrives (a live turn) or from a provider that gives none, with the session's learned calibration
        # (the trace's `calibration`, the ratio the plan used). The calibration beside the provider's own
        # counts contradicted them: a prefix printed larger than the prompt it is part of, or served past
        # it while the hit rate says it was not (2 of 93 turns of the pydicom-1413 mini-swe-agent import).
        ratio = prompt / total if prompt else float(t.get("calibration") or 1.0)
        prefix_est = round(prefix_tokens * ratio)
        # The strip's scale is the engine's (its sections): the served line covers the share of the request
        # the provider read from cache, the hit rate printed beside it, not the provider's count laid on
        # the engine's axis (6% further on the demo agent's recording, past what the hit rate says).
        served = col(round(min(read / prompt, 1.0) * total) if prompt else min(round(read / ratio), total))
        # Over the provider's count of the prompt, as the timeline, `top`, simulate and the spans state it; a
        # usage without one (reads only) over the calibrated estimate of it, shown as such.
        whole = prompt or round(total * ratio)
        hit = f"{read / whole:.0%}" if usage else "n/a"
        of = tok(prompt) if prompt else "≈" + tok(whole) if usage else None
        cause = f"✖ broke at {broke}: {(t['cache_break'] or {}).get('cause', '')}" if broke else None
        # Past the prefix the engine marked only when the provider caches on its own (OpenAI's automatic
        # prefix caching reads whatever the previous request shared): said, not left to look like an error.
        # (Said when the printed figures differ: the prefix's estimate is a few tokens off.)
        beyond = read > prefix_est and tok(read) != tok(prefix_est)
        # Longest first: the first that fits is said.
        scale = ((*(w.format(ratio) for w in SCALE_COUNTED_RATIO), SCALE_COUNTED) if prompt
                 else (SCALE_LEARNED.format(ratio),) if ratio != 1.0 else (SCALE_UNCALIBRATED,))
        shown = ("≈" if prefix_est else "") + tok(prefix_est)  # an estimate; none marked is none
        summary = (len(markers), shown, tok(read), of, hit, scale,
                   beyond, cause, width)
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


def _summary(markers: int, prefix: str, served: str, prompt: str | None, hit: str, scale: tuple[str, ...], beyond: bool,
             cause: str | None, width: int) -> Content:
    """The cache line's figures, all on the provider's scale (its counts of the reads and of the prompt, the
    prefix estimated on it, marked ≈), then what explains them as far as the row holds: why served runs
    past the prefix when it does, and which scale the figures are on. The break's cause is never pushed
    out by them."""
    # Assembled from (text, style) parts, not markup: parsing markup was most of this panel's work.
    of = f" of {prompt}" if prompt is not None else ""
    parts: list[str | tuple[str, str]] = [
        ("▲", "$accent"), f" {counted(markers, 'marker')}  ", ("─", "$primary"), f" prefix {prefix}  ",
        ("━", "$cache-served"), f" served {served}{of} ({hit})",
    ]
    broke = f"  {cause}" if cause is not None else ""
    used = sum(cell_len(p if isinstance(p, str) else p[0]) for p in parts) + cell_len(broke)
    # Each said whole or not at all (a cut figure would mislead); the scale in the longest wording that fits.
    extras = [("  read past the marked prefix",) if beyond else (), tuple(f"  {s}" for s in scale)]
    for wordings in extras:
        extra = next((w for w in wordings if used + cell_len(w) <= width), None)
        if extra is not None:
            parts.append((extra, "$text-muted"))
            used += cell_len(extra)
    if cause is not None:
        parts += ["  ", (cause, "bold $cache-break")]
    return Content.assemble(*parts)
