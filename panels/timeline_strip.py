"""Timeline strip: the whole session in a few lines (tokens sent coloured by tier, cache-hit rate,
compaction and cache-break markers), so a person sees where it went wrong. Click to jump.

It summarises instead of drawing one widget per turn: 10,000 turns cost one pass per render."""

from __future__ import annotations

from textual import events
from textual.content import Content
from textual.reactive import reactive

from panels.fmt import block, tier_style, tok
from panels.line_panel import LinePanel
from panels.navigation import JumpToTurn

TIER_RANK = {"Normal": 0, "TrimSchemas": 1, "CompactHistory": 2, "AggressivePrune": 3}
# Steps that rewrite history already sent. Not "spill": a large tool output is spilled when it first
# appears (new content, nothing cached is touched) and stays spilled, so the step is listed on every turn
# after it; marking it drew a "c" on nearly every turn of a session that compacted twice.
COMPACTING = {"clear_tool_results", "llm_summary", "drop_rounds", "compact_history"}
HIT_SHADES = " ░▒▓█"
HISTORY_REWRITTEN_BY = "history rewritten by "  # engine.feedback.attribute_cache_break's cause for a rewrite


def unintended_break(trace: dict) -> bool:
    """The turn broke the cache, and not only by a compaction's own rewrite of the history. A compaction
    always re-sends the history it rewrote: that break is its price (its pay-back counts it), and drawn
    as a break it hid every "c" of a session (the demo recordings showed none of their compactions)."""
    brk = trace.get("cache_break")
    if not brk:
        return False
    if not isinstance(brk, dict) or brk.get("section") != "history":
        return True
    cause = str(brk.get("cause", ""))
    steps = set(cause.removeprefix(HISTORY_REWRITTEN_BY).split(", ")) if cause.startswith(HISTORY_REWRITTEN_BY) else set()
    return not steps & COMPACTING
LEGEND = Content.from_markup("[$text-muted]▁█ sent (tier colour)  ░▓ cache hit  ✖ cache break  c compaction  ! error[/]")


def hit_rate(usage: dict, final_tokens: int) -> float:
    """A turn's cache hit rate as the cache layout, `top`, simulate and the exported spans state it: cache
    reads over the prompt the provider counted (input_tokens, cached parts included). Not over the engine's
    own estimate (final_tokens), which is in the engine's tokens, not the provider's: with a provider that
    counts 6% more, a 93% hit was drawn as a full one. The estimate only stands in for a usage that has
    no prompt count."""
    return (usage.get("cache_read_tokens") or 0) / max(1, usage.get("input_tokens") or final_tokens)


class TimelineStrip(LinePanel):
    DEFAULT_CSS = "TimelineStrip { height: auto; }"
    count: reactive[int] = reactive(0, repaint=False)  # number of traces; the list itself is shared, not copied
    current: reactive[int] = reactive(0, repaint=False)

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.traces: list[dict] = []
        self._cache_key: tuple[int, int] | None = None
        self._cache: tuple[list[tuple[range, str, str, str, str, str]], int] = ([], 1)
        self._rows_for: list[tuple[range, str, str, str, str, str]] | None = None
        self._plain_rows: list[_Runs] = []

    def on_mount(self) -> None:
        self.border_title = "Timeline"

    def watch_count(self) -> None:
        self.redraw()

    def watch_current(self) -> None:
        self.redraw()

    def _cell(self, width: int) -> int:
        """Columns per turn when the session is shorter than the strip: stretch, up to 4."""
        return max(1, min(4, width // max(1, self.count)))

    def _bucket(self, column: int, width: int) -> range:
        """The turns drawn in one column (several when the session is longer than the strip)."""
        n = self.count
        if n <= width:
            i = column // self._cell(width)
            return range(i, i + 1) if i < n else range(0)
        return range(int(column * n / width), min(n, int((column + 1) * n / width)))

    def _column(self, index: int, width: int) -> int:
        n = self.count
        return int(index * width / n) if n > width else index * self._cell(width)

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)  # clicks on the border or padding do nothing
        if offset is None:
            return
        width = max(10, self.size.width)
        rng = self._bucket(offset.x, width)
        if len(rng):
            self.post_message(JumpToTurn(rng.start))

    def _summary(self, width: int) -> tuple[list[tuple[range, str, str, str, str, str]], int]:
        """Per-column summary, cached until a turn arrives or the width changes: stepping through a
        10,000-turn session must not re-scan every trace for each frame."""
        key = (self.count, width)
        if self._cache_key == key:
            return self._cache
        n = self.count
        top = max(t["final_tokens"] for t in self.traces[:n]) or 1
        cols = []
        for c in range(min(n * self._cell(width), width)):
            rng = self._bucket(c, width)
            group = [self.traces[i] for i in rng]
            if not group:
                break
            tier = max((t["tier"] for t in group), key=lambda x: TIER_RANK.get(x, 0))
            rates = [hit_rate(t["usage"], t["final_tokens"]) for t in group if t.get("usage")]
            hit = HIT_SHADES[round(min(min(rates) if rates else 0.0, 1.0) * (len(HIT_SHADES) - 1))]
            if any(unintended_break(t) for t in group):
                ev, ev_style = "✖", "bold $cache-break"
            elif any(t.get("error") for t in group):
                ev, ev_style = "!", "bold $error"
            elif any(a["step"] in COMPACTING for t in group for a in t.get("actions") or []):
                ev, ev_style = "c", "$tier-compact"
            else:
                ev, ev_style = " ", "$text-muted"
            cols.append((rng, block(max(t["final_tokens"] for t in group), top), tier_style(tier), hit, ev, ev_style))
        self._cache_key, self._cache = key, (cols, top)
        return self._cache

    def _rows(self, width: int) -> tuple[list[tuple[range, str, str, str, str, str]], int, list[_Runs]]:
        """The summary and its three rows with no column marked, cached with it: a step only moves the
        mark, so it splices one column into these runs instead of re-running every column."""
        cols, top = self._summary(width)
        if self._rows_for is not cols:
            sent, hits, events_ = _Runs(), _Runs(), _Runs()
            for _, char, style, hit, ev, ev_style in cols:
                sent.add(char, style)
                hits.add(hit, "$cache-served")
                events_.add(ev, ev_style)
            self._rows_for, self._plain_rows = cols, [sent, events_, hits]
        return cols, top, self._plain_rows

    def lines(self, width: int) -> list[Content]:
        n = self.count
        if n == 0:
            return [Content("no turns yet")]
        cols, top, (sent, events_, hits) = self._rows(width)
        cur = self._column(self.current, width)
        # The columns drawing the current turn (up to 4 when the strip stretches a short session),
        # reversed, their event mark a dot where there is none: the same runs as marking them while
        # collecting them (tests/tui/test_line_views.py compares the two).
        marked = [c for c in range(max(0, cur - 4), min(len(cols), cur + 5)) if self.current in cols[c][0]]
        if not marked:
            rows = [sent.content(), events_.content(), hits.content()]
        else:
            start, end = marked[0], marked[-1] + 1
            _, char, style, hit, ev, ev_style = cols[start]
            k = end - start
            rows = [sent.marked(start, end, char * k, style + " reverse"),
                    events_.marked(start, end, ("·" if ev == " " else ev) * k, ev_style),
                    hits.marked(start, end, hit * k, "$cache-served reverse")]
        trace = self.traces[self.current]
        pointer = " " * cur + "▲"
        axis = f"turn {trace['turn']} ({self.current + 1}/{n})  sent {tok(trace['final_tokens'])}"
        comp = trace.get("compaction")
        if comp and comp.get("decision") == "compacted" and comp.get("text"):
            # The compaction's pay-back (what it saves per turn against what it re-sends uncached once)
            # takes the place of the session's peak, which the bars above show anyway.
            axis += f"  compaction: {comp['text']}"
        else:
            axis += f"  peak {tok(top)}"
        right, left = width - cur - 3, cur - 1  # room for the label beside the pointer, on each side
        if len(axis) <= right or right >= left:
            # A label longer than the room (a compaction's pay-back on a narrow strip) is cut, never
            # wrapped: a wrapped line would push the pointer off its turn.
            label = Content.assemble((pointer, "bold $accent"), "  ", (_fit(axis, right), "$text-muted"))
        else:
            label = Content.assemble(((_fit(axis, left) + " ").rjust(cur), "$text-muted"), ("▲", "bold $accent"))
        return [*rows, label, LEGEND]


def _fit(text: str, room: int) -> str:
    return text if len(text) <= room else text[: max(0, room - 1)] + "…"


class _Runs:
    """Collects (char, style) cells, merging neighbours with the same style: one span per run
    instead of one per column keeps rendering cheap."""

    def __init__(self) -> None:
        self.parts: list[list[str]] = []

    def add(self, char: str, style: str) -> None:
        if self.parts and self.parts[-1][1] == style:
            self.parts[-1][0] += char
        else:
            self.parts.append([char, style])

    def content(self) -> Content:
        return Content.assemble(*((text, style) for text, style in self.parts))

    def marked(self, start: int, end: int, text: str, style: str) -> Content:
        """These runs with columns start..end-1 drawn as `text` in `style`: the runs holding them cut
        around them, joined to a neighbour of the same style as `add` would have joined them."""
        out = _Runs()
        x = 0
        for run, run_style in self.parts:
            x2 = x + len(run)
            if x2 <= start or x >= end:
                out.add(run, run_style)
            else:
                if x < start:
                    out.add(run[: start - x], run_style)
                if x <= start:
                    out.add(text, style)
                if x2 > end:
                    out.add(run[end - x:], run_style)
            x = x2
        return out.content()
