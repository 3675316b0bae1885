"""The EXPLAIN ANALYZE record of a turn (see docs/TRACE_SCHEMA.md), and the budget contract check."""

from __future__ import annotations

from collections.abc import Mapping
from itertools import accumulate, compress
from operator import attrgetter
from typing import TYPE_CHECKING, Any, cast

from engine.assembly import Assembly, Measure, wire_order
from engine.errors import BudgetExceededError
from engine.hashing import sha256_hex
from engine.plan import TIER_LABELS, Plan, Reserves, budget_of
from engine.providers import SerializedRequest
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
_MARKER = attrgetter("marker")  # plain strings; an enum's .value is a slow descriptor
_EMPTY_SHA = sha256_hex("")  # a section with no blocks (hashed once, not every turn)


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
    planned = {s.id: m.section(s) for s in before}
    prev_sections = {s["id"]: s["sha256"] for s in prev["sections"]} if prev else {}
    section_shas = ser.section_shas
    if not section_shas:  # a request serialized elsewhere: hash the blocks of each section here
        joined: dict[str, str] = {}
        for b in ser.blocks:
            joined[b.section] = joined.get(b.section, "") + b.sha
        section_shas = {sid: sha256_hex(v) for sid, v in joined.items()}
    empty = _EMPTY_SHA
    scope_labels, priority_labels, form_values, budgets = _SCOPE_LABELS, _PRIORITY_LABELS, _FORM_VALUES, p.budgets
    sections: list[TraceSection] = []
    for s in wire_order(res.asm):
        sha = section_shas.get(s.id, empty)
        sections.append(
            {
                "id": s.id,
                "name": s.name,
                "kind": _KIND_VALUES[s.kind],
                "scope": scope_labels[s.scope],
                "priority": priority_labels[s.priority],
                "budget": budgets.get(s.id, 0),
                "planned": planned.get(s.id, 0),
                "tokens": m.section(s),
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
        blocks = ser.blocks
        # Running token offsets and the marked blocks found in C: a request has hundreds of blocks.
        cum = list(accumulate(map(_TOKENS, blocks)))
        for i in compress(range(len(blocks)), map(_MARKER, blocks)):
            b = blocks[i]
            markers.append(
                {
                    "index": position[b.section],
                    "section": b.section,
                    "scope": sections[position[b.section]]["scope"],
                    "offset_tokens": cum[i],
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
        "final_tokens": m.total(res.asm),
        "ceiling": p.ceiling,
        "sections": sections,
        # Optimize rules emit their audit records as plain dicts; their keys are the Step keys.
        "steps": cast(list[Step], res.steps),
        "actions": cast(list[Step], res.actions),
        "skipped": cast(list[Step], res.skipped),
        "markers": markers,
        "cacheable_prefix_tokens": ser.cacheable_prefix_tokens,
        "request_sha256": ser.request_sha256,
        "prefix_sha256": ser.prefix_sha256,
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
