"""Timeline strip: the whole session in a few lines (tokens sent coloured by tier, cache-hit rate,
compaction and cache-break markers), so a person sees where it went wrong. Click to jump.

It summarises instead of drawing one widget per turn: 10,000 turns cost one pass per render."""

from __future__ import annotations

import math

from textual import events
from textual.content import Content
from textual.reactive import reactive

from panels.fmt import block, tier_style, tok
from panels.line_panel import LinePanel
from panels.navigation import JumpToTurn
from panels.provider_scale import sent as provider_sent
from panels.provider_scale import shown

TIER_RANK = {"Normal": 0, "TrimSchemas": 1, "CompactHistory": 2, "AggressivePrune": 3}
# Steps that rewrite history already sent. Not "spill": a large tool output is spilled when it first
# appears (new content, nothing cached is touched) and stays spilled, so the step is listed on every turn
# after it; marking it drew a "c" on nearly every turn of a session that compacted twice.
COMPACTING = {"clear_tool_results", "llm_summary", "drop_rounds", "compact_history"}
HIT_SHADES = " ░▒▓█"
PAYBACK_SCALE = " (engine's tokens)"
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
# A turn's event mark, by precedence: a break over an error over a compaction (a column shows its turns' highest).
EV_COMPACT, EV_ERROR, EV_BREAK = 1, 2, 3
EV_MARKS = {0: (" ", "$text-muted"), EV_COMPACT: ("c", "$tier-compact"), EV_ERROR: ("!", "bold $error"),
            EV_BREAK: ("✖", "bold $cache-break")}
NO_USAGE = math.inf  # above any hit rate: a column's min is NO_USAGE only if none of its turns has usage
# The scale of the bars and of the "sent" and "peak" figures said where the strip holds it (≈: estimated).
LEGEND = Content.from_markup(
    "[$text-muted]▁█ sent, in the provider's tokens (tier colour)  ░▓ cache hit  ✖ cache break  c compaction  ! error[/]")
LEGEND_SHORT = Content.from_markup("[$text-muted]▁█ sent (tier colour)  ░▓ cache hit  ✖ cache break  c compaction  ! error[/]")


def hit_rate(usage: dict, estimate: int) -> float:
    """A turn's cache hit rate as the cache layout, `top`, simulate and the exported spans state it: cache
    reads over the prompt the provider counted (input_tokens, cached parts included). Not over the engine's
    own count (final_tokens), which is in the engine's tokens, not the provider's: with a provider that
    counts 6% more, a 93% hit was drawn as a full one. A usage with no prompt count (reads only) is over
    `estimate`, the engine's count on the provider's scale (panels/provider_scale.sent: times the learned
    calibration, as the cache layout's hit rate is)."""
    return (usage.get("cache_read_tokens") or 0) / max(1, usage.get("input_tokens") or estimate)


class TimelineStrip(LinePanel):
    DEFAULT_CSS = "TimelineStrip { height: auto; }"
    count: reactive[int] = reactive(0, repaint=False)  # number of traces; the list itself is shared, not copied
    current: reactive[int] = reactive(0, repaint=False)

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.traces: list[dict] = []
        # Each turn's part of a column, worked out once when it arrives (see _per_turn): a column is then
        # max/min over slices of these, in C. Summarising the traces themselves, column by column, was
        # ~60 ms at 20,000 turns for every turn a live agent added (and ~2 s of an attach's first frame,
        # the app redrawing the strip for each turn that came while it started).
        self._tok: list[int] = []  # the request's size on the provider's scale (provider_scale.sent)
        self._rank: list[int] = []  # TIER_RANK of its tier
        self._tier: list[str] = []
        self._hit: list[float] = []  # hit rate; NO_USAGE for a turn with no usage
        self._ev: list[int] = []  # EV_BREAK, EV_ERROR, EV_COMPACT or 0
        self._for: list[dict] | None = None  # the list of traces these were worked out from
        self._restated = 0  # bumped by restate(): turns changed in place, the columns are stale
        self._cache_key: tuple[int, int, int] | None = None
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

    def restate(self, start: int = 0, stop: int | None = None) -> None:
        """Turns start..stop-1 changed in place (a live agent's stand-ins filled, see
        sources.HistoryFilled): their part of the columns is worked out again at the next draw."""
        stop = len(self._tok) if stop is None else min(stop, len(self._tok))
        for i in range(max(0, start), stop):
            self._set_turn(i, self.traces[i])
        self._restated += 1
        self.redraw()

    def _set_turn(self, i: int, t: dict) -> None:
        # The bars, the peak and the hit rate on the provider's scale, as the cache layout's figures: the
        # engine's count here beside the provider's there read as two sizes of one prompt (16k and 18k on
        # DeepSeek's pydicom-1413 run).
        self._tok[i] = size = provider_sent(t)[0]
        self._tier[i] = tier = t["tier"]
        self._rank[i] = TIER_RANK.get(tier, 0)
        usage = t.get("usage")
        self._hit[i] = hit_rate(usage, size) if usage else NO_USAGE
        if unintended_break(t):
            self._ev[i] = EV_BREAK
        elif t.get("error"):
            self._ev[i] = EV_ERROR
        elif any(a["step"] in COMPACTING for a in t.get("actions") or []):
            self._ev[i] = EV_COMPACT
        else:
            self._ev[i] = 0

    def _per_turn(self, n: int) -> None:
        """Each turn's part of a column, for the turns that arrived since the last draw."""
        have = len(self._tok)
        if self._for is not self.traces:  # another list of traces (a new timeline): start again
            self._for, have = self.traces, 0
        if have > n:  # (the timeline only grows)
            del self._tok[n:], self._tier[n:], self._rank[n:], self._hit[n:], self._ev[n:]
            have = n
        if have == n:
            return
        grow = n - have
        self._tok.extend([0] * grow)
        self._tier.extend([""] * grow)
        self._rank.extend([0] * grow)
        self._hit.extend([NO_USAGE] * grow)
        self._ev.extend([0] * grow)
        for i in range(have, n):
            self._set_turn(i, self.traces[i])

    def _summary(self, width: int) -> tuple[list[tuple[range, str, str, str, str, str]], int]:
        """Per-column summary, cached until a turn arrives, one changes or the width does: stepping
        through a 10,000-turn session must not re-scan every trace for each frame."""
        key = (self.count, width, self._restated)
        if self._cache_key == key:
            return self._cache
        n = self.count
        self._per_turn(n)
        toks, ranks, tiers, hits, evs = self._tok, self._rank, self._tier, self._hit, self._ev
        top = max(toks[:n]) or 1
        cols = []
        for c in range(min(n * self._cell(width), width)):
            rng = self._bucket(c, width)
            a, b = rng.start, rng.stop
            if a >= b:
                break
            group_ranks = ranks[a:b]
            # The first of the highest-ranked tiers, as max() over the turns gave it.
            tier = tiers[a + group_ranks.index(max(group_ranks))]
            rate = min(hits[a:b])
            hit = HIT_SHADES[round(min(0.0 if rate == NO_USAGE else rate, 1.0) * (len(HIT_SHADES) - 1))]
            ev, ev_style = EV_MARKS[max(evs[a:b])]
            cols.append((rng, block(max(toks[a:b]), top), tier_style(tier), hit, ev, ev_style))
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
        axis = f"turn {trace['turn']} ({self.current + 1}/{n})  sent {shown(*provider_sent(trace))}"
        comp = trace.get("compaction")
        if comp and comp.get("decision") == "compacted" and comp.get("text"):
            # The compaction's pay-back (what it saves per turn against what it re-sends uncached once)
            # takes the place of the session's peak, which the bars above show anyway.
            axis += f"  compaction: {comp['text']}"
            # Its figures are the plan's, the engine's tokens (the cost_aware policy weighs its sections),
            # beside "sent" on the provider's scale: said after them when the line holds it whole.
            labelled = axis + PAYBACK_SCALE
        else:
            axis += f"  peak {tok(top)}"
            labelled = axis
        right, left = width - cur - 3, cur - 1  # room for the label beside the pointer, on each side
        if len(labelled) <= max(right, left):
            axis = labelled
        if len(axis) <= right or right >= left:
            # A label longer than the room (a compaction's pay-back on a narrow strip) is cut, never
            # wrapped: a wrapped line would push the pointer off its turn.
            label = Content.assemble((pointer, "bold $accent"), "  ", (_fit(axis, right), "$text-muted"))
        else:
            label = Content.assemble(((_fit(axis, left) + " ").rjust(cur), "$text-muted"), ("▲", "bold $accent"))
        return [*rows, label, LEGEND if LEGEND.cell_length <= width else LEGEND_SHORT]


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
