"""Alert rules over turn traces. Each rule is a small function: (trace, earlier traces) -> alert | None."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Trace = dict[str, Any]
Alert = dict[str, Any]

COMPACTION_STEPS = {"clear_tool_results", "drop_rounds", "llm_summary"}
ESTIMATE_ERROR_THRESHOLD = 0.15


def _alert(rule: str, severity: str, message: str, turn: int) -> Alert:
    return {"rule": rule, "severity": severity, "message": message, "turn": turn}


def compacted(t: Trace) -> bool:
    return any(a["step"] in COMPACTION_STEPS for a in t.get("actions", ()))


def cache_break(t: Trace, prev: list[Trace]) -> Alert | None:
    cb = t.get("cache_break")
    if not cb:
        return None
    return _alert("cache_break", "warning", f"cache broke at {cb['section']}: {cb['cause']}", t["turn"])


def compaction_cascade(t: Trace, prev: list[Trace]) -> Alert | None:
    if not compacted(t):
        return None
    last3 = sum(compacted(p) for p in prev[-2:]) + 1
    last10 = sum(compacted(p) for p in prev[-9:]) + 1
    if last3 >= 2 or last10 >= 3:
        return _alert(
            "compaction_cascade",
            "warning",
            f"{last3} compactions in 3 turns, {last10} in 10: the window is too small for this workload",
            t["turn"],
        )
    return None


def recovery(t: Trace, prev: list[Trace]) -> Alert | None:
    if t.get("tier_reason", {}).get("recovery"):
        return _alert(
            "prompt_too_long_recovery",
            "critical",
            "recovering from prompt_too_long: tier escalated",
            t["turn"],
        )
    err = t.get("error") or ""
    if err.startswith("prompt_too_long"):
        return _alert("prompt_too_long", "critical", f"provider rejected the prompt: {err}", t["turn"])
    return None


def estimate_error(t: Trace, prev: list[Trace]) -> Alert | None:
    u = t.get("usage")
    if not u or not u.get("input_tokens"):
        return None
    est, act = t["final_tokens"], u["input_tokens"]
    err = abs(act - est) / act
    if err > ESTIMATE_ERROR_THRESHOLD:
        return _alert(
            "estimate_error",
            "warning",
            f"estimate {est} vs actual {act} input tokens ({err:.0%} off)",
            t["turn"],
        )
    return None


def spill_failure(t: Trace, prev: list[Trace]) -> Alert | None:
    fails = t.get("spill_failures") or []
    if fails:
        return _alert(
            "spill_failure",
            "critical",
            f"spill backend failed ({len(fails)}): content kept inline",
            t["turn"],
        )
    return None


def latch_flip(t: Trace, prev: list[Trace]) -> Alert | None:
    flips = t.get("latch_flips") or []
    if flips:
        return _alert("latch_flip", "info", f"session latch flipped: {', '.join(flips)}", t["turn"])
    return None


def high_pressure(t: Trace, prev: list[Trace]) -> Alert | None:
    p = t["pressure"]["predictive"]
    if p >= 0.95:
        return _alert(
            "high_pressure",
            "warning",
            f"predictive pressure {p:.2f}: the next response may not fit",
            t["turn"],
        )
    return None


def bind_degraded(t: Trace, prev: list[Trace]) -> Alert | None:
    bad = [s["id"] for s in t["sections"] if s["form"] == "degraded"]
    if bad:
        return _alert(
            "bind_degraded", "warning", f"binder failed, section degraded: {', '.join(bad)}", t["turn"]
        )
    return None


def circuit_breaker(t: Trace, prev: list[Trace]) -> Alert | None:
    for s in t.get("skipped", ()):
        if "circuit breaker" in s.get("reason", ""):
            return _alert("circuit_breaker", "warning", f"{s['step']}: {s['reason']}", t["turn"])
    return None


def low_cache_hit(t: Trace, prev: list[Trace]) -> Alert | None:
    u = t.get("usage")
    if not u or not prev or not u.get("input_tokens"):
        return None
    # Only what the previous request could have written can be read now: a prefix that first became
    # cacheable this turn (or right after a latch flip suppressed the marker) is a write, not a miss.
    readable = min(t.get("cacheable_prefix_tokens", 0), prev[-1].get("cacheable_prefix_tokens", 0))
    if prev[-1].get("latch_flips"):
        readable = 0
    expected = readable / max(1, t["final_tokens"])
    actual = u.get("cache_read_tokens", 0) / u["input_tokens"]
    if expected >= 0.5 and actual < expected / 2 and not t.get("cache_break"):
        return _alert(
            "cache_miss_unexplained",
            "info",
            f"provider served {actual:.0%} from cache, {expected:.0%} was cacheable (TTL expiry or routing?)",
            t["turn"],
        )
    return None


RULES: tuple[Callable[[Trace, list[Trace]], Alert | None], ...] = (
    cache_break,
    compaction_cascade,
    recovery,
    estimate_error,
    spill_failure,
    latch_flip,
    high_pressure,
    bind_degraded,
    circuit_breaker,
    low_cache_hit,
)


# The rules that read what only the call's outcome brings (its usage, an error). The others read the
# request's trace and the turns before it, which the outcome does not change: when usage or an error
# arrives, only these need to run again (see reevaluate).
OUTCOME_RULES = frozenset({recovery, estimate_error, low_cache_hit})
# Every rule looks at most this many earlier traces back (compaction_cascade's prev[-9:]).
LOOKBACK = 9

Outcomes = tuple[Alert | None, ...]  # one per rule of RULES, in its order


def evaluate_rules(t: Trace, prev: list[Trace]) -> Outcomes:
    """What each rule says about `t`, in RULES order (None where it says nothing)."""
    return tuple([rule(t, prev) for rule in RULES])


def alerts_of(outcomes: Outcomes) -> list[Alert]:
    return [a for a in outcomes if a is not None]


def evaluate(t: Trace, prev: list[Trace]) -> list[Alert]:
    return alerts_of(evaluate_rules(t, prev))


def reevaluate(t: Trace, prev: list[Trace], before: Outcomes) -> Outcomes:
    """evaluate_rules(t, prev) once the outcome (usage or an error) is on `t`, given what the rules said
    about the same trace and turns before it at the request (`before`): only OUTCOME_RULES run again."""
    out = list(before)
    for i, rule in enumerate(RULES):
        if rule in OUTCOME_RULES:
            out[i] = rule(t, prev)
    return tuple(out)
