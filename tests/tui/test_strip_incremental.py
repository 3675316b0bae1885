"""The timeline strip works out each turn's part of its columns once, when the turn arrives: a live agent
adding a turn to a 20,000-turn session costs the strip that turn, not another pass over all of them
(the old strip summarised every trace, column by column, for each new turn: ~60 ms at 20,000 turns, and
most of an attach's 2.75 s first frame, as the app redrew the strip for each turn that came while it
started). What it draws is what summarising the traces themselves gives, as turns arrive and as turns
held as stand-ins are filled in place (restate)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from panels.fmt import block, tier_style
from panels.timeline_strip import (
    COMPACTING,
    HIT_SHADES,
    TIER_RANK,
    TimelineStrip,
    hit_rate,
    unintended_break,
)

TIERS = ["Normal", "TrimSchemas", "CompactHistory", "AggressivePrune", ""]


def _trace(i: int, tokens: int, tier: int, hit: int, event: int) -> dict[str, Any]:
    return {
        "turn": i,
        "final_tokens": tokens,
        "tier": TIERS[tier],
        "usage": {"cache_read_tokens": tokens * hit // 4, "input_tokens": tokens} if hit >= 0 else None,
        "cache_break": event == 1,
        "error": "x" if event == 2 else None,
        "actions": [{"step": "llm_summary"}] if event == 3 else [{"step": "spill"}] if event == 4 else [],
    }


def _columns_from_traces(strip: TimelineStrip, width: int) -> list[tuple[Any, ...]]:
    """The columns as summarising the traces gives them (the strip's way before it kept per-turn parts)."""
    n = strip.count
    top = max(t["final_tokens"] for t in strip.traces[:n]) or 1
    cols = []
    for c in range(min(n * strip._cell(width), width)):
        rng = strip._bucket(c, width)
        group = [strip.traces[i] for i in rng]
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
        cols.append(
            (rng, block(max(t["final_tokens"] for t in group), top), tier_style(tier), hit, ev, ev_style)
        )
    return cols


turn_st = st.tuples(st.integers(0, 200_000), st.integers(0, 4), st.integers(-1, 9), st.integers(0, 4))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(turn_st, min_size=1, max_size=300),
    st.lists(turn_st, max_size=40),
    st.integers(10, 250),
    st.data(),
)
def test_columns_as_turns_arrive_and_fill(
    first: list[Any], later: list[Any], width: int, data: st.DataObject
) -> None:
    strip = TimelineStrip()
    strip.traces = [_trace(i, *t) for i, t in enumerate(first)]
    strip.set_reactive(TimelineStrip.count, len(first))
    assert strip._summary(width)[0] == _columns_from_traces(strip, width)
    for t in later:  # turns arriving one by one
        strip.traces.append(_trace(len(strip.traces), *t))
        strip.set_reactive(TimelineStrip.count, len(strip.traces))
        assert strip._summary(width)[0] == _columns_from_traces(strip, width)
    # Some turns changed in place (stand-ins filled): restated, the columns follow.
    lo = data.draw(st.integers(0, len(strip.traces) - 1))
    hi = data.draw(st.integers(lo, len(strip.traces)))
    for i in range(lo, hi):
        strip.traces[i].update(_trace(i, *data.draw(turn_st)))
    strip.restate(lo, hi)
    assert strip._summary(width)[0] == _columns_from_traces(strip, width)


class _Counted(list):  # type: ignore[type-arg]
    """A list of traces counting the traces read from it (items and slices)."""

    reads = 0

    def __getitem__(self, i: Any) -> Any:
        got = super().__getitem__(i)
        _Counted.reads += len(got) if isinstance(i, slice) else 1
        return got

    def __iter__(self) -> Any:
        for t in super().__iter__():
            _Counted.reads += 1
            yield t


def test_a_new_turn_costs_the_strip_that_turn() -> None:
    """At 20,000 turns, drawing the strip after one more turn reads that turn's trace and no other (the
    old strip read all 20,001 for each new turn)."""
    traces = _Counted(_trace(i, 1000 + i % 700, i % 4, i % 5, i % 9) for i in range(20_000))
    strip = TimelineStrip()
    strip.traces = traces
    strip.set_reactive(TimelineStrip.count, len(traces))
    strip.lines(118)
    for k in range(3):
        _Counted.reads = 0
        traces.append(_trace(20_000 + k, 5000, 2, 4, 3))
        strip.set_reactive(TimelineStrip.count, len(traces))
        strip.lines(118)
        # The new turn's trace, and the current turn's for the label under the strip.
        assert _Counted.reads <= 2, _Counted.reads
