"""Section assembly: turn the catalog, this turn's bind results and the conversation into the ordered
sections Optimize works on. A pure function of its inputs."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

from engine.artifacts import Message, Part, SectionItem, Text, ToolSchema
from engine.assembly import Assembly, Section
from engine.catalog import KIND_ORDER, EmergentItem, LatchTable, SourceSpec, sort_key
from engine.types import CacheScope, Form, Priority, SectionKind

_ORDER = {k: i for i, k in enumerate(KIND_ORDER)}


def _source_section(
    spec: SourceSpec, bound: dict[str, Any] | None, last: str, blobs: Mapping[str, str]
) -> Section:
    if bound is not None and bound.get("error"):
        # The last good value beats a placeholder; with none, the placeholder says what failed.
        text = last or f"[{spec.label} unavailable: {bound['error']}]"
        return Section(
            spec.id,
            spec.label,
            spec.kind,
            spec.scope,
            spec.priority,
            (Text(text),),
            Form.DEGRADED,
            0,
            bound["error"],
        )
    text = blobs[bound["h"]] if bound is not None else last
    items: tuple[SectionItem, ...] = (Text(text),) if text else ()
    return Section(spec.id, spec.label, spec.kind, spec.scope, spec.priority, items)


def assemble(
    specs: Sequence[SourceSpec],
    content: Mapping[str, str],
    blobs: Mapping[str, str],
    bound: Mapping[str, dict[str, Any]],
    tools: Sequence[ToolSchema],
    latches: LatchTable,
    emergent_due: Sequence[EmergentItem],
    history: Sequence[Message],
    pending: Sequence[Part],
    cache: dict[str, tuple[Any, Section]] | None = None,
) -> Assembly:
    """Sections in catalog order (kinds in KIND_ORDER, registration order within a kind), history last.

    `cache` (one dict kept by the caller across turns) hands back the same Section object for a
    source, tool list or latch table that did not change, so its text is not hashed again and every
    per-section memo downstream (token totals, plans, fragments) hits. Sections are immutable values:
    the result is the same with or without it."""
    out = source_sections(specs, content, blobs, bound, tools, latches, emergent_due, cache)
    return (*out, history_section(history, pending))


def source_sections(
    specs: Sequence[SourceSpec],
    content: Mapping[str, str],
    blobs: Mapping[str, str],
    bound: Mapping[str, dict[str, Any]],
    tools: Sequence[ToolSchema],
    latches: LatchTable,
    emergent_due: Sequence[EmergentItem],
    cache: dict[str, tuple[Any, Section]] | None = None,
) -> tuple[Section, ...]:
    """assemble's sections before the history, in their order (see assemble)."""
    memo: dict[str, tuple[Any, Section]] = {} if cache is None else cache

    def reuse(slot: str, key: Any, make: Callable[[], Section]) -> Section:
        # One entry per slot (source id, "tools", "latches"): a source whose text changes every turn
        # replaces its entry instead of piling up old texts.
        hit = memo.get(slot)
        if hit is not None and hit[0] == key:
            return hit[1]
        sec = make()
        memo[slot] = (key, sec)
        return sec

    out = []
    for _, spec in sorted(enumerate(specs), key=lambda e: sort_key(e[1], e[0])):
        b = bound.get(spec.id)
        last = content.get(spec.id, "")
        key = (spec, None if b is None else tuple(sorted(b.items())), last)
        out.append(reuse("source " + spec.id, key, partial(_source_section, spec, b, last, blobs)))
    if tools:
        tup = tuple(tools)
        out.append(
            reuse(
                "tools",
                tup,
                lambda: Section(
                    "tools", "Tools", SectionKind.TOOLS, CacheScope.GLOBAL, Priority.LAST_RESORT, tup
                ),
            )
        )
    if latches.latches:
        text = latches.render()
        out.append(
            reuse(
                "latches",
                text,
                lambda: Section(
                    "latches", "Latches", SectionKind.LATCH, CacheScope.SESSION, Priority.NEVER, (Text(text),)
                ),
            )
        )
    if emergent_due:
        text = "\n".join(f"- [{i.list_name}] {i.text}" for i in emergent_due)
        out.append(
            Section(
                "emergent", "Emergent", SectionKind.EMERGENT, CacheScope.NONE, Priority.FIRST, (Text(text),)
            )
        )
    out.sort(key=lambda s: _ORDER[s.kind])  # stable: registration order within a kind
    return tuple(out)


def history_section(history: Sequence[Message], pending: Sequence[Part]) -> Section:
    """The history section: the conversation, with the pending parts closed into a last user message."""
    if not pending:
        hist = tuple(history)
    elif isinstance(history, list):
        # One copy of a long history instead of two (tuple(history) + (msg,) builds the tuple twice, and
        # each copy of a 20,000-message tuple is a fresh 160 KB block): append, copy, restore.
        history.append(Message("user", tuple(pending)))
        try:
            hist = tuple(history)
        finally:
            history.pop()
    else:
        hist = (*history, Message("user", tuple(pending)))
    return Section("history", "History", SectionKind.HISTORY, CacheScope.NONE, Priority.NORMAL, hist)
