"""What-if settings: the one value a re-plan, a session-wide simulation and the inspector's sliders share.

`None` in a field means "as recorded". The key tuples name what a caller may override, in the order the
inspector shows them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

THRESHOLD_KEYS: tuple[str, ...] = ("trim_schemas", "compact_history", "aggressive_prune")
GATE_KEYS: tuple[str, ...] = ("reorder", "trim_schemas", "clear_tool_results", "spill", "llm_summary", "drop_rounds")
PROVIDERS: tuple[str, ...] = ("anthropic", "openai", "bedrock", "prefix")
# The inspector's sliders are labelled trim/compact/prune, so people type those: accepted everywhere.
THRESHOLD_ALIASES: dict[str, str] = {"trim": "trim_schemas", "compact": "compact_history", "prune": "aggressive_prune"}


def threshold_key(name: str) -> str:
    """The threshold a user's name means (full or short slider name); ValueError naming the valid ones."""
    key = THRESHOLD_ALIASES.get(name, name)
    if key not in THRESHOLD_KEYS:
        short = ", ".join(f"{a} ({k})" for a, k in THRESHOLD_ALIASES.items())
        raise ValueError(f"unknown threshold {name!r}: use one of {short}")
    return key


def gate_key(name: str) -> str:
    """A gate's name as given, checked; ValueError naming the valid ones."""
    if name not in GATE_KEYS:
        raise ValueError(f"unknown optimizer gate {name!r}: use one of {', '.join(GATE_KEYS)}")
    return name


@dataclass(frozen=True)
class Overrides:
    """Settings to re-plan under. `window`: the context window (budget) in tokens."""

    window: int | None = None
    thresholds: dict[str, float] | None = None
    gates: dict[str, bool] | None = None
    provider: str | None = None

    def is_empty(self) -> bool:
        """True when nothing is overridden: the re-plan is the recorded plan."""
        return not (self.window or self.thresholds or self.gates or self.provider)


def carried_cut(actual: Mapping[str, Any], whatif: Mapping[str, Any]) -> int | None:
    """The history tokens a compaction made before this turn leaves out of both traces (the turn as
    recorded and its re-plan), when the re-plan kept that cut: the cost_aware policy keeps a compacted
    history as the session's state and appends to it, so no setting of one turn's re-plan undoes it (a
    wider window there sends the same tokens). None when the re-plan cut anew, or nothing was cut."""
    a, w = actual.get("compaction") or {}, whatif.get("compaction") or {}
    if not a.get("cut") or w.get("decision") == "compacted" or w.get("cut") != a.get("cut"):
        return None
    history = next((s for s in whatif.get("sections") or () if s.get("kind") == "history"), None)
    omitted = int(history.get("omitted") or 0) if history is not None else 0
    return omitted or None
