"""Statistics the planner reads: completion-length percentiles per bucket, and estimate calibration.

Read-only during a turn; only Feedback writes, and only after a successful call.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from dataclasses import dataclass, field
from typing import Any

MAX_SAMPLES = 256  # per bucket; old samples fall off so the reserve tracks recent behaviour
RECOVERY_TURNS = 3
MIN_CALIBRATION_SAMPLES = 3  # successful turns after a prompt_too_long before the planner relaxes again


def percentile(values: list[int], pct: float) -> int:
    """Nearest-rank percentile (deterministic, no interpolation)."""
    if not values:
        return 0
    return ranked(sorted(values), pct)


def ranked(ordered: list[int], pct: float) -> int:
    """Nearest-rank percentile of values already in ascending order."""
    rank = max(1, -(-len(ordered) * pct // 100))  # ceil
    return ordered[int(rank) - 1]


@dataclass
class Statistics:
    """Usage statistics learned from the session's calls: completion lengths, token calibration, recovery turns."""
    completions: dict[str, list[int]] = field(default_factory=dict)  # "model|source" -> output token counts
    calibration: dict[str, float] = field(default_factory=dict)  # model -> actual/estimated input ratio
    calibration_samples: dict[str, int] = field(default_factory=dict)
    recovery_turns_left: int = 0
    recoveries: int = 0
    # Percentiles already computed, by (bucket, pct, samples seen): the planner asks every turn (and a
    # what-if many times per turn) while the samples change once per call. Not part of the state.
    _pct: dict[tuple[str, int, int], int] = field(default_factory=dict, repr=False, compare=False)
    _seen: int = field(default=0, repr=False, compare=False)
    # Each bucket's samples in ascending order, kept in step by record_completion (an insort and a
    # removal by bisection) so a new percentile costs no sort of the 256-sample window. Rebuilt when it
    # is out of step with the samples (completions edited from outside). Not part of the state.
    _ordered: dict[str, list[int]] = field(default_factory=dict, repr=False, compare=False)

    @staticmethod
    def bucket(model: str, source: str) -> str:
        return f"{model}|{source}"

    def response_reserve(self, model: str, source: str, default: int) -> tuple[int, int]:
        """(reserve tokens, percentile used): p75 in steady state, p95 while recovering."""
        pct = 95 if self.recovery_turns_left > 0 else 75
        bucket = f"{model}|{source}"  # bucket(model, source), without a call (every build asks)
        samples = self.completions.get(bucket)
        if not samples:
            return default, pct
        key = (bucket, pct, self._seen)
        got = self._pct.get(key)
        if got is None:
            if len(self._pct) > 64:
                self._pct.clear()
            got = self._pct[key] = ranked(self._ordered_samples(bucket, samples), pct)
        return got, pct

    def _ordered_samples(self, bucket: str, samples: list[int]) -> list[int]:
        ordered = self._ordered.get(bucket)
        if ordered is None or len(ordered) != len(samples):
            ordered = self._ordered[bucket] = sorted(samples)
        return ordered

    def record_completion(self, model: str, source: str, output_tokens: int) -> None:
        bucket = f"{model}|{source}"  # bucket(model, source)
        samples = self.completions.setdefault(bucket, [])
        ordered = self._ordered.get(bucket)
        if ordered is not None and len(ordered) != len(samples):
            ordered = self._ordered[bucket] = sorted(samples)
        value = max(0, int(output_tokens))
        samples.append(value)
        if ordered is not None:
            insort(ordered, value)
        self._seen += 1
        if len(samples) > MAX_SAMPLES:
            gone = samples.pop(0)
            if ordered is not None:
                del ordered[bisect_left(ordered, gone)]

    def record_calibration(self, model: str, estimated: int, actual: int) -> None:
        if estimated <= 0 or actual <= 0:
            return
        ratio = actual / estimated
        n = self.calibration_samples.get(model, 0)
        prev = self.calibration.get(model, ratio)
        # An exponential average: quick to learn a tokenizer mismatch, slow to be moved by one odd call.
        alpha = 1.0 / (n + 1) if n < 10 else 0.1
        self.calibration[model] = prev + alpha * (ratio - prev)
        self.calibration_samples[model] = n + 1

    def calibration_for(self, model: str) -> float:
        """Provider tokens per estimated token for `model`, once three calls have been seen (1.0 before).
        Clamped to [0.5, 2.0]: a ratio outside that means a wrong tokenizer, not something to plan by."""
        if self.calibration_samples.get(model, 0) < MIN_CALIBRATION_SAMPLES:
            return 1.0
        return min(2.0, max(0.5, self.calibration[model]))

    def enter_recovery(self) -> None:
        self.recovery_turns_left = RECOVERY_TURNS
        self.recoveries += 1

    def turn_succeeded(self) -> None:
        if self.recovery_turns_left > 0:
            self.recovery_turns_left -= 1

    def snapshot(self) -> dict[str, Any]:
        return {
            "completions": {k: list(v) for k, v in sorted(self.completions.items())},
            "calibration": dict(sorted(self.calibration.items())),
            "recovery_turns_left": self.recovery_turns_left,
        }
