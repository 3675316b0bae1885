"""The cache simulator takes each call as a change to the previous one (key_chain._KeyChain.take_raw): an
appended call extends the last call's keys and sums in place, a shifted call keeps the stretch's sums as
they were and moves their base, and a caller that knows how many leading blocks are the last call's own
(Call.shared, as simulate passes it) spares the comparison of that prefix.

Differential: on random call sequences (appends, edits near the end and early, forks back to an earlier
call, windows that move on and back, bad blocks, time steps past every TTL, right and short hints), every
provider's figures and errors, call by call, equal those of a simulator that computes each call's keys
and sums from scratch and carries nothing from one call to the next."""

from __future__ import annotations

import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.sim.cachesim import (
    Block,
    CacheSimError,
    CacheSimulator,
    Call,
    _check_order,
    _cumulative,
    _KeyChain,
    _prefix_keys,
    shared_prefix_len,
)


class _Scratch(_KeyChain):
    """Every call's keys and sums computed from its blocks alone; nothing carried (common 0: the policies'
    carried state is rebuilt every call)."""

    def take_lazy(
        self,
        blocks: Any,
        check_order: bool = False,
        shared: int | None = None,
        stretch: Any = None,
        lazy: bool = True,
    ) -> tuple[list[int], range, list[int], int]:
        blocks = tuple(blocks)
        if check_order:
            _check_order(blocks)
        cum = _cumulative(blocks)
        known = self.ids.next
        keys = _prefix_keys(blocks, self.ids)
        self.old = len(keys) - (self.ids.next - known)
        self.common = 0
        self.blocks = blocks
        return keys, range(0), cum, 0


def _pool(rng: random.Random, n: int, marks: bool) -> list[Block]:
    out = []
    for i in range(n):
        seg = "tools" if i < 1 else "system" if i < 2 else "messages"
        bp = marks and rng.random() < 0.04
        ttl = "1h" if bp and rng.random() < 0.2 else "5m"
        out.append(Block(f"b{i}", rng.choice([3, 40, 300, 900]), breakpoint=bp, ttl=ttl, segment=seg))
    return out


def _session(rng: random.Random, marks: bool) -> list[tuple[list[Block], float, int | None, str | None]]:
    """(blocks, time, hint, output sha) per call: the same Block objects call to call, as simulate sends."""
    pool = _pool(rng, 400, marks)
    nxt = 2
    cur = pool[:2]
    earlier: list[list[Block]] = []
    t = 1_000.0
    out: list[tuple[list[Block], float, int | None, str | None]] = []
    for _ in range(rng.randint(1, 40)):
        prev = cur
        op = rng.random()
        if op < 0.40 or len(cur) < 24:  # append a round or more
            k = rng.randint(1, 6)
            cur = cur + pool[nxt : nxt + k]
            nxt += k
        elif op < 0.50:  # edit near the end (clear one more old result)
            i = rng.randrange(max(2, len(cur) - 8), len(cur))
            cur = cur[:i] + [Block(f"e{nxt}", 7)] + cur[i + 1 :]
            nxt += 1
        elif op < 0.65:  # the window moves on: the head, then the rest from a later point, then new ones
            s = rng.randint(2, 6)
            cur = cur[:2] + cur[2 + s :] + pool[nxt : nxt + 2]
            nxt += 2
        elif op < 0.75 and earlier:  # back to an earlier call's blocks, then more
            cur = rng.choice(earlier) + pool[nxt : nxt + rng.randint(0, 3)]
            nxt += 2
        elif op < 0.82:  # a new head before the same history (a window that moved back)
            cur = cur[:2] + [Block(f"h{nxt}", 50)] + cur[2:]
            nxt += 1
        elif op < 0.87:  # an early edit: everything after it is a new prefix
            i = rng.randrange(0, len(cur))
            cur = cur[:i] + [Block(f"x{nxt}", 20)] + cur[i + 1 :]
            nxt += 1
        elif op < 0.90:  # a bad block (the call raises; the chain must be as it was)
            bad = Block(f"n{nxt}", -1) if rng.random() < 0.5 else Block(f"s{nxt}", 5, segment="tools")
            cur = cur + [bad]
            nxt += 1
        else:  # the same request again
            cur = list(cur)
        nxt = min(nxt, len(pool) - 8)
        earlier.append(cur)
        t += rng.choice([0.0, 5.0, 30.0, 400.0, 4_000.0, 20_000.0])
        shared = shared_prefix_len(prev, cur)
        hint = rng.choice([None, shared, shared, rng.randint(0, shared)])  # right, or short (still true)
        out.append((cur, t, hint, rng.choice([None, f"o{nxt}"])))
        if cur and cur[-1].tokens < 0 or any(b.sha.startswith("s") for b in cur[-1:]):
            cur = prev  # the agent does not send the bad block again
    return out


def _outcome(sim: CacheSimulator, c: Call) -> Any:
    try:
        return sim.step(c)
    except CacheSimError as e:
        return f"error: {e}"


PROVIDERS: list[tuple[str, dict[str, Any]]] = [
    ("deepseek", {}),
    ("deepseek", {"persist_probability": 0.5}),
    ("deepseek", {"interval_tokens": 500, "ttl_seconds": 3_000}),
    ("openai", {}),
    ("anthropic", {}),
    ("anthropic", {"min_cacheable_tokens": 0, "lookback": 3}),
    ("bedrock", {}),
    ("none", {}),
]


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), which=st.integers(0, len(PROVIDERS) - 1))
def test_the_simulator_taking_calls_as_changes_equals_one_computing_each_from_scratch(
    seed: int, which: int
) -> None:
    provider, opts = PROVIDERS[which]
    rng = random.Random(seed)
    marks = provider in ("anthropic", "bedrock")
    fast = CacheSimulator(provider, "claude-sonnet-4" if marks else "", **opts)
    slow = CacheSimulator(provider, "claude-sonnet-4" if marks else "", **opts)
    slow._policy._chain = _Scratch()
    if hasattr(slow._policy, "carry"):
        slow._policy.carry = False  # type: ignore[attr-defined]
    for k, (blocks, t, hint, out_sha) in enumerate(_session(rng, marks)):
        c = Call(tuple(blocks), t, "", 25, out_sha, shared=hint)
        assert _outcome(fast, c) == _outcome(slow, c), f"call {k}"


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_the_chains_keys_and_sums_are_a_fresh_computations(seed: int) -> None:
    """take_raw's keys and raw + base, call by call (and after a call that raised), equal _prefix_keys
    and _cumulative of the call's blocks; take hands out copies the next call does not change."""
    rng = random.Random(seed)
    chain = _KeyChain()
    held: list[tuple[list[int], list[int], list[int], list[int]]] = []
    raised = False
    for blocks, _, hint, _ in _session(rng, False):
        # A hint counts from the call before in the session; after a call the chain refused, that is
        # not the chain's last call: no hint then (as CacheSimulator.step drops it).
        try:
            keys, raw, base = chain.take_raw(blocks, True, None if raised else hint)
        except CacheSimError:
            raised = True
            continue
        raised = False
        want_keys = _prefix_keys(blocks, chain.ids)
        want_cum = _cumulative(blocks)
        assert keys == want_keys
        assert [x + base for x in raw] == want_cum
        got = chain.take(blocks)  # the same blocks again: copies of the same figures
        held.append((got[0], got[1], want_keys, want_cum))
    for k, c, wk, wc in held:
        assert (k, c) == (wk, wc)
