"""What-if settings: the one value a re-plan, a session-wide simulation and the inspector's sliders share.

`None` in a field means "as recorded". The key tuples name what a caller may override, in the order the
inspector shows them."""

from __future__ import annotations

from dataclasses import dataclass

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
