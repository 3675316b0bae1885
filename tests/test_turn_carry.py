"""A build that carries outcomes from the build before (the append-only fast path) changes no byte.

`Pipeline.fast_path` (on by default) lets cost_aware.run reuse the stable rules' outcome (reorder, spill) of an earlier
build when nothing it depends on changed (see cost_aware._stable_key), and skip the budget guarantee's
walk when the planned request fits (trim_sections.fits_as_planned). A pipeline using them must give the same
requests, traces, compaction states and journal as one forced down the slow path (`fast_path = False`)
over sessions that compact, spill (tool results and whole sections), trim a message over the window,
change their window and margin mid-session, learn a calibration from usage, add and change sources, and
interleave what-if builds (other windows, limits and policies, and earlier states) as simulate does. A
guard that leaves out one of the things the outcome depends on fails these checks (the last tests break
each on purpose).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from engine.config import PipelineConfig
from engine.optimize import trim_sections
from engine.optimize.context import OptimizeLimits
from engine.pipeline import Pipeline
from engine.policy import cost_aware
from engine.policy.state import CompactionState
from engine.tokens import CharTokenizer, TokenCounter
from engine.types import CacheScope

SPILL_AT = 600  # tokens (chars/4): "big" tool outputs and sources go over it


def _pipe(window: int, policy: str, summarize: bool, carry: bool) -> Pipeline:
    closed = policy == "gates_closed"
    limits = OptimizeLimits.all_closed() if closed else OptimizeLimits()
    pipe = Pipeline(
        "deepseek-chat",
        "openai" if window % 2 else "anthropic",
        window,
        counter=TokenCounter(CharTokenizer()),
        serve=False,
        clock=lambda: 0.0,
        policy=None if closed else policy,
        limits=replace(limits, spill_threshold=SPILL_AT),
        summarizer=(lambda texts: f"summary of {len(texts)} messages") if summarize else None,
    )
    pipe.fast_path = carry
    return pipe


def _feed(pipe: Pipeline, op: str, r: int, t: int) -> None:
    if op == "user":
        pipe.user(f"also look at {r}")
    elif op == "huge":  # a user message over the window: the budget guarantee must cut into it
        pipe.user(f"paste {r}: " + "w " * (2 * pipe.config.window))
    elif op == "window":
        pipe.set_window(pipe.config.window + (r % 5 - 2) * 150)
    elif op == "margin":
        ev = {"k": "config", "config": replace(pipe.config, margin=(r % 4) * 0.03).to_event()}
        pipe.fold(ev)
        pipe.journal.append(ev)
    elif op == "source":
        # A new or changed section: another scope (reorder moves it) and now and then over the
        # spill threshold (spilled whole).
        scope = (CacheScope.GLOBAL, CacheScope.SESSION, CacheScope.NONE)[r % 3]
        size = 3 * SPILL_AT * 4 if r % 4 == 0 else 200
        pipe.add_source(f"notes{r % 2}", "context", text="n" * size + str(r), scope=scope)
    else:
        calls = pipe.assistant(
            f"step {t}", [{"id": f"c{t}", "name": "bash", "arguments": json.dumps({"n": r})}]
        )
        size = 40 * (1 + r % 9) if op != "big" else 4 * SPILL_AT + 40 * r % 900
        pipe.tool_result(calls[0].id, "".join(f"line {t}.{i}: {r * i}\n" for i in range(size // 10)))


def _built(b: Any) -> tuple[bytes, str, Any]:
    return b.serialized.body, json.dumps(b.trace, sort_keys=True, default=repr), b.state


def _whatif(cfg: PipelineConfig, name: str, window: int, r: int) -> PipelineConfig:
    if name == "narrow":
        return cfg.with_overrides(window=window // 2 + 700)
    if name == "wave1":
        return cfg.with_overrides(policy="wave1")
    # Other limits: the spill gate closed (a dry run measures it) and another threshold.
    return replace(cfg, limits=replace(cfg.limits, spill=False, spill_threshold=SPILL_AT + r % 50))


@contextlib.contextmanager
def reuses_counted(module: Any, *names: str, every_call: bool = False) -> Iterator[list[int]]:
    """Wrap the module's reuse functions (each returns None when it cannot reuse) so that hits[0]
    counts the calls that reused something (every call, with every_call); the originals are put back
    after the block."""
    hits, originals = [0], {n: getattr(module, n) for n in names}

    def counting(real: Any) -> Any:
        def counted(*a: Any, **kw: Any) -> Any:
            got = real(*a, **kw)
            hits[0] += every_call or got is not None
            return got

        return counted

    for n, real in originals.items():
        setattr(module, n, counting(real))
    try:
        yield hits
    finally:
        for n, real in originals.items():
            setattr(module, n, real)


def compare(ops: list[tuple[str, int]], window: int, policy: str, summarize: bool) -> tuple[int, int]:
    """Run one session through a carrying pipeline and a slow one side by side, asserting every output
    equal; returns how many builds took the fast path, and the compactions made."""
    fast, slow = _pipe(window, policy, summarize, True), _pipe(window, policy, summarize, False)
    # The stable outcome is carried by key (_carried_stable) or, on an append-only turn, along the
    # lineage of the build it extends (_extended_stable): either counts as the fast path.
    with reuses_counted(cost_aware, "_carried_stable", "_extended_stable") as hits:
        compactions = _session(fast, slow, ops, window)
    return hits[0], compactions


def _session(fast: Pipeline, slow: Pipeline, ops: list[tuple[str, int]], window: int) -> int:
    states: dict[str, CompactionState] = {}
    for p in (fast, slow):
        p.identity("You are a careful coding agent.")
        p.memory("remember the style guide", working=False)
        p.add_tool("bash", "Run", {"type": "object", "properties": {"n": {"type": "integer"}}})
        p.user("Fix the bug.")
    for t, (op, r) in enumerate(ops):
        if op == "whatif":
            for name in ("narrow", "wave1", "other limits"):
                cfg_f, cfg_s = _whatif(fast.config, name, window, r), _whatif(slow.config, name, window, r)
                st_w = states.get(name, CompactionState())
                a = fast.build({}, cfg_f, st_w)
                assert _built(a) == _built(slow.build({}, cfg_s, st_w))
                states[name] = a.state or st_w
            bounds = [
                i for i, msg in enumerate(fast.history[: fast.compaction.cut]) if msg.role == "assistant"
            ]
            if bounds:
                st_old = replace(fast.compaction, cut=bounds[-1 - r % len(bounds)])
                assert _built(fast.build({}, None, st_old)) == _built(slow.build({}, None, st_old))
            continue
        for p in (fast, slow):
            _feed(p, op, r, t)
        if op in ("window", "margin", "source"):
            continue
        try:
            a_req = fast.next_request()
        except Exception as e:  # protected content over a tiny window: both must fail alike
            try:
                slow.next_request()
            except Exception as e2:
                assert type(e2) is type(e) and str(e2) == str(e)
                return fast.compaction.compactions
            raise AssertionError("only the carrying pipeline failed") from e
        b_req = slow.next_request()
        assert a_req.bytes == b_req.bytes
        assert a_req.trace == b_req.trace
        assert fast.compaction == slow.compaction
        # Reported input 5-25% over the estimate: the calibration moves, and with it every budget.
        factor = 1.05 + (r % 5) * 0.05
        for p, req in ((fast, a_req), (slow, b_req)):
            p.record_usage(
                {"input_tokens": int(req.trace["final_tokens"] * factor), "output_tokens": 20 + r % 300}
            )
    assert list(fast.journal.events) == list(slow.journal.events)
    fast.close()
    slow.close()
    return fast.compaction.compactions


session_st = st.lists(
    st.tuples(
        # A result over the spill threshold turns the fast path off until a compaction cuts it away,
        # so they come rarely enough for most sessions to take the fast path many times.
        st.sampled_from(
            ("round",) * 12
            + ("user", "user", "big", "whatif", "whatif", "window", "margin", "source", "huge")
        ),
        st.integers(0, 1_000),
    ),
    min_size=30,
    max_size=110,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ops=session_st,
    window=st.sampled_from((2_401, 3_000, 4_001, 6_000)),
    policy=st.sampled_from(("cost_aware", "cost_aware:early=off", "cost_aware:revision=1", "gates_closed")),
    summarize=st.booleans(),
)
def test_carried_outcomes_change_no_byte(
    ops: list[tuple[str, int]], window: int, policy: str, summarize: bool
) -> None:
    hits, compactions = compare(ops, window, policy, summarize)
    event(f"compactions: {min(compactions, 3)}+")
    event(f"fast-path builds: {'none' if not hits else '1-9' if hits < 10 else '10+'}")


# A fixed session that exercises every input of the guard on append-only turns: a source moved to
# another scope with the section count unchanged (reorder then moves it), what-ifs with other limits
# interleaved, and a tool result over the spill threshold. Once such a result is in the history every
# turn spills it again and the guard sends it down the slow path until a compaction cuts it away, so
# it comes last.
FIXED = (
    [("round", i) for i in range(6)]
    + [("whatif", 1), ("round", 7), ("source", 1), ("round", 9), ("source", 3), ("round", 10)]
    + [("source", 5), ("round", 11), ("round", 12), ("whatif", 2), ("round", 13), ("big", 3)]
    + [("round", 14 + i) for i in range(12)]
    + [("huge", 1), ("round", 30), ("round", 31)]
)


def test_the_fixed_session_matches() -> None:
    assert compare(FIXED, 6_000, "cost_aware", False)[0] >= 5  # the fast path is taken


def _broken(drop: str) -> Any:
    real = cost_aware._stable_key

    def key(applied: Any, ctx: Any) -> Any:
        if drop == "over-threshold check":
            hidx = cost_aware.history_index(applied)
            return (
                applied[:hidx] + applied[hidx + 1 :],
                (),
                ctx.limits,
                ctx.spill is None,
                ctx.dry_run,
                ctx.measure,
            )
        k = real(applied, ctx)
        if k is None:
            return None
        if drop == "sections":
            return ((),) + k[1:]
        if drop == "limits":
            return k[:2] + (None,) + k[3:]
        raise AssertionError(drop)

    return key


@pytest.mark.parametrize("drop", ["over-threshold check", "sections", "limits", "the ceiling"])
def test_a_guard_missing_an_input_is_caught(monkeypatch: pytest.MonkeyPatch, drop: str) -> None:
    """The checks above can fail: leave one input out of a guard and the fixed session differs."""
    if drop == "the ceiling":  # the guarantee's shortcut taken whether or not the request fits
        monkeypatch.setattr(trim_sections, "fits_as_planned", lambda p, asm: True)
    else:
        monkeypatch.setattr(cost_aware, "_stable_key", _broken(drop))
    with pytest.raises(AssertionError):
        compare(FIXED, 6_000, "cost_aware", False)


def test_builds_alternating_between_limits_each_carry_their_own_outcome() -> None:
    """simulate builds every turn under the what-if limits and then with every gate closed, on one
    pipeline: each must find its own carried outcome (one remembered outcome per limits), not evict
    the other's, and still give what the slow path gives."""
    fast, slow = _pipe(9_000, "cost_aware", False, True), _pipe(9_000, "cost_aware", False, False)
    for p in (fast, slow):
        p.identity("You are a careful coding agent.")
        p.add_tool("bash", "Run", {"type": "object", "properties": {"n": {"type": "integer"}}})
        p.user("Fix the bug.")
    closed = replace(fast.config, limits=replace(OptimizeLimits.all_closed(), spill_threshold=SPILL_AT))
    real, real_ext, hits = cost_aware._carried_stable, cost_aware._extended_stable, [0, 0]

    def counted(*a: Any) -> Any:
        got = real(*a)
        hits[got is not None] += 1
        return got

    def counted_ext(*a: Any) -> Any:  # a hit here is not asked of _carried_stable
        got = real_ext(*a)
        hits[1] += got is not None
        return got

    cost_aware._carried_stable = counted  # type: ignore[assignment]
    cost_aware._extended_stable = counted_ext  # type: ignore[assignment]
    try:
        states = {"open": CompactionState(), "closed": CompactionState()}
        for t in range(12):
            for p in (fast, slow):
                _feed(p, "tool", t, t)
            for name, cfg in (("open", None), ("closed", closed)):
                a = fast.build({}, cfg, states[name])
                assert _built(a) == _built(slow.build({}, cfg, states[name]))
                states[name] = a.state or states[name]
    finally:
        cost_aware._carried_stable = real  # type: ignore[assignment]
        cost_aware._extended_stable = real_ext  # type: ignore[assignment]
    misses, carried = hits
    assert carried >= 20 and misses <= 4, hits  # each column's first build (and a compaction) computes
