"""TrimSchemas: drop tool schemas the turn is unlikely to use (never called in the kept history)."""

from __future__ import annotations

from collections.abc import Set

from engine.artifacts import Message, ToolSchema
from engine.assembly import Assembly, Measure
from engine.optimize.context import OptimizeContext, RuleOutcome
from engine.optimize.history_scans import carried_names
from engine.types import Form, SectionKind

NAME = "trim_schemas"


def used_tool_names(asm: Assembly) -> set[str]:
    """Names of the tools called in the assembly's history (the full scan; apply carries it)."""
    names: set[str] = set()
    for s in asm:
        if s.kind == SectionKind.HISTORY:
            for it in s.items:
                if isinstance(it, Message):
                    names.update(c.name for c in it.tool_calls)
    return names


def carried_used(asm: Assembly, ctx: OptimizeContext) -> set[str]:
    """used_tool_names(asm), reading only the messages appended since a remembered scan of a history
    this one extends: wave 1 hands this rule the whole raw history every turn."""
    names: set[str] = set()
    for s in asm:
        if s.kind == SectionKind.HISTORY:
            names |= carried_names(ctx.measure, s.items)
    return names


def apply(asm: Assembly, ctx: OptimizeContext) -> RuleOutcome:
    return keep_used(asm, carried_used(asm, ctx), ctx.measure)


def keep_used(asm: Assembly, used: Set[str], m: Measure) -> RuleOutcome:
    """The rule's outcome when the tools called in the history are `used` (simulate's wave-1 lane,
    engine/sim/wave1_lane.py, knows the whole conversation's without its tuple)."""
    out = []
    dropped: list[str] = []
    saved = 0
    for s in asm:
        if s.kind != SectionKind.TOOLS:
            out.append(s)
            continue
        keep = tuple(i for i in s.items if not isinstance(i, ToolSchema) or i.name in used)
        # With no history yet every tool is equally likely: keep them all rather than none.
        if not used or len(keep) == len(s.items):
            out.append(s)
            continue
        gone = [i for i in s.items if i not in keep]
        saved += m.items(gone)
        dropped += [i.name for i in gone if isinstance(i, ToolSchema)]
        out.append(s.with_items(keep, Form.TRIMMED, m.items(gone)))
    if not dropped:
        return RuleOutcome(asm, False, "every schema is in use")
    return RuleOutcome(tuple(out), True, f"dropped unused schemas: {', '.join(sorted(dropped))}", saved)
