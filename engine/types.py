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
        return self.name.lower()


class Priority(IntEnum):
    """Compression priority: which sections give up tokens first. Higher value = compressed earlier."""

    NEVER = 0
    LAST_RESORT = 1
    NORMAL = 2
    FIRST = 3

    @property
    def label(self) -> str:
        return self.name.lower()


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
        return {0: "Normal", 1: "TrimSchemas", 2: "CompactHistory", 3: "AggressivePrune"}[int(self)]


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


# Sections whose content is never evicted, spilled or trimmed.
ANCHOR_KINDS = frozenset({SectionKind.IDENTITY, SectionKind.CONSTRAINTS})
PROTECTED_KINDS = frozenset({SectionKind.IDENTITY, SectionKind.CONSTRAINTS, SectionKind.GOAL})
