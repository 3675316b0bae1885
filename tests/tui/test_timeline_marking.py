"""The timeline strip marks the current turn by splicing its column(s) into cached runs (a step moves
the mark and nothing else); the lines must be exactly those of marking each column while collecting
the runs, as the strip did before, for any session length, width and current turn."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from textual.content import Content

from panels.timeline_strip import TimelineStrip, _Runs

TIERS = ["Normal", "TrimSchemas", "CompactHistory", "AggressivePrune"]


def _trace(i: int, tokens: int, tier: int, hit: int, event: int) -> dict:
    return {"turn": i, "final_tokens": tokens, "tier": TIERS[tier],
            "usage": {"cache_read_tokens": tokens * hit // 4} if hit >= 0 else None,
            "cache_break": event == 1, "error": "x" if event == 2 else None,
            "actions": [{"step": "llm_summary"}] if event == 3 else []}


def _marked_while_collecting(strip: TimelineStrip, width: int) -> list[Content]:
    """The rows as the strip built them before the splice: every column, marked as it is added."""
    cols, _ = strip._summary(width)
    sent, hits, events_ = _Runs(), _Runs(), _Runs()
    for rng, char, style, hit, ev, ev_style in cols:
        here = strip.current in rng
        sent.add(char, style + (" reverse" if here else ""))
        hits.add(hit, "$cache-served" + (" reverse" if here else ""))
        events_.add("·" if here and ev == " " else ev, ev_style)
    return [sent.content(), events_.content(), hits.content()]


def _same(a: Content, b: Content) -> bool:
    return a.plain == b.plain and list(a.spans) == list(b.spans)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 200_000), st.integers(0, 3), st.integers(-1, 4), st.integers(0, 6)),
                min_size=1, max_size=400),
       st.integers(10, 250), st.data())
def test_spliced_mark_equals_marking_every_column(turns: list[tuple[int, int, int, int]], width: int,
                                                  data: st.DataObject) -> None:
    strip = TimelineStrip()
    strip.traces = [_trace(i, *t) for i, t in enumerate(turns)]
    strip.set_reactive(TimelineStrip.count, len(turns))
    for current in {0, len(turns) - 1, data.draw(st.integers(0, len(turns) - 1))}:
        strip.set_reactive(TimelineStrip.current, current)
        lines = strip.lines(width)
        want = _marked_while_collecting(strip, width)
        assert all(_same(a, b) for a, b in zip(lines[:3], want, strict=True)), (current, width, len(turns))
