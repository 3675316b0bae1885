"""simulate's shared prefix of consecutive requests and the calls it builds on it (engine/sim/simulate_column.py,
`_shared_len` and the call's Blocks in `_simulate`).

A whole-conversation column (paper) sends the last request again with Blocks appended, its last Block
re-made without the rolling marker. `_shared_len` compares such a request's shared part in one go, and
`_simulate` makes the call's tuple from the last call's tuple (itself, when the request starts with all
of it). Held here: over varied request sequences (appends, a moved tail marker, rewrites anywhere, equal
but distinct Blocks, lists or tuples) the shared length is cachesim.shared_prefix_len's, and the calls
handed to the simulator are the ones made from scratch (each request's Blocks converted one by one).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.providers.base import Block
from engine.sim import cachesim, simulate_column
from engine.sim.pricing import load_prices
from engine.sim.simulate_column import _shared_len, _simulate
from engine.sim.simulate_requests import _Req

TABLE = load_prices()


@st.composite
def _requests(draw: Any) -> list[list[Block]]:
    """Each request made from the last: Blocks appended, its last Block marked or unmarked (a copy),
    one Block rewritten or replaced by an equal copy, a cut, or the same request again."""
    n = 0

    def fresh() -> Block:
        nonlocal n
        n += 1
        return Block("history", "messages", f"m{n}", 5 + n % 7, False)

    cur = [Block("tools", "tools", "T", 50, False)] + [fresh() for _ in range(draw(st.integers(0, 6)))]
    out = [list(cur)]
    for _ in range(draw(st.integers(1, 14))):
        op = draw(st.sampled_from(["append", "tail", "rewrite", "copy", "cut", "same"]))
        cur = list(cur)
        if op == "append":
            cur += [fresh() for _ in range(draw(st.integers(1, 4)))]
        elif op == "tail" and cur:
            # (At most 4 marked Blocks a request: Anthropic's limit, which its simulator enforces.)
            if cur[-1].marker or sum(b.marker for b in cur) < 4:
                cur[-1] = replace(cur[-1], marker=not cur[-1].marker)
            cur += [fresh() for _ in range(draw(st.integers(0, 3)))]
        elif op in ("rewrite", "copy") and cur:
            i = draw(st.integers(0, len(cur) - 1))
            cur[i] = fresh() if op == "rewrite" else replace(cur[i])
        elif op == "cut":
            cur = cur[: draw(st.integers(0, len(cur)))]
        out.append(cur)
    return out


@settings(max_examples=300, deadline=None)
@given(reqs=_requests(), as_tuples=st.booleans())
def test_shared_len_is_shared_prefix_len(reqs: list[list[Block]], as_tuples: bool) -> None:
    # (One kind per session, as a column's requests are: shared_prefix_len takes two lists or two tuples.)
    seq: list[Any] = [tuple(r) for r in reqs] if as_tuples else reqs
    for prev, cur in zip(seq, seq[1:], strict=False):
        assert _shared_len(prev, cur) == cachesim.shared_prefix_len(prev, cur)


def _calls(reqs: list[list[Block]], monkeypatch: pytest.MonkeyPatch, rules: str) -> tuple[Any, list[Any]]:
    seen: list[Any] = []
    real = cachesim.CacheSimulator.step

    def capture(self: cachesim.CacheSimulator, call: Any) -> Any:
        seen.append(call)
        return real(self, call)

    monkeypatch.setattr(cachesim.CacheSimulator, "step", capture)
    fig = _simulate(
        "x", [_Req(k, 1.0 + k, r, [], []) for k, r in enumerate(reqs)], rules=rules, model="deepseek-chat",
        table=TABLE, outputs={}, options={}, link_outputs=rules == "deepseek",
        automatic_prefix=rules != "anthropic", scale=1.0,
    )  # fmt: skip
    return fig, seen


@settings(max_examples=150, deadline=None)
@given(
    reqs=_requests(),
    rules=st.sampled_from(["deepseek", "openai", "anthropic"]),
    grown_from=st.sampled_from([0, 5, 10**9]),
)
def test_the_calls_are_the_requests_converted_from_scratch(
    reqs: list[list[Block]], rules: str, grown_from: int
) -> None:
    # (grown_from: requests from that many Blocks on are handed over as a Grown, the rest as tuples)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(simulate_column, "GROWN_FROM", grown_from)
        _, calls = _calls(reqs, mp, rules)
    assert len(calls) == len(reqs)
    prev: list[Block] = []
    for call, r in zip(calls, reqs, strict=True):
        want = tuple(
            cachesim.Block(b.sha, b.tokens, breakpoint=b.marker, ttl="5m", segment=b.segment) for b in r
        )
        assert call.blocks == want
        assert call.shared == cachesim.shared_prefix_len(prev, r)
        prev = r


def test_a_call_that_starts_with_the_whole_last_one_is_built_on_its_blocks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A short request: the same one again is handed over as the last call's very tuple, and one with
    Blocks appended holds the last call's Blocks. A long one (GROWN_FROM Blocks or more): on the last
    call's run (engine/sim/grown.py). No list copied and made a tuple again."""
    a, b, c = (Block("history", "messages", s, 10, False) for s in "abc")
    _, calls = _calls([[a, b], [a, b], [a, b, c]], monkeypatch, "deepseek")
    assert calls[1].blocks is calls[0].blocks
    assert calls[2].blocks[:2] == calls[0].blocks
    assert all(x is y for x, y in zip(calls[2].blocks, calls[0].blocks, strict=False))
    n = simulate_column.GROWN_FROM
    first = [Block("history", "messages", f"m{i}", 10, False) for i in range(n)]
    _, calls = _calls([first, list(first), [*first, c]], monkeypatch, "deepseek")
    assert calls[0].blocks.shared_run(calls[1].blocks) == calls[0].blocks.shared_run(calls[2].blocks) > n - 40
    assert calls[2].blocks[:n] == calls[0].blocks
    assert all(x is y for x, y in zip(calls[2].blocks, calls[0].blocks, strict=False))
