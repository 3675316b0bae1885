"""The budget guarantee carries its history cut from one build to the next (trim_sections._carried_drop).

With every gate closed nothing is compacted, so each turn's raw history grows by a round and is cut down
to its budget again by dropping its oldest rounds. An append-only turn leaves every round that was
droppable as it was, so while the tokens to drop still fall between what one round fewer and the chosen
rounds hold, the cut is the same (and so is its marked task message, reused as the same object). These
tests hold that a Measure that carries cuts gives exactly what a fresh one (which has nothing to carry)
gives, turn after turn, under changing budgets (hypothesis); that a whole gates-closed session is the
same request for request with the carry on and off; that the carry is taken; and that a carry past its
bounds would be caught by the comparison.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.artifacts import Message, SectionItem, Text, ToolCall, ToolResult
from engine.assembly import Assembly, Measure, Section
from engine.optimize import OptimizeContext, OptimizeLimits, trim_sections
from engine.pipeline import Pipeline
from engine.plan import Plan
from engine.providers.policy import ANTHROPIC
from engine.tokens import CharTokenizer, TokenCounter
from engine.types import CacheScope, Priority, SectionKind, Tier

COUNTER = TokenCounter(CharTokenizer())
IDENTITY = Section("identity", "identity", SectionKind.IDENTITY, CacheScope.GLOBAL, Priority.NEVER,
                   (Text("You are a careful agent."),))  # fmt: skip

# A session step: ("round", n) an assistant call and its result of n characters; ("user", n) a user
# message of n characters after the newest round (part of that round).
steps = st.lists(
    st.tuples(st.sampled_from(["round", "round", "round", "user"]), st.integers(0, 600) | st.integers(1_000, 4_000)),
    min_size=1,
    max_size=40,
)


def _histories(ops: list[tuple[str, int]], task: str | None) -> Iterator[tuple[SectionItem, ...]]:
    """The raw history after each step: append-only, each turn a new tuple (as each build assembles one),
    its newest message a new object equal to the last turn's (as a pending message closed at a build)."""
    msgs: list[SectionItem] = [Message("user", (Text(task),))] if task is not None else []
    for k, (op, n) in enumerate(ops):
        if op == "round":
            msgs.append(Message("assistant", (ToolCall(f"c{k}", "bash", json.dumps({"k": k})),)))
            msgs.append(Message("user", (ToolResult(f"c{k}", "x" * n),)))
        else:
            msgs.append(Message("user", (Text("u" * n),)))
        last = msgs[-1]
        assert isinstance(last, Message)
        yield (*msgs[:-1], Message(last.role, last.parts))


def _asm(items: tuple[SectionItem, ...]) -> Assembly:
    return (IDENTITY, Section("history", "history", SectionKind.HISTORY, CacheScope.NONE, Priority.NORMAL, items))


def _ctx(asm: Assembly, m: Measure, budget: int) -> OptimizeContext:
    total = m.total(asm)
    plan = Plan(
        raw_pressure=0.5, predictive_pressure=0.5, tier=Tier.NORMAL, raw_tier=Tier.NORMAL,
        predictive_tier=Tier.NORMAL, recovery_escalated=False, reason="test", ceiling=total + 10_000,
        estimated_tokens=total, budgets={"identity": m.section(asm[0]), "history": budget},
    )  # fmt: skip
    return OptimizeContext(plan=plan, limits=OptimizeLimits.all_closed(), policy=ANTHROPIC, measure=m)


def _trims(ops: list[tuple[str, int]], budgets: list[int], task: str | None, m: Measure | None) -> Iterator[Any]:
    """Each turn's trim outcome and the cut history's total; `m` None: a fresh Measure every turn."""
    for t, items in enumerate(_histories(ops, task)):
        mt = m if m is not None else Measure(COUNTER)
        asm = _asm(items)
        out = trim_sections.apply(asm, _ctx(asm, mt, budgets[t % len(budgets)]))
        yield out.asm, out.changed, out.detail, out.tokens_saved, mt.section(out.asm[1]), mt.total(out.asm)


@settings(max_examples=300, deadline=None)
@given(
    ops=steps,
    budgets=st.lists(st.integers(0, 3_000), min_size=1, max_size=4) | st.integers(100, 2_000).map(lambda b: [b]),
    task=st.one_of(st.none(), st.text(max_size=30)),
)
def test_a_carried_cut_is_the_cut_chosen_afresh(ops: list[tuple[str, int]], budgets: list[int], task: str | None) -> None:
    """Turn after turn (budgets changing or not), the Measure that carries cuts gives the same sections,
    outcome and totals as a fresh Measure per turn, and is deterministic (two carrying runs agree)."""
    carried = list(_trims(ops, budgets, task, Measure(COUNTER)))
    assert carried == list(_trims(ops, budgets, task, None))
    assert carried == list(_trims(ops, budgets, task, Measure(COUNTER)))
    for t, (asm, *_rest, hist_tokens, _total) in enumerate(carried):
        # Within budget whenever the guarantee can get there: dropping rounds and cutting results.
        budget = budgets[t % len(budgets)]
        fresh = Measure(COUNTER)
        assert hist_tokens == fresh.section(asm[1])
        if budget >= fresh.items(asm[1].items[:1]) + 120:
            assert hist_tokens <= budget


# Rounds of ~45 tokens with one of ~400 every sixth: dropping a large round leaves room for several turns.
STEADY = [("round", 1_500 if i % 6 == 0 else 100 + 7 * (i % 5)) for i in range(120)]


def _oldest_to_drop_calls(monkeypatch: pytest.MonkeyPatch, ops: list[tuple[str, int]], budget: int) -> tuple[int, int]:
    real, n = trim_sections.oldest_to_drop, [0]

    def counted(*a: Any, **kw: Any) -> Any:
        n[0] += 1
        return real(*a, **kw)

    monkeypatch.setattr(trim_sections, "oldest_to_drop", counted)
    trimmed = sum(1 for _asm, changed, *_ in _trims(ops, [budget], "Fix it.", Measure(COUNTER)) if changed)
    monkeypatch.setattr(trim_sections, "oldest_to_drop", real)
    return n[0], trimmed


def test_the_cut_is_carried(monkeypatch: pytest.MonkeyPatch) -> None:
    # Against a 2,000-token budget the cut stays for a few turns after each large round goes. On 36f00d9
    # every trim chose its cut afresh (calls == trims).
    calls, trimmed = _oldest_to_drop_calls(monkeypatch, STEADY, 2_000)
    assert trimmed > 80
    assert calls < 0.7 * trimmed


def test_a_carry_past_its_bounds_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The comparison above has teeth: a carry that skips the lower bound (keeps a cut after the tokens
    to drop fell to what fewer rounds hold: a budget raised) gives another history than a fresh cut."""
    real = trim_sections._carried_drop

    def loose(m: Measure, items: tuple[SectionItem, ...], size: int, need: int) -> Any:
        for d in m.drops:
            if 0 < need <= d.acc and items[: len(d.items)] == d.items:
                return d
        return real(m, items, size, need)

    ops = STEADY[:30]
    budgets = [2_000, 2_000, 2_600]
    assert list(_trims(ops, budgets, "Fix it.", Measure(COUNTER))) == list(_trims(ops, budgets, "Fix it.", None))
    monkeypatch.setattr(trim_sections, "_carried_drop", loose)
    assert list(_trims(ops, budgets, "Fix it.", Measure(COUNTER))) != list(_trims(ops, budgets, "Fix it.", None))


def _closed_session(monkeypatch: pytest.MonkeyPatch, carry: bool) -> list[tuple[Any, ...]]:
    """Every request of a gates-closed session (the history cut to the window every turn)."""
    monkeypatch.setattr(trim_sections, "RECENT_DROPS", trim_sections.RECENT_DROPS if carry else 0)
    pipe = Pipeline("deepseek-chat", "openai", 6_000, counter=TokenCounter(CharTokenizer()), serve=False,
                    clock=lambda: 0.0, limits=OptimizeLimits.all_closed())  # fmt: skip
    pipe.identity("You are a careful coding agent.")
    pipe.add_tool("bash", "Run", {"type": "object", "properties": {"n": {"type": "integer"}}})
    pipe.user("Fix the bug.")
    out = []
    for t in range(90):
        req = pipe.next_request()
        out.append((json.dumps(req.body, sort_keys=True), json.dumps(req.trace["sections"], sort_keys=True), req.trace["final_tokens"]))
        pipe.record_usage({"prompt_tokens": req.trace["final_tokens"], "completion_tokens": 10})
        calls = pipe.assistant(f"step {t}", [{"id": f"c{t}", "name": "bash", "arguments": json.dumps({"n": t})}])
        pipe.tool_result(calls[0].id, "r" * (200 + 53 * (t % 7)))
    drops = len(pipe.measure.drops)
    pipe.close()
    assert (drops > 0) == carry
    return out


def test_a_gates_closed_session_is_the_same_with_the_carry_off(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _closed_session(monkeypatch, True) == _closed_session(monkeypatch, False)
