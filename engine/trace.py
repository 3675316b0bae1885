"""The EXPLAIN ANALYZE record of a turn (see docs/TRACE_SCHEMA.md), and the budget contract check."""

from __future__ import annotations

from collections.abc import Mapping
from itertools import compress
from operator import attrgetter
from typing import TYPE_CHECKING, Any, NamedTuple, cast

from engine.assembly import Assembly, Measure, Section, wire_order
from engine.errors import BudgetExceededError
from engine.hashing import sha256_hex
from engine.plan import TIER_LABELS, Plan, Reserves, budget_of
from engine.providers import SerializedRequest
from engine.providers.base import Block, PrefixDigest
from engine.trace_schema import Marker, Step, Trace, TraceSection
from engine.types import CacheScope, Form, Priority, SectionKind

if TYPE_CHECKING:
    from engine.config import PipelineConfig
    from engine.optimize import OptimizeResult


_KIND_VALUES = {k: k.value for k in SectionKind}
# Labels and values read from dicts: the enums' `label` properties and `.value` descriptors are a
# Python call each, several per section every turn.
_SCOPE_LABELS = {k: k.label for k in CacheScope}
_PRIORITY_LABELS = {k: k.label for k in Priority}
_FORM_VALUES = {k: k.value for k in Form}
_TOKENS = attrgetter("tokens")
_ID = attrgetter("id")
_MARKER = attrgetter("marker")  # plain strings; an enum's .value is a slow descriptor
_EMPTY_SHA = sha256_hex("")  # a section with no blocks (hashed once, not every turn)


class Figures(NamedTuple):
    """What a trace reads from the Measure and the serialized request, taken when the request is built:
    the Measure's memos move on with later builds (a primed history total, forgotten messages), so a
    trace built later from these (engine/trace_lazy.py) says what one built at the request says. Small:
    no body bytes, no Measure."""

    order: tuple[Section, ...]  # the sent sections in wire order
    shas: dict[str, str]  # their content hashes, in wire order (the next turn's `changed`)
    planned: dict[str, int]  # tokens of each section before optimize
    tokens: tuple[int, ...]  # tokens of each sent section, in `order`
    final_tokens: int
    blocks: list[Block]
    cacheable_prefix_tokens: int
    request_sha256: str
    prefix_sha256: str | PrefixDigest  # a PrefixDigest: computed when the trace is built


def figures_of(before: Assembly, res: OptimizeResult, ser: SerializedRequest, m: Measure) -> Figures:
    """The figures build_trace reads from `m` and `ser`, as they are now."""
    section_shas = ser.section_shas
    if not section_shas:  # a request serialized elsewhere: hash the blocks of each section here
        joined: dict[str, str] = {}
        for b in ser.blocks:
            joined[b.section] = joined.get(b.section, "") + b.sha
        section_shas = {sid: sha256_hex(v) for sid, v in joined.items()}
    order = tuple(wire_order(res.asm))
    get, empty, section = section_shas.get, _EMPTY_SHA, m.section
    planned = {s.id: section(s) for s in before}
    if res.asm is before and len(planned) == len(before):
        # What was planned is what is sent (a held turn's usual case), and the ids are distinct: each
        # sent section's tokens read back from `planned` in C, not asked of the Measure again.
        tokens = tuple(map(planned.__getitem__, map(_ID, order)))
    else:
        tokens = tuple(map(section, order))
    return Figures(
        order,
        {s.id: get(s.id, empty) for s in order},
        planned,
        tokens,
        m.total(res.asm),
        ser.blocks,
        ser.cacheable_prefix_tokens,
        ser.request_sha256,
        ser.prefix_digest(),
    )


def section_shas_of(trace: Mapping[str, Any] | None) -> dict[str, str]:
    """Each section's content hash in a built trace (what the next trace's `changed` compares with)."""
    return {s["id"]: s["sha256"] for s in trace["sections"]} if trace else {}


def build_trace(
    turn: int,
    cfg: PipelineConfig,
    p: Plan,
    reserves: Reserves,
    before: Assembly,
    res: OptimizeResult,
    ser: SerializedRequest,
    m: Measure,
    prev: dict[str, Any] | None,
    latch_flips: list[str],
    spill_failures: list[str],
) -> Trace:
    """Sections in wire order with planned vs sent tokens and a content hash (changed since `prev`),
    markers with their token offsets, every optimize step, and the request hashes."""
    return trace_from(
        turn,
        cfg,
        p,
        reserves,
        res,
        figures_of(before, res, ser, m),
        section_shas_of(prev),
        latch_flips,
        spill_failures,
    )


def trace_from(
    turn: int,
    cfg: PipelineConfig,
    p: Plan,
    reserves: Reserves,
    res: OptimizeResult,
    fig: Figures,
    prev_sections: Mapping[str, str],
    latch_flips: list[str],
    spill_failures: list[str],
) -> Trace:
    """build_trace from the figures taken at the request (`figures_of`) and the previous trace's section
    hashes: the same dict whenever it is built."""
    planned, section_shas = fig.planned, fig.shas
    scope_labels, priority_labels, form_values, budgets = (
        _SCOPE_LABELS,
        _PRIORITY_LABELS,
        _FORM_VALUES,
        p.budgets,
    )
    sections: list[TraceSection] = []
    for s, tokens in zip(fig.order, fig.tokens, strict=True):
        sha = section_shas[s.id]
        sections.append(
            {
                "id": s.id,
                "name": s.name,
                "kind": _KIND_VALUES[s.kind],
                "scope": scope_labels[s.scope],
                "priority": priority_labels[s.priority],
                "budget": budgets.get(s.id, 0),
                "planned": planned.get(s.id, 0),
                "tokens": tokens,
                "form": form_values[s.form] if s.items or s.form != Form.FULL else "dropped",
                "omitted": s.omitted,
                "sha256": sha,
                "changed": prev_sections.get(s.id) not in (None, sha),
                "items": len(s.items),
                "note": s.note,
            }
        )
    position = {sec["id"]: i for i, sec in enumerate(sections)}
    markers: list[Marker] = []
    if res.markers:  # no markers placed: no block is marked
        blocks = fig.blocks
        # The marked blocks found in C (a request has hundreds of blocks), and each one's token offset
        # summed on from the one before it (in C): the blocks after the last marker are never summed,
        # and no running total of every block is kept (~20 us a turn at 300 blocks, most of the markers).
        offset, start = 0, 0
        for i in compress(range(len(blocks)), map(_MARKER, blocks)):
            b = blocks[i]
            offset += sum(map(_TOKENS, blocks[start : i + 1]))
            start = i + 1
            markers.append(
                {
                    "index": position[b.section],
                    "section": b.section,
                    "scope": sections[position[b.section]]["scope"],
                    "offset_tokens": offset,
                }
            )
    return {
        "turn": turn,
        "model": cfg.model,
        "provider": cfg.provider,
        "limit": cfg.window,
        "usable": budget_of(cfg.window, cfg.margin).usable,
        "pressure": {"raw": round(p.raw_pressure, 4), "predictive": round(p.predictive_pressure, 4)},
        "reserves": {
            "response": reserves.response,
            "thinking": reserves.thinking,
            "schema": reserves.schema,
            "percentile": reserves.percentile,
        },
        "thresholds": cfg.thresholds.to_dict(),
        "tier": TIER_LABELS[p.tier],
        "tier_reason": p.tier_reason(),
        "estimated_tokens": p.estimated_tokens,
        "final_tokens": fig.final_tokens,
        "ceiling": p.ceiling,
        "sections": sections,
        # Optimize rules emit their audit records as plain dicts; their keys are the Step keys.
        "steps": cast(list[Step], res.steps),
        "actions": cast(list[Step], res.actions),
        "skipped": cast(list[Step], res.skipped),
        "markers": markers,
        "cacheable_prefix_tokens": fig.cacheable_prefix_tokens,
        "request_sha256": fig.request_sha256,
        "prefix_sha256": ph if isinstance(ph := fig.prefix_sha256, str) else ph.value(),
        "usage": None,
        "cache_break": None,
        "alerts": [],
        "latch_flips": list(latch_flips),
        "spill_failures": list(spill_failures),
        "error": None,
    }


def check_budget(trace: Mapping[str, Any]) -> None:
    """The budget contract: a request never exceeds its ceiling. When even the content the engine may
    not evict (anchors, goal, Never sections, the task and the newest round) does not fit, fail loudly."""
    if trace["final_tokens"] <= trace["ceiling"]:
        return
    kept = ", ".join(
        f"{s['id']} {s['tokens']}"
        for s in trace["sections"]
        if s["priority"] == "never" or s["kind"] in ("identity", "constraints", "goal", "history")
    )
    raise BudgetExceededError(
        f"turn {trace['turn']}: the request still needs {trace['final_tokens']} tokens after every optimization, "
        f"over its ceiling of {trace['ceiling']} (window {trace['limit']} minus margin and a "
        f"{trace['reserves']['response']}-token response reserve); content that is never evicted: {kept}. "
        "Give a larger window or shorten the protected sections."
    )
