"""Enumerations shared by every phase: cache scopes, compression priorities, lifecycles, tiers, kinds."""

from __future__ import annotations

from enum import IntEnum, StrEnum


class CacheScope(IntEnum):
    """How widely a section's bytes can be shared in a provider's prefix cache.

    The integer value is the volatility rank used by cache alignment: lower goes first.
    """

    GLOBAL = 0  # identical across sessions (identity, tool schemas)
    SESSION = 1  # stable within a session (latches, task)
    NONE = 2  # changes every turn (history tail, emergent items)

    @property
    def label(self) -> str:
        return _SCOPE_LABELS[self]


class Priority(IntEnum):
    """Compression priority: which sections give up tokens first. Higher value = compressed earlier."""

    NEVER = 0
    LAST_RESORT = 1
    NORMAL = 2
    FIRST = 3

    @property
    def label(self) -> str:
        return _PRIORITY_LABELS[self]


class Lifecycle(StrEnum):
    STATIC = "static"
    SESSION_LATCH = "session_latch"
    PER_TURN = "per_turn"
    EMERGENT = "emergent"


class Tier(IntEnum):
    """Compaction tier, ordered by aggressiveness."""

    NORMAL = 0
    TRIM_SCHEMAS = 1
    COMPACT_HISTORY = 2
    AGGRESSIVE_PRUNE = 3

    @property
    def label(self) -> str:
        return _TIER_LABELS[int(self)]


class SectionKind(StrEnum):
    IDENTITY = "identity"
    CONSTRAINTS = "constraints"
    TOOLS = "tools"
    LATCH = "latch"
    MEMORY = "memory"
    WORKING_MEMORY = "working_memory"
    GOAL = "goal"
    CONTEXT = "context"
    EMERGENT = "emergent"
    HISTORY = "history"


class Form(StrEnum):
    """The form in which a section (or item) reached the request."""

    FULL = "full"
    TRIMMED = "trimmed"
    CLEARED = "cleared"
    SPILLED = "spilled"
    DROPPED = "dropped"
    DEGRADED = "degraded"


# Labels looked up, not computed: an enum's `name` is a slow descriptor, and traces ask every turn.
# CacheScope and Priority members compare equal to their ints (and to each other), so one table each.
_TIER_LABELS = ("Normal", "TrimSchemas", "CompactHistory", "AggressivePrune")
_SCOPE_LABELS = {m: m.name.lower() for m in CacheScope}
_PRIORITY_LABELS = {m: m.name.lower() for m in Priority}

# Sections whose content is never evicted, spilled or trimmed.
ANCHOR_KINDS = frozenset({SectionKind.IDENTITY, SectionKind.CONSTRAINTS})
PROTECTED_KINDS = frozenset({SectionKind.IDENTITY, SectionKind.CONSTRAINTS, SectionKind.GOAL})
