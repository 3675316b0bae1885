"""Behaviour tests for the engine's public Pipeline API, one scenario per documented behaviour.

Token counts use the 4-characters-per-token tokenizer so sizes here are exact and easy to reason
about; the property and trajectory tests cover cl100k_base.
"""

from __future__ import annotations

import asyncio
import functools
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from engine import spill as spill_mod
from engine.alerts import RULES as ALERT_RULES
from engine.artifacts import ToolCall
from engine.errors import BindError
from engine.hashing import sha256_hex
from engine.optimize import OptimizeLimits
from engine.pipeline import Pipeline, Request
from engine.plan import Thresholds
from engine.recording.replay import Replayer
from engine.spill import FileSpill
from engine.stats import percentile
from engine.tokens import CharTokenizer, TokenCounter
from engine.types import CacheScope, Priority

from .test_engine_properties import check_pairing, check_request

TIERS = ["Normal", "TrimSchemas", "CompactHistory", "AggressivePrune"]
SPILL_RE = re.compile(
    r"\[spilled (\d+) tokens to spill://([0-9a-f]{16}) \(sha256 ([0-9a-f]{12})\); preview:\]"
)
OMITTED_RE = re.compile(r"\[\.\.\.(\d+) tokens omitted")


def counter() -> TokenCounter:
    return TokenCounter(CharTokenizer())


def make(window: int = 200_000, provider: str = "anthropic", **kw: Any) -> Pipeline:
    kw.setdefault("counter", counter())
    return Pipeline("test-model", provider, window, serve=False, clock=lambda: 1_700_000_000.0, **kw)


def tokens(n: int, tag: str = "x") -> str:
    """Text of exactly n tokens under CharTokenizer (4 characters each)."""
    unit = (tag + "abc ")[:4]
    return unit * n


def step(pipe: Pipeline, k: int, result_tokens: int = 200, text: str = "looking") -> None:
    """One agent step: the assistant calls bash once and gets its result."""
    pipe.assistant(text, [ToolCall(f"call_{k}", "bash", json.dumps({"cmd": f"step {k}"}))])
    pipe.tool_result(f"call_{k}", tokens(result_tokens, f"r{k % 10}"))


def usage(pipe: Pipeline, req: Request, output: int = 0, **kw: int) -> None:
    pipe.record_usage({"input_tokens": req.trace["final_tokens"], "output_tokens": output, **kw})


def divide_by_zero() -> str:
    return str(1 / 0)


def verify(pipe: Pipeline) -> None:
    rep = Replayer(pipe.journal.events, counter=pipe.counter).verify()
    assert rep.ok, [str(m) for m in rep.mismatches]


def alert_rules(traces: list[dict[str, Any]]) -> set[str]:
    return {a["rule"] for t in traces for a in t["alerts"]}


# ----------------------------------------------------------------------------- tiers
def test_tiers_escalate_with_pressure_in_order() -> None:
    pipe = make(20_000, default_response_reserve=0, policy="wave1")  # the tiered planner
    pipe.identity("You are a test agent.")
    pipe.add_tool("bash", "Run a command", {"type": "object", "properties": {"cmd": {"type": "string"}}})
    pipe.add_tool("edit", "Edit a file", {"type": "object", "properties": {"path": {"type": "string"}}})
    pipe.user("Fix the bug.")
    seen: list[str] = []
    th = Thresholds()
    for k in range(40):
        req = pipe.next_request()
        tr = req.trace
        raw = tr["pressure"]["raw"]
        assert tr["pressure"]["predictive"] == raw  # no reserve: prediction adds nothing
        expected = th.tier_for(tr["estimated_tokens"] / tr["limit"]).label
        assert tr["tier"] == expected, (k, raw, tr["tier"])
        seen.append(tr["tier"])
        check_request(req, "anthropic", None)
        usage(pipe, req, output=0)
        step(pipe, k, 500)
    ranks = [TIERS.index(t) for t in seen]
    assert ranks == sorted(ranks), "the tier went down while the history only grew"
    assert [t for i, t in enumerate(seen) if i == 0 or seen[i - 1] != t] == TIERS
    verify(pipe)


def test_tier_actions_follow_the_tier() -> None:
    """TrimSchemas drops unused schemas; CompactHistory clears old results; AggressivePrune drops rounds."""
    pipe = make(20_000, default_response_reserve=0, policy="wave1")  # the tiered planner
    pipe.identity("You are a test agent.")
    pipe.add_tool("bash", "Run a command", {"type": "object", "properties": {"cmd": {"type": "string"}}})
    pipe.add_tool("unused", tokens(300), {"type": "object"})
    pipe.user("Fix the bug.")
    by_tier: dict[str, set[str]] = {}
    for k in range(40):
        req = pipe.next_request()
        by_tier.setdefault(req.trace["tier"], set()).update(a["step"] for a in req.trace["actions"])
        usage(pipe, req)
        step(pipe, k, 500)
    assert "trim_schemas" in by_tier["TrimSchemas"]
    assert "clear_tool_results" in by_tier["CompactHistory"]
    assert "drop_rounds" in by_tier["AggressivePrune"]
    assert not by_tier["Normal"] - {"place_markers", "reorder"}


def test_prediction_only_escalates() -> None:
    # 5,000 tokens in a 10,000 window: raw 0.5 (Normal); with a 4,000 reserve 5,000/6,000 = 0.83.
    pipe = make(10_000, default_response_reserve=4_000, max_output_tokens=8_000)
    pipe.identity(tokens(4_990))
    pipe.user("go")
    tr = pipe.explain()
    assert tr["tier_reason"]["raw"] == "Normal"
    assert tr["tier_reason"]["predictive"] == "CompactHistory"
    assert tr["tier"] == "CompactHistory"
    assert tr["pressure"]["predictive"] > tr["pressure"]["raw"]
    # A small reserve predicts nothing worse: the tier stays at the raw tier, never below it.
    calm = make(10_000, default_response_reserve=10)
    calm.identity(tokens(4_990))
    calm.user("go")
    assert calm.explain()["tier"] == "Normal"


def test_prompt_too_long_escalates_and_uses_p95() -> None:
    pipe = make(40_000)
    pipe.identity("You are a test agent.")
    pipe.user("task")
    outputs = [100 * (k + 1) for k in range(20)]
    for k, out in enumerate(outputs):
        req = pipe.next_request()
        usage(pipe, req, output=out)
        step(pipe, k, 20)
    req = pipe.next_request()
    assert req.trace["reserves"] == {
        "response": percentile(outputs, 75),
        "thinking": 0,
        "schema": 0,
        "percentile": 75,
    }
    normal_tier = req.trace["tier"]
    stats_before = (dict(pipe.stats.completions), dict(pipe.stats.calibration))
    pipe.record_error("prompt_too_long", "prompt is too long: 41000 tokens > 40000 maximum")
    assert (pipe.stats.completions, pipe.stats.calibration) == stats_before
    assert pipe.traces[-1]["error"].startswith("prompt_too_long")
    assert "prompt_too_long" in alert_rules([pipe.traces[-1]])
    tiers = []
    for k in range(4):
        req = pipe.next_request()
        tiers.append(req.trace)
        usage(pipe, req, output=100)
        step(pipe, 100 + k, 20)
    first = tiers[0]
    assert first["tier_reason"]["recovery"] is True
    assert TIERS.index(first["tier"]) == TIERS.index(normal_tier) + 1
    assert first["reserves"]["percentile"] == 95
    assert first["reserves"]["response"] == percentile(outputs, 95)
    assert "prompt_too_long_recovery" in alert_rules([first])
    # Three successful turns later the planner relaxes again.
    assert [t["reserves"]["percentile"] for t in tiers] == [95, 95, 95, 75]
    assert tiers[3]["tier_reason"]["recovery"] is False
    verify(pipe)


# ----------------------------------------------------------------------------- spill
def test_large_tool_result_spills_to_a_file_atomically(tmp_path: Path) -> None:
    pipe = make(spill_dir=tmp_path / "spill")
    pipe.identity("You are a test agent.")
    pipe.user("read the log")
    big = tokens(12_000, "log")
    pipe.assistant("", [ToolCall("c1", "cat", "{}")])
    pipe.tool_result("c1", big)
    req = pipe.next_request()
    body_text = req.bytes.decode()
    assert big not in body_text
    m = SPILL_RE.search(body_text)
    assert m is not None, "no SpillReference in the request"
    key = sha256_hex(big)
    assert int(m.group(1)) == 12_004 and m.group(2) == key[:16] and m.group(3) == key[:12]
    files = sorted(p.name for p in (tmp_path / "spill").iterdir())
    assert files == [f"{key}.txt"], "a temp file was left behind or the name is not the content hash"
    assert (tmp_path / "spill" / f"{key}.txt").read_text(encoding="utf-8") == big
    assert [a["step"] for a in req.trace["actions"]].count("spill") == 1
    hist = next(s for s in req.trace["sections"] if s["id"] == "history")
    assert hist["form"] == "spilled"
    assert req.trace["final_tokens"] < 1_000
    check_pairing(req.body, "anthropic")
    verify(pipe)  # the replay (in memory) rebuilds the same reference bytes


def test_failed_atomic_write_leaves_no_file_and_keeps_content(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken_replace(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(spill_mod.os, "replace", broken_replace)
    backend = FileSpill(tmp_path)
    with pytest.raises(OSError, match="disk full"):
        backend.put("k" * 64, "data")
    assert list(tmp_path.iterdir()) == []  # neither the final file nor the temp file

    pipe = make(spill=backend)
    pipe.identity("You are a test agent.")
    pipe.user("read the log")
    big = tokens(11_000, "log")
    pipe.assistant("", [ToolCall("c1", "cat", "{}")])
    pipe.tool_result("c1", big)
    req = pipe.next_request()
    assert big in req.body["messages"][-1]["content"][0]["content"]
    assert list(tmp_path.iterdir()) == []
    assert req.trace["spill_failures"] and "disk full" in req.trace["spill_failures"][0]
    assert "spill_failure" in alert_rules([req.trace])


class RaisingSpill:
    def __init__(self) -> None:
        self.calls = 0

    def put(self, key: str, data: str) -> str:
        self.calls += 1
        raise ConnectionError("object store unreachable")

    def get(self, key: str) -> str:
        raise KeyError(key)


def test_raising_spill_backend_keeps_content_and_alerts() -> None:
    backend = RaisingSpill()
    pipe = make(spill=backend)
    pipe.identity("You are a test agent.")
    pipe.add_source("manual", "context", text=tokens(10_500, "man"), priority=Priority.FIRST)
    pipe.user("go")
    req = pipe.next_request()
    assert backend.calls == 1
    manual = next(s for s in req.trace["sections"] if s["id"] == "manual")
    assert manual["form"] == "full"
    assert tokens(10_500, "man") in [b["text"] for b in req.body["system"]]
    assert req.trace["spill_failures"][0].split(":", 1)[1].strip().startswith("ConnectionError")
    skipped = {s["step"]: s["reason"] for s in req.trace["skipped"]}
    assert "spill backend failed" in skipped["spill"]
    alerts = {a["rule"]: a for a in req.trace["alerts"]}
    assert alerts["spill_failure"]["severity"] == "critical"
    verify(pipe)  # the replay reproduces the failure from the journal, not from a live backend


# ----------------------------------------------------------------------------- latches and markers
def latch_session() -> tuple[Pipeline, list[Request]]:
    pipe = make()
    pipe.identity(tokens(1_500, "id"))
    pipe.constraints("Never push to main.")
    pipe.latch("cwd", "/repo")
    pipe.user("task")
    reqs = [pipe.next_request()]
    usage(pipe, reqs[-1])
    step(pipe, 0)
    reqs.append(pipe.next_request())
    usage(pipe, reqs[-1])
    step(pipe, 1)
    assert pipe.latch("cwd", "/repo") is False  # same value: no flip
    assert pipe.latch("cwd", "/repo/sub") is True
    reqs.append(pipe.next_request())
    usage(pipe, reqs[-1])
    return pipe, reqs


def test_latch_flip_breaks_cache_at_latches_and_suppresses_the_tail_marker() -> None:
    pipe, reqs = latch_session()
    steady, flipped = reqs[1].trace, reqs[2].trace
    assert steady["cache_break"] is None
    assert any(m["section"] == "history" for m in steady["markers"])
    assert flipped["latch_flips"] == ["cwd"]
    assert flipped["cache_break"] == {"section": "latches", "cause": "latch flipped: cwd"}
    assert not any(m["section"] == "history" for m in flipped["markers"])
    markers_step = next(s for s in flipped["steps"] if s["step"] == "place_markers")
    assert "suppressed" in markers_step["detail"]
    assert {"latch_flip", "cache_break"} <= alert_rules([flipped])
    assert "cwd: /repo/sub" in [b["text"] for b in reqs[2].body["system"]]
    verify(pipe)


@pytest.mark.parametrize("provider", ["anthropic", "bedrock", "openai", "prefix"])
def test_marker_count_respects_the_provider_policy(provider: str) -> None:
    pipe = make(provider=provider, limits=OptimizeLimits(reorder=False))
    pipe.identity(tokens(1_200, "id"))
    pipe.constraints(tokens(50, "co"))
    pipe.add_tool("bash", tokens(1_100, "to"), {"type": "object"})
    for k, scope in enumerate([CacheScope.NONE, CacheScope.GLOBAL, CacheScope.SESSION, CacheScope.NONE] * 2):
        pipe.add_source(f"s{k}", "context", text=tokens(1_100, f"s{k}"), scope=scope)
    pipe.latch("mode", "fast")
    pipe.user("task")
    for k in range(3):
        req = pipe.next_request()
        usage(pipe, req)
        step(pipe, k)
    raw = req.bytes
    if provider == "anthropic":
        assert 1 <= raw.count(b'"cache_control"') <= 4
        assert len(req.trace["markers"]) == raw.count(b'"cache_control"')
    elif provider == "bedrock":
        assert 1 <= raw.count(b'"cachePoint"') <= 4
    else:
        assert b"cache_control" not in raw and b"cachePoint" not in raw
        assert req.trace["markers"] == []
    check_request(req, provider, None)
    verify(pipe)


def test_in_section_trim_leaves_a_visible_marker() -> None:
    pipe = make(8_000, default_response_reserve=0)
    pipe.identity("You are a test agent.")
    pipe.goal("GOAL: make the tests pass")
    doc = " ".join(f"w{i:05d}" for i in range(5_000))  # 8,750 tokens, under the spill threshold
    pipe.add_source("docs", "context", text=doc, priority=Priority.FIRST)
    pipe.user("go")
    req = pipe.next_request()
    docs = next(s for s in req.trace["sections"] if s["id"] == "docs")
    assert docs["form"] == "trimmed" and docs["omitted"] > 0
    text = next(b["text"] for b in req.body["system"] if b["text"].startswith("w00000"))
    m = OMITTED_RE.search(text)
    assert m is not None and int(m.group(1)) == docs["omitted"]
    assert text.endswith(doc[-40:])  # head and tail survive around the marker
    assert "GOAL: make the tests pass" in [b["text"] for b in req.body["system"]]
    assert req.trace["final_tokens"] <= req.trace["ceiling"]
    assert "trim_sections" in [a["step"] for a in req.trace["actions"]]


# ----------------------------------------------------------------------------- explain
def test_explain_only_has_no_side_effects(tmp_path: Path) -> None:
    summaries: list[int] = []

    def summarize(texts: list[str]) -> str:
        summaries.append(len(texts))
        return "SUMMARY"

    bound: list[int] = []

    def binder() -> str:
        # Counts its calls (EXPLAIN does bind) but answers the same within a turn, so two EXPLAINs of
        # one turn must produce the same request.
        bound.append(1)
        return "bound value"

    pipe = make(6_000, spill_dir=tmp_path / "spill", summarizer=summarize, policy="wave1")
    pipe.identity("You are a test agent.")
    pipe.add_source("clock", "context", binder=binder, scope=CacheScope.NONE)
    pipe.user("task")
    for k in range(16):
        step(pipe, k, 60)
    pipe.assistant("", [ToolCall("big", "cat", "{}")])
    pipe.tool_result("big", tokens(11_000, "big"))
    state = (
        len(pipe.journal.events),
        len(pipe.journal.blobs),
        pipe.turn,
        len(pipe.traces),
        pipe.stats.snapshot(),
    )
    tr = pipe.explain()
    tr2 = pipe.explain()
    assert (len(pipe.journal.events), len(pipe.journal.blobs), pipe.turn, len(pipe.traces)) == state[:4]
    assert pipe.stats.snapshot() == state[4]
    assert not (tmp_path / "spill").exists(), "EXPLAIN wrote to the spill backend"
    assert summaries == [], "EXPLAIN called the application's summarizer"
    assert tr["request_sha256"] == tr2["request_sha256"]
    assert len(bound) == 2
    assert {"spill", "llm_summary"} <= {a["step"] for a in tr["actions"]}
    # The real request then does what EXPLAIN said, and journals it.
    req = pipe.next_request()
    assert [a["step"] for a in req.trace["actions"]] == [a["step"] for a in tr["actions"]]
    assert len(pipe.journal.events) > state[0]
    assert len(summaries) == 1, "the real request summarizes, once"
    assert (tmp_path / "spill").exists()
    verify(pipe)


def test_explain_matches_the_next_request_byte_for_byte() -> None:
    pipe = make(30_000)
    pipe.identity("You are a test agent.")
    pipe.user("task")
    for k in range(6):
        step(pipe, k, 2_000)
        tr = pipe.explain()
        req = pipe.next_request()
        assert tr["request_sha256"] == req.trace["request_sha256"]
        assert tr["cache_break"] == req.trace["cache_break"]
        usage(pipe, req)


# ----------------------------------------------------------------------------- bind
async def test_async_binders_run_concurrently_and_timeouts_degrade() -> None:
    # Concurrency is counted, not timed: the binders in flight at once (a wall-clock bound of 0.8 s
    # against 3 x 0.3 s one after another is one a loaded CI machine can miss).
    in_flight, peak = [0], [0]

    async def slow(tag: str, delay: float) -> str:
        in_flight[0] += 1
        peak[0] = max(peak[0], in_flight[0])
        try:
            await asyncio.sleep(delay)
        finally:
            in_flight[0] -= 1
        return f"{tag} ready"

    def sized(budget: int) -> str:
        return f"budget was {budget}"

    pipe = make()
    pipe.identity("You are a test agent.")
    for k in range(3):
        # A partial of a coroutine function is awaited directly; a lambda returning a coroutine is too.
        pipe.add_source(f"io{k}", "context", binder=functools.partial(slow, f"io{k}", 0.3), timeout_s=2.0)
    pipe.add_source("hung", "context", binder=lambda: slow("hung", 5.0), timeout_s=0.2)
    pipe.add_source("sized", "context", binder=sized, estimate=123)
    pipe.user("task")
    req = await pipe.anext_request()
    assert peak[0] >= 3, f"binders ran one after another (at most {peak[0]} in flight at once)"
    secs = {s["id"]: s for s in req.trace["sections"]}
    texts = [b["text"] for b in req.body["system"]]
    for k in range(3):
        assert secs[f"io{k}"]["form"] == "full" and f"io{k} ready" in texts
    assert secs["hung"]["form"] == "degraded" and "timed out after 0.2s" in secs["hung"]["note"]
    assert "[Hung unavailable: timed out after 0.2s]" in texts
    assert "budget was 123" in texts
    assert "bind_degraded" in alert_rules([req.trace])
    with pytest.raises(RuntimeError, match="anext_request"):
        pipe.next_request()  # a sync call inside a running loop says what to do instead
    verify(pipe)


def test_degraded_binder_keeps_its_last_good_value() -> None:
    state = {"fail": False}

    def flaky() -> str:
        if state["fail"]:
            raise OSError("service down")
        return "fresh status"

    pipe = make()
    pipe.identity("You are a test agent.")
    pipe.add_source("status", "context", text="initial status", binder=flaky)
    pipe.user("task")
    first = pipe.next_request()
    assert "fresh status" in [b["text"] for b in first.body["system"]]
    usage(pipe, first)
    state["fail"] = True
    step(pipe, 0)
    second = pipe.next_request()
    sec = next(s for s in second.trace["sections"] if s["id"] == "status")
    assert sec["form"] == "degraded" and "service down" in sec["note"]
    assert "fresh status" in [b["text"] for b in second.body["system"]]
    verify(pipe)


def test_never_binder_failure_raises_bind_error() -> None:
    pipe = make()
    pipe.identity("You are a test agent.")
    pipe.add_source("policy", "context", binder=divide_by_zero, priority=Priority.NEVER)
    pipe.user("task")
    with pytest.raises(BindError, match="'policy' is Never-priority.*ZeroDivisionError"):
        pipe.next_request()
    assert pipe.turn == 0


# ----------------------------------------------------------------------------- feedback and send
def test_cache_break_names_the_changed_section() -> None:
    pipe = make()
    pipe.identity(tokens(1_200, "id"))
    pipe.add_source("readme", "context", text=tokens(200, "rd"))
    pipe.add_tool("bash", "Run", {"type": "object"})
    pipe.add_tool("edit", "Edit", {"type": "object"})
    pipe.user("task")
    req = pipe.next_request()
    usage(pipe, req)
    step(pipe, 0)
    pipe.set_content("readme", tokens(200, "new"))
    req = pipe.next_request()
    assert req.trace["cache_break"] == {"section": "readme", "cause": "section readme content changed"}
    usage(pipe, req)
    step(pipe, 1)
    pipe.remove_tool("edit")
    req = pipe.next_request()
    assert req.trace["cache_break"] is not None and req.trace["cache_break"]["section"] == "tools"
    verify(pipe)


def test_send_feeds_usage_or_error_back() -> None:
    pipe = make()
    pipe.identity("You are a test agent.")
    pipe.user("task")
    sent: list[dict[str, Any]] = []

    def ok(body: dict[str, Any]) -> dict[str, Any]:
        sent.append(body)
        return {"usage": {"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 2}}

    pipe.send(ok)
    assert sent and sent[0]["model"] == "test-model"
    assert pipe.traces[-1]["usage"] == {
        "input_tokens": 12,
        "output_tokens": 5,
        "cache_read_tokens": 2,
        "cache_write_tokens": 0,
    }

    def too_long(body: dict[str, Any]) -> Any:
        raise RuntimeError("prompt is too long: 300000 tokens > 200000 maximum")

    pipe.user("more")
    with pytest.raises(RuntimeError):
        pipe.send(too_long)
    assert pipe.stats.recovery_turns_left == 3
    assert pipe.journal.events[-2]["k"] == "error" and pipe.journal.events[-2]["kind"] == "prompt_too_long"


# ----------------------------------------------------------------------------- alerts
def _cache_break() -> list[dict[str, Any]]:
    pipe = make()
    pipe.identity(tokens(1_200, "id"))
    pipe.add_source("readme", "context", text="v1")
    pipe.user("task")
    usage(pipe, pipe.next_request())
    pipe.set_content("readme", "v2")
    pipe.user("again")
    usage(pipe, pipe.next_request())
    return pipe.traces


def _pressure_session(window: int, **kw: Any) -> Pipeline:
    pipe = make(window, default_response_reserve=0, **kw)
    pipe.identity("You are a test agent.")
    pipe.user("task")
    for k in range(30):
        req = pipe.next_request()
        usage(pipe, req)
        step(pipe, k, 400)
    return pipe


def _compaction_cascade() -> list[dict[str, Any]]:
    return _pressure_session(8_000, policy="wave1").traces  # wave 1 re-plans (and cascades) every turn


def _prompt_too_long() -> list[dict[str, Any]]:
    pipe = make()
    pipe.identity("x")
    pipe.user("task")
    pipe.next_request()
    pipe.record_error("prompt_too_long", "too long")
    pipe.user("again")
    usage(pipe, pipe.next_request())
    return pipe.traces


def _estimate_error() -> list[dict[str, Any]]:
    pipe = make()
    pipe.identity("x")
    pipe.user("task")
    req = pipe.next_request()
    pipe.record_usage({"input_tokens": req.trace["final_tokens"] * 2, "output_tokens": 1})
    return pipe.traces


def _spill_failure() -> list[dict[str, Any]]:
    pipe = make(spill=RaisingSpill())
    pipe.identity("x")
    pipe.user(tokens(100))
    pipe.assistant("", [ToolCall("c", "cat", "{}")])
    pipe.tool_result("c", tokens(10_100))
    pipe.next_request()
    return pipe.traces


def _latch_flip() -> list[dict[str, Any]]:
    return latch_session()[0].traces


def _high_pressure() -> list[dict[str, Any]]:
    pipe = make(10_000, default_response_reserve=2_000)
    pipe.identity("x")
    pipe.user(tokens(7_700))
    pipe.next_request()
    return pipe.traces


def _bind_degraded() -> list[dict[str, Any]]:
    pipe = make()
    pipe.identity("x")
    pipe.add_source("s", binder=divide_by_zero)
    pipe.user("task")
    pipe.next_request()
    return pipe.traces


def _circuit_breaker() -> list[dict[str, Any]]:
    return _pressure_session(8_000, limits=OptimizeLimits(max_clear_tokens=10), policy="wave1").traces


def _cache_miss_unexplained() -> list[dict[str, Any]]:
    pipe = make()
    pipe.identity(tokens(3_000, "id"))
    pipe.user("task")
    usage(pipe, pipe.next_request(), cache_read_tokens=0)
    step(pipe, 0, 20)
    req = pipe.next_request()
    assert req.trace["cache_break"] is None
    usage(pipe, req, cache_read_tokens=0)
    return pipe.traces


ALERT_SCENARIOS: dict[str, Callable[[], list[dict[str, Any]]]] = {
    "cache_break": _cache_break,
    "compaction_cascade": _compaction_cascade,
    "prompt_too_long": _prompt_too_long,
    "prompt_too_long_recovery": _prompt_too_long,
    "estimate_error": _estimate_error,
    "spill_failure": _spill_failure,
    "latch_flip": _latch_flip,
    "high_pressure": _high_pressure,
    "bind_degraded": _bind_degraded,
    "circuit_breaker": _circuit_breaker,
    "cache_miss_unexplained": _cache_miss_unexplained,
}


@pytest.mark.parametrize("rule", sorted(ALERT_SCENARIOS))
def test_alert_rule_fires(rule: str) -> None:
    traces = ALERT_SCENARIOS[rule]()
    fired = [a for t in traces for a in t["alerts"] if a["rule"] == rule]
    assert fired, f"{rule} did not fire; fired: {sorted(alert_rules(traces))}"
    for a in fired:
        assert a["severity"] in ("info", "warning", "critical") and a["message"]


def test_alert_scenarios_cover_every_rule() -> None:
    assert len(ALERT_SCENARIOS) >= 8
    assert len(ALERT_RULES) >= 8
    assert len(set(ALERT_SCENARIOS)) == len(ALERT_SCENARIOS)


def test_quiet_session_raises_no_alerts() -> None:
    pipe = make()
    pipe.identity(tokens(1_200, "id"))
    pipe.user("task")
    for k in range(5):
        req = pipe.next_request()
        usage(pipe, req, cache_read_tokens=req.trace["cacheable_prefix_tokens"])
        step(pipe, k, 50)
    assert alert_rules(pipe.traces) == set()


# ----------------------------------------------------------------------------- emergent, counters
def test_emergent_items_reach_the_next_request_only() -> None:
    pipe = make()
    pipe.identity("You are a test agent.")
    pipe.user("task")
    usage(pipe, pipe.next_request())
    step(pipe, 0)
    assert pipe.emerge("todo", "re-run the flaky test") is True
    assert pipe.emerge("todo", "re-run the flaky test") is False  # same content: deduplicated
    for k in range(10):
        pipe.emerge("files", f"file {k}")
    nxt = pipe.next_request()
    lines = "\n".join(b["text"] for b in nxt.body["system"]).split("\n")
    assert "- [todo] re-run the flaky test" in lines
    assert sum(line.startswith("- [files]") for line in lines) == 8  # capped per list
    usage(pipe, nxt)
    step(pipe, 1)
    later = pipe.next_request()
    assert b"re-run the flaky test" not in later.bytes
    assert pipe.emerge("todo", "re-run the flaky test") is False  # a replay cannot inject it twice
    verify(pipe)


def test_an_empty_token_counter_is_used_not_replaced() -> None:
    c = TokenCounter(CharTokenizer())
    assert len(c) == 0
    pipe = make(counter=c)
    assert pipe.counter is c
    assert Replayer(pipe.journal.events, counter=c).counter is c


def test_request_body_is_parsed_from_the_canonical_bytes() -> None:
    pipe = make()
    pipe.identity("You are a test agent.")
    pipe.user("ünïcode task ✓")
    req = pipe.next_request()
    assert req.body == json.loads(req.bytes)
    assert req.body is req.body  # parsed once
    assert "ünïcode task ✓".encode() in req.bytes


def test_binders_get_the_plans_budget() -> None:
    """Plan runs before Bind: a binder with a budget parameter gets its section's planned budget, which
    shrinks when the window is under pressure (its first call, with no known size, gets the estimate)."""
    seen: list[int] = []

    def notes(budget: int) -> str:
        seen.append(budget)
        return tokens(min(budget, 1_500), "n")

    pipe = make(window=6_000)
    pipe.identity("You are a test agent.")
    pipe.add_source("notes", "context", binder=notes, estimate=1_500, priority=Priority.FIRST)
    pipe.user("task")
    for k in range(12):
        req = pipe.next_request()
        usage(pipe, req)
        step(pipe, k, result_tokens=600)
    assert seen[0] == 1_500
    assert seen[-1] < seen[1]  # the history grew, so the FIRST-priority notes were given less
    verify(pipe)
