"""The early-compaction rule's yes/no for a held turn, with what does not change between turns worked
out once (issue 12: a steady turn's policy work is its new figures, not the rules again).

cost_aware.run (and the express lane, which must answer as it does) weighs a candidate cut every turn
the request is over the target: the horizon the saving is expected to last (cachecost.remaining_turns)
and whether it pays back within it and saves at least the economic cut size (cachecost.compacts_early).
Of their inputs only the turn's figures move from turn to turn (the request's tokens, the cut's
saving, the raw history's size, the turn number, the trigger the calibration moved); the provider's
cache rules and price ratios, the policy's scale and revision, and whether a rewrite's prefix is served
are fixed while the configuration and compaction state hold. `EarlyRule` keeps those and answers with
the same floating-point operations in the same order as the two functions (so the same answer, bit for
bit: tests/test_early_weigh.py drives both on random figures), without their eight calls a turn
(remaining_turns, compacts_early, _payback_terms, three CacheRules.cached, two turn_cost) and the
string comparisons of the rules name inside each `cached`.
"""

from __future__ import annotations

import math

from engine.policy.cachecost import CacheRules

_INF = math.inf
_LOG1P = math.log1p
_SQRT = math.sqrt

# CacheRules.cached's cases, as numbers compared once per call instead of names.
_NONE, _DEEPSEEK, _OPENAI, _MARKERS = 0, 1, 2, 3


def _kind(rules: str) -> int:
    if rules == "deepseek":
        return _DEEPSEEK
    if rules == "openai":
        return _OPENAI
    if rules in ("anthropic", "bedrock"):
        return _MARKERS
    return _NONE


class EarlyRule:
    """Whether cost_aware's early rule compacts a candidate cut, for one configuration and state:

    EarlyRule(rules, scale, rev2, served).compacts(turn, t1, trigger_tokens, n_raw, saves, kept, stable)
    == cachecost.compacts_early(rules, saves, kept, stable, horizon, served, reach, growth, rev2)
    with growth = n_raw / max(1, turn), to_trigger = inf if growth <= 0 else
    max(0.0, (trigger_tokens - t1) / growth), and (horizon, reach) = remaining_turns(turn, scale,
    to_trigger) under revision 2, (min(float(max(1, turn)) * scale, to_trigger), 0.0) before it (what
    cost_aware.run and the express lane compute before weighing)."""

    __slots__ = ("kind", "read", "premium", "scale", "rev2", "served")

    def __init__(self, rules: CacheRules, scale: float, rev2: bool, served: bool) -> None:
        self.kind = _kind(rules.rules)
        self.read = rules.read_ratio
        self.premium = max(0.0, rules.write_ratio - rules.read_ratio)  # _payback_terms' factor, once
        self.scale = scale
        self.rev2 = rev2
        self.served = served

    def _cached(self, n: int) -> int:
        """CacheRules.cached(n)."""
        if n < 0:
            n = 0
        kind = self.kind
        if kind == _DEEPSEEK:
            return n // 64 * 64
        if kind == _OPENAI:
            return 0 if n < 1024 else 1024 + (n - 1024) // 128 * 128
        if kind == _MARKERS:
            return n if n >= 1024 else 0
        return 0

    def compacts(
        self, turn: int, t1: int, trigger_tokens: int, n_raw: int, saves: int, kept: int, stable: int
    ) -> bool:
        if saves <= 0:
            return False  # (compacts_early's first test; nothing below changes that answer)
        # (max(a, b) and min(a, b) written as the comparisons they make: the same value, without a call.)
        n = turn if turn > 1 else 1  # max(1, turn)
        growth = n_raw / n
        if growth <= 0:
            to_trigger = _INF
        else:
            to_trigger = (trigger_tokens - t1) / growth
            if not to_trigger > 0.0:
                to_trigger = 0.0
        if self.rev2:
            # remaining_turns(turn, scale, to_trigger); to_trigger is never below 0 here
            if to_trigger == _INF:
                horizon, reach = _INF, 0.0
            else:
                sn = n * self.scale
                horizon, reach = sn * _LOG1P(to_trigger / sn), sn / (sn + to_trigger)
        else:
            horizon = float(n) * self.scale
            if to_trigger < horizon:
                horizon = to_trigger
            reach = 0.0
        # _payback_terms(rules, saves, kept, stable, served), its CacheRules.cached and turn_cost inline.
        cached = self._cached
        resend = kept - (cached(stable) if self.served else 0)
        if resend < 0:
            resend = 0
        extra = resend * self.premium
        r = self.read
        whole = kept + saves
        c_whole = cached(whole)
        c_kept = cached(kept)
        per_turn = (c_whole * r + (whole - c_whole)) - (c_kept * r + (kept - c_kept))
        turns = (
            (0.0 if per_turn > 0 else _INF) if extra <= 0 else (extra / per_turn if per_turn > 0 else _INF)
        )
        if not turns * (1.0 - reach) <= horizon:
            return False
        if not self.rev2 or per_turn <= 0 or growth <= 0:
            return True
        return saves >= _SQRT(2.0 * extra * growth / (per_turn / saves))
