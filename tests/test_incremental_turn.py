"""What a turn carries forward from the turns before it changes no byte of what it produces.

Measure.rounds splits a history into rounds from the split of a recent prefix (a history that was only
appended to); it must equal history_rounds(items) computed from scratch after any sequence of appends,
edits, compactions and histories of other lineages (a what-if's columns share one Measure). And a
pipeline carrying every memo from turn to turn must produce the same requests, traces, journal and
what-if builds as one that forgets them all before every build (Pipeline.drop_caches).
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from engine.artifacts import Message, SectionItem, Text, ToolCall, ToolResult
from engine.assembly import RECENT_ROUNDS, Measure
from engine.history_rounds import history_rounds
from engine.optimize.context import OptimizeLimits
from engine.pipeline import Pipeline
from engine.policy.state import CompactionState
from engine.tokens import CharTokenizer, TokenCounter

ROLES = ("user", "assistant", "assistant", "user")


def _msg(role: str, k: int) -> Message:
    if role == "assistant":
        return Message("assistant", (Text(f"step {k}"), ToolCall(f"c{k}", "bash", "{}")))
    return Message("user", (ToolResult(f"c{k}", f"out {k}"),) if k % 3 else (Text(f"user {k}"),))


# One operation on one of three histories ("lineages", as simulate's columns): append messages, edit one
# in place (a new object, maybe another role), replace one by an equal copy, cut the middle out behind a
# note (a compaction), truncate, or just ask again.
ops_st = st.lists(
    st.tuples(
        st.integers(0, 2),
        st.sampled_from(("append", "append", "append", "edit", "copy", "cut", "truncate", "again")),
        st.integers(0, 10_000),
        st.integers(1, 6),
    ),
    min_size=1,
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(ops=ops_st, first_role=st.sampled_from(("user", "assistant")))
def test_rounds_match_a_split_from_scratch(ops: list[tuple[int, str, int, int]], first_role: str) -> None:
    m = Measure(TokenCounter(CharTokenizer()))
    lines: list[tuple[SectionItem, ...]] = [(_msg(first_role, 0),)] * 3
    k = 1
    for which, op, r, n in ops:
        items = lines[which]
        if op == "append":
            new = tuple(_msg(ROLES[(r + i) % len(ROLES)], k + i) for i in range(n))
            k += n
            items = items + new
        elif op == "edit" and items:
            i = r % len(items)
            items = items[:i] + (_msg(ROLES[r % len(ROLES)], k),) + items[i + 1 :]
            k += 1
        elif op == "copy" and items:
            i = r % len(items)
            old = items[i]
            assert isinstance(old, Message)
            items = items[:i] + (Message(old.role, old.parts),) + items[i + 1 :]
        elif op == "cut" and len(items) > 2:
            lo = 1 + r % (len(items) - 1)
            items = items[:1] + (Message("user", (Text(f"[note {k}]"),)),) + items[lo:]
            k += 1
        elif op == "truncate" and len(items) > 1:
            items = items[: 1 + r % (len(items) - 1)]
        lines[which] = items
        got = m.rounds(items)
        assert got == history_rounds(items)
        assert m.rounds(items) is got  # asked again: remembered, and the same answer
        assert m.rounds(tuple(items)) == got
    assert len(m._rounds) <= RECENT_ROUNDS


def test_rounds_extend_from_the_prefix_without_resplitting_it(monkeypatch: Any) -> None:
    # The appended case is the one the memo is for: a long history plus two messages is split by
    # reading the roles of the two new ones, not of the whole history again.
    import engine.history_rounds as rounds_mod  # (where history_rounds and _extend_rounds look it up)

    seen: list[int] = []
    real = rounds_mod.assistant_positions

    def counting(items: Any) -> list[int]:
        seen.append(len(items))
        return real(items)

    monkeypatch.setattr(rounds_mod, "assistant_positions", counting)
    m = Measure(TokenCounter(CharTokenizer()))
    items = tuple(_msg(ROLES[i % 4], i) for i in range(2_000))
    assert m.rounds(items) == history_rounds(items)
    seen.clear()
    longer = items + (_msg("assistant", 2_000), _msg("user", 2_001))
    assert m.rounds(longer) == real_rounds(longer)
    assert seen == [2]
    seen.clear()
    edited = longer[:5] + (_msg("user", 9_999),) + longer[6:]  # not an append: split afresh
    assert m.rounds(edited) == real_rounds(edited)
    assert seen == [len(edited)]


def real_rounds(items: tuple[SectionItem, ...]) -> list[tuple[int, int]]:
    """history_rounds without the counting wrapper (the monkeypatched module global)."""
    starts = [i for i, it in enumerate(items) if isinstance(it, Message) and it.role == "assistant"]
    n = len(items)
    out = [(0, starts[0] if starts else n)] if not starts or starts[0] > 0 else []
    return out + list(zip(starts, starts[1:] + [n], strict=True))


# ----------------------------------------------------------------------------- whole pipelines
class CheckedMeasure(Measure):
    """Every remembered split, checked against a split from scratch where the engine asks for it."""

    calls = 0

    def rounds(self, items: tuple[SectionItem, ...]) -> list[tuple[int, int]]:
        got = super().rounds(items)
        assert got == history_rounds(items)
        CheckedMeasure.calls += 1
        return got


def _pipe(window: int, policy: str, summarize: bool) -> Pipeline:
    closed = policy == "gates_closed"
    return Pipeline(
        "deepseek-chat",
        "openai" if window % 2 else "anthropic",
        window,
        counter=TokenCounter(CharTokenizer()),
        serve=False,
        clock=lambda: 0.0,
        policy=None if closed else policy,
        limits=OptimizeLimits.all_closed() if closed else None,
        summarizer=(lambda texts: f"summary of {len(texts)} messages") if summarize else None,
    )


session_st = st.lists(
    st.tuples(st.sampled_from(("round", "round", "round", "user", "big", "whatif")), st.integers(0, 1_000)),
    min_size=30,
    max_size=120,
)


def _feed(pipe: Pipeline, op: str, r: int, t: int) -> None:
    if op == "user":
        pipe.user(f"also look at {r}")
        return
    calls = pipe.assistant(f"step {t}", [{"id": f"c{t}", "name": "bash", "arguments": json.dumps({"n": r})}])
    size = 40 * (1 + r % 9) if op != "big" else 900 + r
    pipe.tool_result(calls[0].id, "".join(f"line {t}.{i}: {r * i}\n" for i in range(size // 10)))


def _built(b: Any) -> tuple[bytes, str, Any]:
    return b.serialized.body, json.dumps(b.trace, sort_keys=True, default=repr), b.state


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ops=session_st,
    window=st.sampled_from((2_001, 2_400, 3_000, 4_001)),
    policy=st.sampled_from(("cost_aware", "cost_aware:early=off", "wave1", "gates_closed")),
    summarize=st.booleans(),
)
def test_carried_memos_change_no_byte(ops: list[tuple[str, int]], window: int, policy: str, summarize: bool) -> None:
    """Incremental (memos carried from turn to turn) vs from scratch (every memo dropped before each
    build): the same requests, traces, compaction states and journal, and the same what-if builds
    (other windows and policies with their own chains of states, interleaved as simulate does)."""
    inc, ref = _pipe(window, policy, summarize), _pipe(window, policy, summarize)
    inc.measure = CheckedMeasure(inc.counter)
    states: dict[str, CompactionState] = {}
    for p in (inc, ref):
        p.identity("You are a careful coding agent.")
        p.add_tool("bash", "Run", {"type": "object", "properties": {"n": {"type": "integer"}}})
        p.user("Fix the bug.")
    for t, (op, r) in enumerate(ops):
        if op == "whatif":
            for name, over in (("narrow", {"window": window // 2 + 700}), ("wave1", {"policy": "wave1"})):
                cfg = inc.config.with_overrides(**over)  # type: ignore[arg-type]
                cfg_ref = ref.config.with_overrides(**over)  # type: ignore[arg-type]
                st_w = states.get(name, CompactionState())
                a = inc.build({}, cfg, st_w)
                ref.drop_caches()
                b = ref.build({}, cfg_ref, st_w)
                assert _built(a) == _built(b)
                states[name] = a.state or st_w
            # An earlier state (a what-if that cuts shallower than the live one), at a round boundary
            # (an assistant message) as every cut the policy makes.
            bounds = [i for i, msg in enumerate(inc.history[: inc.compaction.cut]) if msg.role == "assistant"]
            if bounds:
                st_old = replace(inc.compaction, cut=bounds[-1 - r % len(bounds)])
                a = inc.build({}, None, st_old)
                ref.drop_caches()
                assert _built(a) == _built(ref.build({}, None, st_old))
            continue
        for p in (inc, ref):
            _feed(p, op, r, t)
        try:
            a_req = inc.next_request()
        except Exception as e:  # protected content over a tiny window: both must fail alike
            ref.drop_caches()
            try:
                ref.next_request()
            except Exception as e2:
                assert type(e2) is type(e) and str(e2) == str(e)
                return
            raise AssertionError("only the incremental pipeline failed") from e
        ref.drop_caches()
        b_req = ref.next_request()
        assert a_req.bytes == b_req.bytes
        assert a_req.trace == b_req.trace
        assert inc.compaction == ref.compaction
        for p, req in ((inc, a_req), (ref, b_req)):
            p.record_usage({"input_tokens": req.trace["final_tokens"], "output_tokens": 20})
    assert list(inc.journal.events) == list(ref.journal.events)
    event(f"compactions: {min(inc.compaction.compactions, 3)}+")
    inc.close()
    ref.close()
