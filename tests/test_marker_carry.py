"""The markers rule carries its placement from one turn to the next (markers._carried).

At a provider with breakpoints (Anthropic, Bedrock) the rule placed every marker from the sections each
turn (~16 us), though an agent's turn leaves the sections before the history as they were and only the
conversation-tail marker moves to the new last message. A Measure now remembers recent placements with
what they were made of, and a build on the very same sections before a history (still last, still over
the minimum cacheable prefix) takes the remembered markers with the tail moved. These tests hold that a
Measure that carries gives exactly what a fresh one (nothing to carry) gives, call after call, over random
sessions (appends, rewritten and shrunk histories, new or resized sections before it, empty sections,
flipped latches, the task marker and compaction note on and off, other minimum prefixes); that an
Anthropic session is the same request for request with the carry on and off; that the carry is taken;
and that a carry with a check left out would be caught by the comparison.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from engine.artifacts import Message, SectionItem, Text, ToolCall, ToolResult
from engine.assembly import Assembly, Measure, Section
from engine.optimize import OptimizeContext, OptimizeLimits, markers
from engine.optimize.context import RuleOutcome
from engine.pipeline import Pipeline
from engine.plan import Plan
from engine.providers.policy import ANTHROPIC, BEDROCK, ProviderCachePolicy
from engine.tokens import CharTokenizer, TokenCounter
from engine.types import CacheScope, Priority, SectionKind, Tier

COUNTER = TokenCounter(CharTokenizer())  # ~4 characters a token
PLAN = Plan(0.5, 0.5, Tier.NORMAL, Tier.NORMAL, Tier.NORMAL, False, "test", 10**9, 0, {})
POLICIES = [
    ANTHROPIC,
    BEDROCK,
    replace(ANTHROPIC, min_cacheable_tokens=300),
    replace(ANTHROPIC, max_markers=2),
]

# One call of the rule: what changes before it. "round": an assistant call and its result of n characters
# appended (the usual turn); "user": a user message of n characters appended (before the first call it
# extends the task); "same": the very assembly again; "copy": the sections before the history as
# new equal objects; "resize": the system section rewritten with n characters; "empty": an empty context
# section before the history appears or goes; "shrink": the history loses its oldest rounds (a cut);
# "task": the task message rewritten; "flip": a latch flipped this call; "mark": the task marker toggled;
# "note": the compaction note toggled; "policy": another policy.
OPS = ["round"] * 6 + [
    "user",
    "same",
    "copy",
    "resize",
    "empty",
    "shrink",
    "task",
    "flip",
    "mark",
    "note",
    "policy",
]
steps = st.lists(st.tuples(st.sampled_from(OPS), st.integers(0, 3_000)), min_size=1, max_size=30)


class _Session:
    """The rule's inputs as a session moves them, each call's assembly a new tuple (as each build makes)."""

    def __init__(self, system: int, tools: bool) -> None:
        self.tools = (
            Section(
                "tools", "tools", SectionKind.TOOLS, CacheScope.GLOBAL, Priority.NEVER, (Text("t" * 150),)
            )
            if tools
            else None
        )
        self.system = self._system(system)
        self.memory = Section("memory", "memory", SectionKind.MEMORY, CacheScope.SESSION, Priority.NORMAL,
                              (Text("m" * 400),))  # fmt: skip
        self.empty: Section | None = None
        self.msgs: list[SectionItem] = [Message("user", (Text("Fix the failing test."),))]
        self.latch = False
        self.task_marker = True
        self.noted = False
        self.policy: ProviderCachePolicy = ANTHROPIC
        self.k = 0

    @staticmethod
    def _system(n: int) -> Section:
        return Section("identity", "identity", SectionKind.IDENTITY, CacheScope.GLOBAL, Priority.NEVER,
                       (Text("s" * n),))  # fmt: skip

    def step(self, op: str, n: int) -> None:
        self.latch = False
        if op == "round":
            self.k += 1
            self.msgs.append(
                Message("assistant", (ToolCall(f"c{self.k}", "bash", json.dumps({"k": self.k})),))
            )
            self.msgs.append(Message("user", (ToolResult(f"c{self.k}", "x" * n),)))
        elif op == "user":
            self.msgs.append(Message("user", (Text("u" * n),)))
        elif op == "copy":
            self.system = replace(self.system)
            self.memory = replace(self.memory)
            self.tools = replace(self.tools) if self.tools is not None else None
        elif op == "resize":
            self.system = self._system(n)
        elif op == "empty":
            self.empty = (
                None
                if self.empty is not None
                else Section("ctx", "ctx", SectionKind.CONTEXT, CacheScope.SESSION, Priority.NORMAL, ())
            )
        elif op == "shrink":
            self.msgs = self.msgs[:1] + self.msgs[1 + 2 * (n % 3 + 1) :]
        elif op == "task":
            self.msgs[0] = Message("user", (Text("Fix it. " * (n % 50)),))
        elif op == "flip":
            self.latch = True
        elif op == "mark":
            self.task_marker = not self.task_marker
        elif op == "note":
            self.noted = not self.noted
        elif op == "policy":
            self.policy = POLICIES[n % len(POLICIES)]

    def assembly(self) -> Assembly:
        hist = Section(
            "history", "history", SectionKind.HISTORY, CacheScope.NONE, Priority.NORMAL, tuple(self.msgs)
        )
        before = [s for s in (self.system, self.memory, self.empty) if s is not None]
        return (*before, hist, *((self.tools,) if self.tools is not None else ()))

    def context(self, m: Measure) -> OptimizeContext:
        ctx = OptimizeContext(PLAN, OptimizeLimits(), self.policy, m, latch_flipped=self.latch)
        ctx.task_marker, ctx.task_noted = self.task_marker, self.noted
        return ctx


def _outcomes(ops: list[tuple[str, int]], system: int, tools: bool, m: Measure | None) -> list[RuleOutcome]:
    """Each call's outcome; `m` None: a fresh Measure every call (nothing carried)."""
    s = _Session(system, tools)
    out = []
    asm = s.assembly()
    for op, n in ops:
        s.step(op, n)
        if op != "same":
            asm = s.assembly()
        mt = m if m is not None else Measure(COUNTER)
        out.append(markers.apply(asm, s.context(mt)))
    return out


@settings(max_examples=400, deadline=None)
@given(ops=steps, system=st.integers(0, 6_000), tools=st.booleans())
# The task grows by a user message after a cut left it alone: the same first item, the task marker
# one item later.
@example(ops=[("round", 10), ("shrink", 0), ("user", 10), ("round", 10)], system=5_000, tools=True)
def test_a_carried_placement_is_the_placement_made_afresh(
    ops: list[tuple[str, int]], system: int, tools: bool
) -> None:
    """Call after call the carrying Measure gives the fresh Measure's outcome: whether it changed, its
    detail (the count and why markers were left out) and the markers, in order."""
    assert _outcomes(ops, system, tools, Measure(COUNTER)) == _outcomes(ops, system, tools, None)


def _session(provider: str, carry: bool) -> tuple[list[bytes], list[Any]]:
    """A short Anthropic-style session (tools, system prompt, task, rounds with a large output now and then,
    a latch flip, a compaction at a small window), its request bytes and the traces' markers and steps.
    carry=False: each build's Measure remembers no placement (the rule places from the sections)."""
    pipe = Pipeline("claude-sonnet-4", provider, 12_000)
    pipe.add_tool(
        "bash", "Run a shell command. " * 40, {"type": "object", "properties": {"cmd": {"type": "string"}}}
    )
    pipe.identity("You are a careful coding agent. " * 60)
    pipe.user("Fix the failing test in tests/test_io.py")
    reqs, traces = [], []
    for t in range(40):
        if not carry:
            pipe.measure.placed = _Forgetful()
        req = pipe.next_request()
        reqs.append(req.bytes)
        traces.append((req.trace["markers"], [s for s in req.trace["steps"] if s["step"] == markers.NAME]))
        pipe.record_usage({"input_tokens": 1_000 + 300 * t, "output_tokens": 40})
        calls = pipe.assistant(
            "", [{"id": f"c{t}", "name": "bash", "arguments": json.dumps({"cmd": f"ls {t}"})}]
        )
        pipe.tool_result(calls[0].id, ("out " * (2_000 if t % 7 == 3 else 30)) + str(t))
        if t == 12:
            pipe.latch("mode", "strict")
    pipe.close()
    return reqs, traces


class _Forgetful(list[Any]):
    """A Measure's placements that keep nothing (the reference: every call places afresh)."""

    def insert(self, index: Any, item: Any) -> None:
        pass


@pytest.mark.parametrize("provider", ["anthropic", "bedrock"])
def test_a_session_is_the_same_with_the_carry_on_and_off(provider: str) -> None:
    on, off = _session(provider, True), _session(provider, False)
    assert on[0] == off[0]
    assert on[1] == off[1]
    assert any(marks for marks, _ in on[1])


def _placements(monkeypatch: pytest.MonkeyPatch, ops: list[tuple[str, int]]) -> tuple[int, int]:
    """(markers made, calls) over a session: a placement from the sections makes one per candidate."""
    made = [0]

    class Counted(markers.Marker):
        def __init__(self, *a: Any) -> None:
            made[0] += 1
            super().__init__(*a)

    monkeypatch.setattr(markers, "Marker", Counted)
    calls = len(_outcomes(ops, 5_000, True, Measure(COUNTER)))
    monkeypatch.undo()
    return made[0], calls


def test_an_append_turn_carries_the_placement(monkeypatch: pytest.MonkeyPatch) -> None:
    # Tools, system, memory and the history: four candidates, the task marker a fifth. On 230518c every
    # call made them all (4-5 a call); now the first call places and the rest move the tail (~1 a call).
    made, calls = _placements(monkeypatch, [("round", 200 + 50 * (k % 4)) for k in range(30)])
    assert calls == 30
    assert made <= calls + 10


def test_a_carry_with_a_check_left_out_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The comparison has teeth: a carry that takes the sections before the history by position and
    kind, not as the very objects, keeps a system prompt's markers after it was rewritten under the
    minimum cacheable prefix."""
    real = markers._carried

    def loose(last: Any, asm: Assembly, order: Assembly, ctx: OptimizeContext) -> RuleOutcome | None:
        if len(order) == len(last.before) + 1 and all(
            a.kind == b.kind for a, b in zip(order, last.before, strict=False)
        ):
            last = last._replace(before=tuple(order[:-1]))
        return real(last, asm, order, ctx)

    ops = [("round", 300), ("round", 300), ("resize", 40), ("round", 300)]
    assert _outcomes(ops, 5_000, True, Measure(COUNTER)) == _outcomes(ops, 5_000, True, None)
    monkeypatch.setattr(markers, "_carried", loose)
    assert _outcomes(ops, 5_000, True, Measure(COUNTER)) != _outcomes(ops, 5_000, True, None)


def _placing(monkeypatch: pytest.MonkeyPatch, ops: list[tuple[str, int]]) -> int:
    """How many calls over `ops` placed every marker from the sections (markers._placed)."""
    made = [0]
    real = markers._placed

    def counted(asm: Assembly, order: Assembly, ctx: OptimizeContext) -> RuleOutcome:
        made[0] += 1
        return real(asm, order, ctx)

    monkeypatch.setattr(markers, "_placed", counted)
    _outcomes(ops, 5_000, True, Measure(COUNTER))
    monkeypatch.undo()
    return made[0]


# The task alone (the first request), then the calls where the task's breakpoint moves on the same sections:
# the task stops being the history's tail, a compaction's note goes after it, the task is rewritten.
MOVES = [
    ("same", 0),
    ("round", 300),
    ("round", 300),
    ("note", 0),
    ("round", 300),
    ("task", 7),
    ("round", 300),
]


def test_a_moved_task_breakpoint_keeps_the_other_markers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where only the task's breakpoint moved, the placement's other markers (tools, system, memory) are
    kept and the breakpoint placed again, as a fresh Measure places everything: the first call places
    from the sections, no later one does (on 737b726 the second call, the note and the rewritten task
    each placed from the sections again)."""
    assert _outcomes(MOVES, 5_000, True, Measure(COUNTER)) == _outcomes(MOVES, 5_000, True, None)
    assert _placing(monkeypatch, MOVES) == 1


def test_a_moved_task_breakpoint_carried_as_it_was_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The comparison has teeth here too: a carry that keeps the last placement's task breakpoint (the
    markers as they were with the tail moved) where it moved differs from the fresh placement."""
    real = markers._carried

    def stale(last: Any, asm: Assembly, order: Assembly, ctx: OptimizeContext) -> Any:
        out = real(last, asm, order, ctx)
        if isinstance(out, markers._Retask):
            hist = order[-1]
            tail = markers.Marker(hist.id, len(hist.items) - 1, hist.scope.label, "conversation tail")
            k = last.tail
            return RuleOutcome(
                asm, True, last.detail, markers=(*last.markers[:k], tail, *last.markers[k + 1 :])
            )
        return out

    monkeypatch.setattr(markers, "_carried", stale)
    assert _outcomes(MOVES, 5_000, True, Measure(COUNTER)) != _outcomes(MOVES, 5_000, True, None)
