"""A call's new prefix keys left as a range (key_chain._KeyChain.take_lazy): a window that moved to where no
call started before meets thousands of prefixes no call sent, every one a new key; DeepSeek's rules read
none of them one by one (no unit or `seen` entry can have them), so they stay range(first, next) until a
later call reads them (it comes back to that start, or appends to that call).

Differential: the lazy chain's keys + tail and sums, call by call, equal an eager chain's (take_raw) on the
same calls, whatever mix of appends, windows moved on, back and to new starts, edits near the end and
returns to an earlier call's start a session holds; and a DeepSeek simulator's figures equal those of one
whose chain is eager."""

from __future__ import annotations

import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.sim.cachesim import Block, CacheSimulator, Call, _KeyChain
from tests.support.deepseek_twins import assert_twins


def _calls(seed: int, n: int) -> list[list[Block]]:
    """A clear_tool_uses-like session past its window: the system Blocks, then a window of the
    conversation that moves on, back, or to a start it had before; a result cleared near the end; rounds
    appended. The same Block objects for the same messages, as simulate sends them."""
    rng = random.Random(seed)
    system = [Block("sys", 300, segment="system"), Block("tools", 200, segment="system")]
    conv = [Block(f"m{i}", 5 + i % 13) for i in range(40)]
    start = 0
    out = []
    for t in range(n):
        op = rng.random()
        if op < 0.35:  # a round appended
            conv += [Block(f"a{t}", 20), Block(f"r{t}", 90)]
        elif op < 0.55:  # the window moves on
            start = min(start + rng.randint(1, 4), len(conv) - 5)
        elif op < 0.70:  # and back
            start = max(0, start - rng.randint(1, 4))
        elif op < 0.85:  # one more result cleared, near the end
            i = rng.randrange(max(0, len(conv) - 8), len(conv))
            conv = conv[:i] + [Block(f"c{t}", 7)] + conv[i + 1 :]
        else:  # the window to a start it had some calls ago, or a new round with it
            start = rng.randint(0, max(0, len(conv) - 5))
            if rng.random() < 0.5:
                conv += [Block(f"b{t}", 30)]
        out.append(system + conv[start:])
    return out


def assert_lazy_is_eager(seed: int, n: int, hint: bool) -> None:
    """The lazy chain's keys + tail and sums are the eager chain's, call by call, on _calls(seed, n)
    (`hint`: each call's shared prefix told, as simulate tells it). The eager keys are lists."""
    lazy, eager = _KeyChain(), _KeyChain()
    prev: list[Block] = []
    for blocks in _calls(seed, n):
        shared = 0
        while shared < min(len(prev), len(blocks)) and prev[shared] is blocks[shared]:
            shared += 1
        told = shared if hint else None
        keys, tail, raw, base = lazy.take_lazy(blocks, True, told)
        want_keys, want_tail, want_raw, want_base = eager.take_lazy(blocks, True, told, lazy=False)
        assert not want_tail and type(want_keys) is list
        assert [*keys, *tail] == want_keys
        assert [x + base for x in raw] == [x + want_base for x in want_raw]
        assert lazy.old == eager.old == len(keys)
        prev = blocks


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 60), hint=st.booleans())
def test_lazy_keys_and_tail_are_the_eager_keys(seed: int, n: int, hint: bool) -> None:
    assert_lazy_is_eager(seed, n, hint)


def test_a_window_moved_to_a_new_start_leaves_its_new_keys_as_a_range() -> None:
    """4,000 messages; the window moves on by one round a call: each call's prefixes after the system
    Blocks are new, and none of them is made into an int in a list."""
    system = [Block("sys", 300, segment="system"), Block("tools", 200, segment="system")]
    conv = [Block(f"m{i}", 5 + i % 13) for i in range(4_000)]
    chain = _KeyChain()
    chain.take_lazy(system + conv)
    for s in range(2, 20, 2):
        keys, tail, _, _ = chain.take_lazy(system + conv[s:])
        assert len(keys) == 3 and len(tail) == len(conv) - s  # the empty prefix and the system's two
        assert tail.stop == chain.ids.next


def _session_calls(seed: int, n: int) -> list[Call]:
    calls, prev = [], None
    for t, blocks in enumerate(_calls(seed, n)):
        out = f"o{t}" if t % 3 else None
        calls.append(Call(tuple(blocks), 1_000.0 + 7.0 * t, "deepseek-chat", 40, out))
        prev = blocks
    assert prev is not None or not calls
    return calls


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 50), interval=st.sampled_from([None, 120]))
def test_deepseek_figures_and_state_with_lazy_keys_are_the_eager_ones(
    seed: int, n: int, interval: Any
) -> None:
    opts: dict[str, Any] = {"ttl_seconds": 100, "interval_tokens": interval}
    fast = CacheSimulator("deepseek", "deepseek-chat", **opts)
    slow = CacheSimulator("deepseek", "deepseek-chat", **opts)
    slow._policy.lazy = False  # type: ignore[attr-defined]
    assert_twins(fast, slow, _session_calls(seed, n))
