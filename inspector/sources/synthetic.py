"""A deterministic, engine-free `Source` for tests, snapshots and development.

Every trace is a pure function of (turn, n_turns, seed, overrides), so `replan(t, Overrides())`
reproduces turn t exactly and what-if numbers move plausibly with the overrides: a larger budget
lowers pressure and the tier, a closed gate turns an action into a skipped step, and so on.
The session is shaped to show everything the panels can draw: pressure climbing through every
tier, cache breaks with causes, a prompt-too-long error followed by a recovery escalation.
"""

from __future__ import annotations

import functools
import hashlib
import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

from engine.trace_schema import Trace
from engine.whatif import Overrides
from inspector.sources import Chunk, Disconnected, NewTurn, SourceEvent, cancelled_event
from inspector.sources.synthetic_content import request_body, section_text

LIMIT = 32000
MARGIN = 640
BASE_THRESHOLDS = {"trim_schemas": 0.60, "compact_history": 0.80, "aggressive_prune": 0.90}
# llm_summary is off by default, as in a real config where summarising costs a model call,
# so the Skipped panel has something to show from the first compaction on.
BASE_GATES = {"reorder": True, "trim_schemas": True, "clear_tool_results": True,
              "spill": True, "llm_summary": False, "drop_rounds": True}
TIERS = ("Normal", "TrimSchemas", "CompactHistory", "AggressivePrune")
RESERVES = {"response": 1200, "thinking": 0, "schema": 310}

# id, name, kind, scope, priority, budget
_SECTIONS = (
    ("identity", "Identity", "identity", "global", "never", 2000),
    ("tools", "Tool schemas", "tools", "global", "last_resort", 4000),
    ("instructions", "Instructions", "instructions", "global", "never", 2000),
    ("memory", "Memory", "memory", "session", "normal", 1500),
    ("latch:model_config", "Latch model_config", "latch", "session", "never", 200),
    ("history", "History", "history", "session", "normal", 16000),
    ("tool_results", "Tool results", "tool_results", "none", "first", 6000),
    ("retrieved", "Retrieved docs", "retrieval", "none", "first", 5000),
    ("user", "User message", "message", "none", "never", 1000),
)


def _jitter(seed: int, turn: int, salt: str) -> float:
    """A stable pseudo-random number in [0, 1): no global RNG state, so any turn is computable alone."""
    digest = hashlib.sha256(f"{seed}:{turn}:{salt}".encode()).digest()
    return int.from_bytes(digest[:4], "big") / 2**32


def _sha(*parts: object) -> str:
    return hashlib.sha256(":".join(map(str, parts)).encode()).hexdigest()


def _raw_tokens(turn: int, n: int, seed: int) -> dict[str, int]:
    """Tokens per section before optimize; independent of overrides (content does not change)."""
    frac = turn / max(1, n - 1)
    # Pressure climbs from ~0.30 to ~0.99 of the recorded window, with a little noise.
    target = int((LIMIT - MARGIN) * (0.30 + 0.69 * frac + 0.03 * (_jitter(seed, turn, "p") - 0.5)))
    raw = {
        "identity": 850, "tools": 3100, "instructions": 1200,
        "memory": 400 + 40 * (turn // 5), "latch:model_config": 60,
        "tool_results": 500 + 300 * (turn % 4),
        "retrieved": 1500 if turn % 3 == 1 else 0,
        "user": 80 + 20 * (turn % 5),
    }
    raw["history"] = max(200, target - sum(raw.values()))
    return raw


def _tier_of(pressure: float, thresholds: dict[str, float]) -> str:
    tier = "Normal"
    for name, key in (("TrimSchemas", "trim_schemas"), ("CompactHistory", "compact_history"),
                      ("AggressivePrune", "aggressive_prune")):
        if pressure >= thresholds[key]:
            tier = name
    return tier


def _tier_info(turn: int, n: int, seed: int, ov: Overrides) -> dict:
    """Pressure and tier of a turn, without building the trace (tier-change alerts need the previous one)."""
    limit = ov.window or LIMIT
    usable = limit - MARGIN * limit // LIMIT
    thresholds = {**BASE_THRESHOLDS, **(ov.thresholds or {})}
    raw = _raw_tokens(turn, n, seed)
    estimated = sum(raw.values())
    p_raw = round(estimated / usable, 3)
    # Predictive pressure adds the reserves and the expected growth of the next turn.
    growth = int(0.69 * (LIMIT - MARGIN) / max(1, n - 1))
    p_pred = round((estimated + RESERVES["response"] + RESERVES["thinking"] + growth) / usable, 3)
    error_turn = int(0.75 * (n - 1)) if n >= 10 else -1
    tier_raw, tier_pred = _tier_of(p_raw, thresholds), _tier_of(p_pred, thresholds)
    tier = max(tier_raw, tier_pred, key=TIERS.index)
    recovery = turn == error_turn + 1 and tier != TIERS[-1]
    if recovery:  # the previous call failed with prompt_too_long: escalate one tier
        tier = TIERS[TIERS.index(tier) + 1]
    return {"limit": limit, "usable": usable, "thresholds": thresholds, "raw": raw, "estimated": estimated,
            "p_raw": p_raw, "p_pred": p_pred, "tier_raw": tier_raw, "tier_pred": tier_pred, "tier": tier,
            "recovery": recovery, "error_turn": error_turn}


@functools.lru_cache(maxsize=64)
def _first_turn_at(level: int, n: int, seed: int, budget: int | None, th: tuple) -> int:
    ov = Overrides(window=budget, thresholds=dict(th))
    return next((t for t in range(n) if TIERS.index(_tier_info(t, n, seed, ov)["tier"]) >= level), -1)


def make_trace(turn: int, n: int, seed: int = 7, overrides: Overrides | None = None,
               model: str = "claude-sonnet-4", provider: str = "anthropic") -> dict:
    ov = overrides or Overrides()
    info = _tier_info(turn, n, seed, ov)
    limit, usable, thresholds, raw = info["limit"], info["usable"], info["thresholds"], info["raw"]
    p_raw, p_pred, tier, recovery = info["p_raw"], info["p_pred"], info["tier"], info["recovery"]
    tier_raw, tier_pred, error_turn, estimated = info["tier_raw"], info["tier_pred"], info["error_turn"], info["estimated"]
    gates = {**BASE_GATES, **(ov.gates or {})}
    provider = ov.provider or provider
    level = TIERS.index(tier)
    text = (f"recovery after prompt_too_long on turn {error_turn}" if recovery
            else f"predictive pressure {p_pred:.2f} >= {thresholds[_key(tier)]:.2f}" if tier_pred == tier and level
            else f"raw pressure {p_raw:.2f} >= {thresholds[_key(tier)]:.2f}" if level
            else f"predictive pressure {p_pred:.2f} below {thresholds['trim_schemas']:.2f}")

    tokens = dict(raw)
    forms = {k: "full" for k in raw}
    omitted = {k: 0 for k in raw}
    actions: list[dict] = []
    skipped: list[dict] = []

    def step(name: str, min_level: int, section: str, keep: float, form: str, detail: str) -> None:
        if level < min_level or tokens[section] == 0:
            return
        saved = tokens[section] - int(tokens[section] * keep)
        if not gates[name]:
            skipped.append({"step": name, "reason": f"gate {name} is off", "tokens_saved": saved})
            return
        tokens[section] -= saved
        forms[section] = form
        omitted[section] += saved if form == "trimmed" else 0
        actions.append({"step": name, "detail": detail, "tokens_saved": saved})

    if gates["reorder"]:
        actions.append({"step": "reorder", "detail": "stable sections first", "tokens_saved": 0})
    else:
        skipped.append({"step": "reorder", "reason": "gate reorder is off", "tokens_saved": 0})
    step("trim_schemas", 1, "tools", 0.6, "trimmed", "dropped descriptions of 9 rarely used tools")
    step("clear_tool_results", 2, "tool_results", 0.05, "cleared", "cleared 3 oldest tool results")
    step("llm_summary", 2, "history", 0.35, "trimmed", "summarised rounds before the last 4")
    step("spill", 3, "retrieved", 0.04, "spilled", "spilled retrieved docs to the artifact store")
    step("drop_rounds", 3, "history", 0.7, "trimmed", "dropped the 6 oldest rounds")
    if level >= 3 and gates["drop_rounds"]:
        forms["memory"], tokens["memory"] = "dropped", 0
    final = sum(tokens.values())

    sections = []
    for sid, name, kind, scope, prio, budget in _SECTIONS:
        if raw[sid] == 0:
            continue
        version = (turn if scope == "none" or sid in ("history", "memory") else
                   int(turn >= int(0.45 * (n - 1))) if sid == "latch:model_config" else 0)
        sha = _sha(sid, version, forms[sid], tokens[sid])
        prev_version = (turn - 1 if scope == "none" or sid in ("history", "memory") else version)
        sections.append({
            "id": sid, "name": name, "kind": kind, "scope": scope, "priority": prio, "budget": budget,
            "planned": raw[sid], "tokens": tokens[sid], "form": forms[sid],
            "omitted": omitted[sid], "sha256": sha, "changed": turn > 0 and prev_version != version
            or forms[sid] != "full", "items": 1 + (turn if sid == "history" else 0),
        })

    markers, offset = _markers(sections, provider, gates["reorder"])
    break_turn = int(0.45 * (n - 1))
    th_key = tuple(sorted(thresholds.items()))
    first_trim = _first_turn_at(1, n, seed, ov.window, th_key)
    first_prune = _first_turn_at(3, n, seed, ov.window, th_key)
    cache_break = None
    if turn == break_turn and turn > 0:
        cache_break = {"section": "latch:model_config", "cause": "latch flipped: model_config"}
    elif turn == first_trim and turn > 0 and gates["trim_schemas"]:
        cache_break = {"section": "tools", "cause": "tool schemas trimmed (tier TrimSchemas)"}
    elif turn == first_prune and turn > 0 and gates["drop_rounds"]:
        cache_break = {"section": "memory", "cause": "memory dropped, oldest rounds pruned (AggressivePrune)"}
    prefix = offset
    if cache_break:
        read = sum(s["tokens"] for s in sections[: [s["id"] for s in sections].index(cache_break["section"])])
    else:
        read = prefix if turn else 0
    usage = {"input_tokens": final, "output_tokens": 180 + int(400 * _jitter(seed, turn, "o")),
             "cache_read_tokens": read, "cache_write_tokens": max(0, prefix - read)}
    alerts: list[dict[str, Any]] = []
    if cache_break:
        alerts.append({"rule": "cache_break", "severity": "warning",
                       "message": f"cache broke at {cache_break['section']}: {cache_break['cause']}"})
    if p_pred >= 0.95:
        alerts.append({"rule": "pressure_high", "severity": "critical",
                       "message": f"predictive pressure {p_pred:.2f} >= 0.95"})
    over = [s["id"] for s in sections if s["tokens"] > s["budget"]]
    if over:
        alerts.append({"rule": "over_budget", "severity": "warning",
                       "message": f"{', '.join(over)} over section budget"})
    if turn == error_turn:
        alerts.append({"rule": "request_error", "severity": "critical", "message": "prompt_too_long"})
    if turn > 0 and tier != _tier_info(turn - 1, n, seed, ov)["tier"]:
        alerts.append({"rule": "tier_change", "severity": "info", "message": f"tier is now {tier}"})
    for a in alerts:
        a["turn"] = turn
    return {
        "turn": turn, "model": model, "provider": provider, "limit": limit, "usable": usable,
        "pressure": {"raw": p_raw, "predictive": p_pred}, "reserves": dict(RESERVES),
        "thresholds": thresholds, "tier": tier,
        "tier_reason": {"raw": tier_raw, "predictive": tier_pred, "recovery": recovery, "text": text},
        "estimated_tokens": estimated, "final_tokens": final, "sections": sections,
        "actions": actions, "skipped": skipped, "markers": markers, "cacheable_prefix_tokens": prefix,
        "request_sha256": _sha("req", turn, final), "prefix_sha256": _sha("prefix", prefix, break_turn <= turn),
        "usage": usage, "cache_break": cache_break, "alerts": alerts,
        "latch_flips": ["model_config"] if turn == break_turn else [],
        "error": "prompt_too_long: 33012 > 32000" if turn == error_turn else None,
    }


def _key(tier: str) -> str:
    return {"TrimSchemas": "trim_schemas", "CompactHistory": "compact_history"}.get(tier, "aggressive_prune")


def _markers(sections: list[dict], provider: str, reorder: bool) -> tuple[list[dict], int]:
    """Cache markers after the last section of each stable scope; the prefix ends at the last one."""
    offset, markers, prefix = 0, [], 0
    for i, s in enumerate(sections):
        offset += s["tokens"]
        nxt = sections[i + 1]["scope"] if i + 1 < len(sections) else "none"
        is_boundary = s["scope"] != "none" and nxt != s["scope"]
        if s["id"] == "tools" and provider in ("anthropic", "bedrock"):
            is_boundary = True  # tools get their own breakpoint so instruction edits keep them cached
        if is_boundary and (reorder or s["scope"] == "global"):
            prefix = offset
            if provider != "openai":  # OpenAI caches prefixes automatically: no explicit markers
                markers.append({"index": i, "section": s["id"], "scope": s["scope"], "offset_tokens": offset})
    return markers[:4], prefix


class SyntheticSource:
    """`n_turns` synthetic turns; in live mode `follow()` delivers the ones after `initial`, then disconnects."""

    def __init__(self, n_turns: int = 40, *, live: bool = False, initial: int | None = None,
                 delay: float = 0.0, disconnect: bool = True, seed: int = 7,
                 hold: threading.Event | None = None) -> None:
        self.kind = "live" if live else "replay"
        self.n, self.seed, self.delay, self.disconnect = n_turns, seed, delay, disconnect
        self.initial = n_turns if initial is None else initial
        self.header: dict[str, Any] = {"model": "claude-sonnet-4", "provider": "anthropic", "engine_version": "0.1.0"}
        if live:
            self.header |= {"pid": 4242, "command": "python agent.py --task refactor"}
        else:
            self.header |= {"path": "demo_sessions/synthetic.cpsession"}
        self.received: list[dict] = []
        self._made: dict[int, dict] = {}
        # A test's gate: the turns after the initial ones wait until it is set, so a test decides when the
        # agent "goes on" instead of racing a timer (under load a run could outlast every delay).
        self.hold = hold
        self.replans = 0  # tests check how many re-plans actually ran
        self.simulations = 0

    def trace(self, turn: int) -> dict:
        made = self._made.get(turn)
        if made is None:  # a trace is a pure function of the turn: make each once, hand out the same object
            made = self._made[turn] = make_trace(turn, self.n, self.seed)
        return made

    def full_trace(self, turn: int) -> Trace:
        return cast(Trace, self.trace(turn))

    def load_initial(self) -> list[dict]:
        self.received = [self.trace(t) for t in range(self.initial)]
        return list(self.received)

    def load_chunks(self) -> Iterator[Chunk]:
        yield Chunk(self.load_initial())

    def follow(self) -> Iterator[SourceEvent]:
        if self.kind == "replay":
            return
        stop = cancelled_event() or threading.Event()  # the app's quit ends the wait between turns
        while self.hold is not None and not self.hold.wait(0.05):
            if stop.is_set():
                return
        for t in range(self.initial, self.n):
            if self.delay and stop.wait(self.delay):
                return
            trace = self.trace(t)
            self.received.append(trace)
            yield NewTurn(trace)
        if self.disconnect:
            yield Disconnected(f"agent pid {self.header['pid']} exited")

    def close(self) -> None:
        """Nothing opened: every turn is made in memory."""

    def section_content(self, turn: int, section_id: str) -> str:
        return section_text(self.trace(turn), section_id)

    def request_body(self, turn: int) -> str:
        return request_body(self.trace(turn))

    def replan(self, turn: int, overrides: Overrides) -> Trace:
        self.replans += 1
        return cast(Trace, make_trace(turn, self.n, self.seed, overrides))

    def shadow_summary(self) -> dict | None:
        return None

    def why_missed(self, turn: int) -> dict:
        brk = self.trace(turn).get("cache_break")
        engine = None
        if turn > 0:
            cause = brk["cause"] if brk else "appended"
            engine = {"breaks_cache": bool(brk), "cause": cause, "before": "", "after": "",
                      "summary": f"{cause}: section {brk['section']}" if brk else "appended: history grew"}
        return {"turn": turn, "previous": turn - 1 if turn > 0 else None, "engine": engine, "as_sent": None,
                "diagnostics": {}}

    def simulate(self, overrides: Overrides, cancelled: Callable[[], bool] | None = None) -> dict:
        self.simulations += 1
        return synthetic_simulation(self.n, self.seed, overrides, len(self.received) or self.n)

    def save(self, path: str | Path) -> int:
        turns = list(self.received)
        Path(path).write_text(json.dumps({"header": self.header, "turns": turns}))
        return len(turns)


# ---- session-wide what-if ------------------------------------------------------------------------
# Deterministic, engine-free figures shaped like `cp-inspect simulate --json --per-turn`: the prompt is
# the trace's final tokens, the cache serves what the trace's usage says, prices are Sonnet-like.
PRICE = {"input": 3.0, "cache_read": 0.30, "cache_write": 3.75, "output": 15.0}  # USD per million


def _policy(traces: list[dict], compactions_known: bool = True) -> dict:
    per_turn: list[dict[str, Any]] = []
    causes: dict[str, int] = {}
    for t in traces:
        u = t["usage"]
        prompt, read = t["final_tokens"], min(u["cache_read_tokens"], t["final_tokens"])
        write = min(u["cache_write_tokens"], prompt - read)
        uncached = prompt - read - write
        cost = (uncached * PRICE["input"] + read * PRICE["cache_read"] + write * PRICE["cache_write"]
                + u["output_tokens"] * PRICE["output"]) / 1e6
        comp = any(a["step"] in ("clear_tool_results", "llm_summary", "drop_rounds") for a in t["actions"])
        if t["cache_break"]:
            causes[t["cache_break"]["cause"]] = causes.get(t["cache_break"]["cause"], 0) + 1
        per_turn.append({"turn": t["turn"], "prompt_tokens": prompt, "cache_read_tokens": read,
                         "cache_write_tokens": write, "uncached_tokens": uncached,
                         "output_tokens": u["output_tokens"], "cost_usd": round(cost, 8),
                         "compaction": comp, "cache_break": (t["cache_break"] or {}).get("cause")})
    tot = {k: sum(p[k] for p in per_turn) for k in ("prompt_tokens", "cache_read_tokens", "cache_write_tokens",
                                                     "uncached_tokens", "output_tokens", "cost_usd")}
    return {**tot, "cost_usd": round(tot["cost_usd"], 8),
            "cache_hit_rate": round(tot["cache_read_tokens"] / max(1, tot["prompt_tokens"]), 6),
            "compactions": sum(p["compaction"] for p in per_turn) if compactions_known else None,
            "cache_breaks": sum(causes.values()), "cache_break_causes": dict(sorted(causes.items())),
            "model": "claude-sonnet-4", "calls": len(per_turn), "per_turn": per_turn}


def synthetic_simulation(n: int, seed: int, overrides: Overrides, turns: int | None = None) -> dict:
    upto = n if turns is None else turns
    pipeline = _policy([make_trace(t, n, seed, overrides) for t in range(upto)])
    closed = Overrides(window=overrides.window, thresholds=overrides.thresholds, provider=overrides.provider,
                       gates={g: False for g in BASE_GATES})
    gates_closed = _policy([make_trace(t, n, seed, closed) for t in range(upto)])
    as_sent = _policy([make_trace(t, n, seed) for t in range(upto)])
    actual = {**as_sent, "compactions": None}
    d_read = pipeline["cache_read_tokens"] - gates_closed["cache_read_tokens"]
    rest = ((pipeline["uncached_tokens"] - gates_closed["uncached_tokens"]) * PRICE["input"]
            + (pipeline["cache_write_tokens"] - gates_closed["cache_write_tokens"]) * PRICE["cache_write"])
    ratio = -rest / (d_read * PRICE["input"]) if d_read else None
    return {"source": "synthetic", "model": "claude-sonnet-4", "window": overrides.window or LIMIT,
            "turns": upto, "simulated_turns": upto,
            "policies": {"pipeline": pipeline, "gates_closed": gates_closed, "as_sent": as_sent, "actual": actual},
            "break_even_cached_price_ratio": round(ratio, 6) if ratio is not None and 0 <= ratio <= 1 else None,
            "notes": ["synthetic session: figures are made up, deterministically"]}
