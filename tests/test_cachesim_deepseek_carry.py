"""DeepSeek's read carried from call to call (`_Contained`): an appended conversation contains a unit of
every earlier request, and each call looked every one of them up again (quadratic over a long session:
the what-if's simulators on a 1,500-turn recording). The carried ranking must give the same figures and
leave the same units (contents, times, order) as scanning the whole prefix every call."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.sim.cachesim import Block, CacheSimulator, Call


class CountingDict(dict):  # type: ignore[type-arg]
    """The units dict, counting the membership tests the simulator makes on it."""

    lookups = 0

    def __contains__(self, key: object) -> bool:
        CountingDict.lookups += 1
        return super().__contains__(key)


def blk(name: str, tokens: int) -> Block:
    return Block(sha=name, tokens=tokens)


def appended(turns: int) -> list[Call]:
    msgs = [blk("sys", 500), blk("u0", 300)]
    calls = []
    for t in range(turns):
        calls.append(Call(tuple(msgs), timestamp=10.0 * t, output_tokens=40, output_sha=f"a{t}"))
        msgs = msgs + [blk(f"a{t}", 40), blk(f"r{t}", 100 + t % 7)]
    return calls


def test_an_appended_conversation_looks_up_each_prefix_once_not_every_call() -> None:
    sim = CacheSimulator("deepseek", "deepseek-chat")
    policy: Any = sim._policy
    policy.units = CountingDict()
    CountingDict.lookups = 0
    turns = 300
    results = sim.simulate(appended(turns))
    assert results[-1].cache_read > 0
    # The old code tested every prefix of every call (~2 * 300 * 300 / 2 = 90,000 lookups).
    assert CountingDict.lookups <= 12 * turns, CountingDict.lookups


def units_state(policy: Any) -> list[tuple[Any, ...]]:
    return [(k, u.tokens, u.prob, u.group, u.available_at, u.last_used) for k, u in policy.units.items()]


# Small counts, zero among them: equal lengths from different requests (ties in the ranking) happen.
TOKENS = st.sampled_from([0, 0, 1, 64, 100, 130])


@st.composite
def sessions(draw: st.DrawFn) -> tuple[list[Call], dict[str, Any]]:
    n = draw(st.integers(1, 30))
    msgs = [blk("sys", draw(st.integers(0, 300)))]
    t = 0.0
    calls = []
    for i in range(n):
        op = draw(st.sampled_from(["append", "append", "append", "drop", "replace", "side"]))
        if op == "drop" and len(msgs) > 2:
            k = draw(st.integers(1, len(msgs) - 1))
            msgs = msgs[:1] + msgs[k:]
        elif op == "replace" and len(msgs) > 1:
            k = draw(st.integers(0, len(msgs) - 1))
            msgs = msgs[:k] + [blk(f"x{i}", draw(TOKENS))] + msgs[k + 1 :]
        for j in range(draw(st.integers(0, 3))):
            msgs.append(blk(draw(st.sampled_from([f"m{i}.{j}", "same", f"a{i - 1}"])), draw(TOKENS)))
        blocks = msgs if op != "side" else msgs[: draw(st.integers(1, len(msgs)))] + [blk(f"s{i}", 30)]
        t += draw(st.sampled_from([0.0, 1.0, 5.0, 50.0, 400.0, -3.0]))
        done = draw(st.one_of(st.none(), st.just(t + 2.0), st.just(t + 20.0)))
        calls.append(
            Call(
                tuple(blocks),
                timestamp=t,
                output_tokens=draw(st.integers(0, 90)),
                output_sha=draw(st.one_of(st.none(), st.just(f"a{i}"))),
                completed_at=done,
            )
        )
        if op != "side" and draw(st.booleans()):
            msgs.append(blk(f"a{i}", draw(st.integers(0, 90))))
    options = draw(
        st.fixed_dictionaries(
            {},
            optional={
                "ttl_seconds": st.sampled_from([30.0, 300.0]),
                "interval_tokens": st.sampled_from([64, 200]),
                "common_prefix_units": st.booleans(),
                "unit_tokens": st.sampled_from([1, 64]),
            },
        )
    )
    return calls, options


@settings(max_examples=300, deadline=None)
@given(sessions())
def test_carried_read_equals_the_whole_prefix_scan(case: tuple[list[Call], dict[str, Any]]) -> None:
    calls, options = case
    carried = CacheSimulator("deepseek", "deepseek-chat", **options)
    scanned = CacheSimulator("deepseek", "deepseek-chat", **options)
    ref: Any = scanned._policy
    ref.carry = False
    # The general rule (every unit persisting with its probability, here 1): best per request, sorted.
    general = CacheSimulator("deepseek", "deepseek-chat", **options)
    gen: Any = general._policy
    gen.carry = False
    gen._read_certain = gen._read_expected
    for c in calls:
        got = carried.step(c)
        assert got == scanned.step(c) == general.step(c)
        assert units_state(carried._policy) == units_state(ref) == units_state(gen)
        assert carried._policy.seen == ref.seen == gen.seen  # type: ignore[attr-defined]
