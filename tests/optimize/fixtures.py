"""Small hand-built assemblies for the per-rule tests (sqlglot-style: one rule, tiny inputs).

A character tokenizer keeps counts obvious: about four characters per token (engine.tokens.CharTokenizer).
"""

from __future__ import annotations

from dataclasses import replace

from engine.artifacts import Message, Text, ToolCall, ToolResult, ToolSchema
from engine.assembly import Assembly, Measure, Section
from engine.optimize import OptimizeContext, OptimizeLimits
from engine.plan import Plan
from engine.providers.policy import ANTHROPIC, ProviderCachePolicy
from engine.spill import MemorySpill
from engine.tokens import CharTokenizer, TokenCounter
from engine.types import CacheScope, Priority, SectionKind, Tier

MEASURE = Measure(TokenCounter(CharTokenizer()))


def section(
    sid: str,
    kind: SectionKind,
    items: tuple[object, ...],
    scope: CacheScope = CacheScope.SESSION,
    priority: Priority = Priority.NORMAL,
) -> Section:
    return Section(sid, sid, kind, scope, priority, items)  # type: ignore[arg-type]


def identity(text: str = "You are a careful agent.") -> Section:
    return section("identity", SectionKind.IDENTITY, (Text(text),), CacheScope.GLOBAL, Priority.NEVER)


def tools(*names: str) -> Section:
    schemas = tuple(ToolSchema(n, f"the {n} tool", '{"type":"object"}') for n in names)
    return section("tools", SectionKind.TOOLS, schemas, CacheScope.GLOBAL)


def text_section(sid: str, text: str, scope: CacheScope = CacheScope.SESSION) -> Section:
    return section(sid, SectionKind.CONTEXT, (Text(text),), scope)


def rounds(n: int, result_chars: int = 200, tool: str = "bash") -> tuple[Message, ...]:
    """The task, then n rounds of (assistant call, user result)."""
    msgs: list[Message] = [Message("user", (Text("Fix the failing test."),))]
    for k in range(n):
        msgs.append(Message("assistant", (Text(f"step {k}"), ToolCall(f"c{k}", tool, '{"cmd":"ls"}'))))
        msgs.append(Message("user", (ToolResult(f"c{k}", chr(97 + k % 26) * result_chars),)))
    return tuple(msgs)


def history(msgs: tuple[Message, ...]) -> Section:
    return section("history", SectionKind.HISTORY, msgs, CacheScope.NONE)


def make_plan(
    asm: Assembly, tier: Tier = Tier.NORMAL, ceiling: int | None = None, pressure: float = 0.5
) -> Plan:
    total = MEASURE.total(asm)
    return Plan(
        raw_pressure=pressure,
        predictive_pressure=pressure,
        tier=tier,
        raw_tier=tier,
        predictive_tier=tier,
        recovery_escalated=False,
        reason="test",
        ceiling=total if ceiling is None else ceiling,
        estimated_tokens=total,
        budgets={s.id: MEASURE.section(s) for s in asm},
    )


def ctx(
    asm: Assembly,
    tier: Tier = Tier.NORMAL,
    *,
    limits: OptimizeLimits | None = None,
    policy: ProviderCachePolicy = ANTHROPIC,
    budgets: dict[str, int] | None = None,
    ceiling: int | None = None,
    pressure: float = 0.5,
    **kw: object,
) -> OptimizeContext:
    p = make_plan(asm, tier, ceiling, pressure)
    if budgets:
        p = replace(p, budgets={**p.budgets, **budgets})
    return OptimizeContext(
        plan=p,
        limits=limits or OptimizeLimits(),
        policy=policy,
        measure=MEASURE,
        spill=MemorySpill(),
        **kw,  # type: ignore[arg-type]
    )


def pairs_intact(msgs: tuple[object, ...]) -> bool:
    """Every tool result answers a call of the assistant message right before its user message."""
    calls: set[str] = set()
    for m in msgs:
        assert isinstance(m, Message)
        if m.role == "assistant":
            calls = {c.id for c in m.tool_calls}
        elif any(r.call_id not in calls for r in m.tool_results):
            return False
    return True
