"""A cleared history linked to the last one when it starts with it (Measure.cleared_from's `at`).

Wave 1 clears the oldest tool results of the whole raw history every turn, and the memos then ask
whether this turn's cleared history starts with last turn's (first_over's lineage): by value that
compared the whole conversation once a turn (2,871 times, ~9 M messages, over a 3,000-turn what-if).
clear_tool_results now says which places it cleared; a cleared history made from a history that only
grew, with the same places cleared inside the old one, is linked to the old cleared history. The links
must only ever say what a comparison would: checked turn by turn here, with the clearing boundary
moving into the old history (no link then) as the circuit breaker and the batches allow."""

from __future__ import annotations

from typing import Any

from engine.artifacts import Message, Text, ToolCall, ToolResult
from engine.assembly import Measure
from engine.optimize import OptimizeLimits, clear_results
from engine.tokens import CharTokenizer, TokenCounter
from engine.types import Tier
from tests.optimize.fixtures import ctx, history, identity


def _round(k: int, size: int) -> tuple[Message, Message]:
    return (
        Message("assistant", (ToolCall(f"c{k}", "bash", "{}"),)),
        Message("user", (ToolResult(f"c{k}", "r" * size),)),
    )


def _cleared(m: Measure, items: tuple[Any, ...], limits: OptimizeLimits) -> tuple[Any, ...]:
    asm = (identity(), history(items))
    c = ctx(asm, Tier.COMPACT_HISTORY, limits=limits)
    c.measure = m
    out = clear_results.apply(asm, c)
    return out.asm[-1].items


def _start(rounds: int) -> tuple[Measure, tuple[Any, ...]]:
    m = Measure(TokenCounter(CharTokenizer()))
    m.prefix_min = 1  # (links followed for every prefix: the links are what is tested)
    items: tuple[Any, ...] = (Message("user", (Text("Fix the failing test."),)),)
    for k in range(rounds):
        items += _round(k, 800)
    return m, items


def test_a_cleared_history_links_to_the_last_only_when_it_starts_with_it() -> None:
    m, items = _start(30)
    # A breaker that stops after a few results a turn for the first turns (the same places cleared:
    # linked), then none: a batch of results coming free in the old history every few turns is cleared
    # there (not linked, and not equal).
    limits = OptimizeLimits(max_clear_tokens=4_000)
    prev: tuple[Any, ...] = ()
    linked = unlinked = 0
    for t in range(40):
        items += _round(100 + t, 800 if t % 3 else 10)
        got = _cleared(m, items, limits if t < 20 else OptimizeLimits(max_clear_tokens=10**9))
        if prev:
            link = m._links.get(id(got))
            if link is not None and link[0] is got and link[1] is prev:
                linked += 1
                assert got[: len(prev)] == prev
            else:
                unlinked += 1
            assert m.starts_with(got, prev) == (got[: len(prev)] == prev)
        prev = got
    assert linked >= 10 and unlinked >= 3, (linked, unlinked)


def test_no_link_when_the_cleared_places_differ() -> None:
    m, items = _start(12)
    first = _cleared(m, items, OptimizeLimits(max_clear_tokens=400, keep_recent_results=2))
    more = items + _round(99, 800)
    # A breaker that lets more go clears further into the old part.
    second = _cleared(m, more, OptimizeLimits(max_clear_tokens=100_000, keep_recent_results=2))
    assert second[: len(first)] != first
    assert m._links.get(id(second), (None, None))[1] is not first
    assert not m.starts_with(second, first)
