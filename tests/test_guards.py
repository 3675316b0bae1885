"""Guards for behaviours a mutation check found unguarded (issue 10, "Tests that could not fail").

Each test here was checked by making the mutation named in its docstring and seeing it fail:
expectations are literals, never computed with the code under test.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from engine.errors import BudgetExceededError
from engine.pipeline import ENGINE_VERSION, Pipeline
from engine.plan import Thresholds
from engine.recording.cpsession import RecordingReader, RecordingWriter
from engine.recording.journal import unpack_event
from engine.recording.replay import Replayer
from engine.tokens import CharTokenizer, TokenCounter
from engine.types import Priority, SectionKind

# (pressure, tier) at and around each default boundary: trim_schemas 0.60 (strict >), compact_history
# 0.80 and aggressive_prune 0.90 (>=). Mutations caught: 0.60 -> 0.65, 0.90 -> 0.95, > <-> >= anywhere.
LITERAL_TIERS = [
    (0.0, "Normal"),
    (0.59, "Normal"),
    (0.60, "Normal"),
    (0.6001, "TrimSchemas"),
    (0.62, "TrimSchemas"),
    (0.649, "TrimSchemas"),
    (0.7999, "TrimSchemas"),
    (0.80, "CompactHistory"),
    (0.8001, "CompactHistory"),
    (0.8999, "CompactHistory"),
    (0.90, "AggressivePrune"),
    (0.92, "AggressivePrune"),
    (0.9499, "AggressivePrune"),
    (1.5, "AggressivePrune"),
]


def test_default_thresholds_are_the_documented_literals() -> None:
    assert Thresholds().to_dict() == {"trim_schemas": 0.60, "compact_history": 0.80, "aggressive_prune": 0.90}


@pytest.mark.parametrize(("pressure", "tier"), LITERAL_TIERS)
def test_tier_at_and_around_each_boundary(pressure: float, tier: str) -> None:
    assert Thresholds().tier_for(pressure).label == tier


def _pipe(window: int) -> Pipeline:
    return Pipeline("m", "anthropic", window, counter=TokenCounter(CharTokenizer()), serve=False)


@pytest.mark.parametrize("window", [4_000, 10_000, 20_000])
def test_tier_of_a_real_turn_matches_the_literal_table(window: int) -> None:
    """The pipeline's own trace: tier read from a literal table by the pressure it reports.
    Early compaction off: it would keep the request below the bands this test walks through."""
    pipe = Pipeline(
        "m", "anthropic", window, counter=TokenCounter(CharTokenizer()), serve=False, policy="cost_aware:early=off"
    )
    pipe.identity("You are a test agent.")
    pipe.user("go")
    seen = set()
    for k in range(60):
        tr = pipe.next_request().trace
        p = tr["estimated_tokens"] / tr["limit"]
        want = "Normal" if p <= 0.60 else "TrimSchemas" if p < 0.80 else "CompactHistory" if p < 0.90 else None
        if want is not None:
            assert tr["tier"] == want, (k, p, tr["tier"])
        seen.add(tr["tier"])
        pipe.record_usage({"input_tokens": tr["final_tokens"], "output_tokens": 1})
        pipe.assistant("step " * 20, [])
        pipe.user("more " * (window // 80))
    assert {"Normal", "TrimSchemas"} <= seen


@pytest.mark.parametrize("kind", [SectionKind.IDENTITY, SectionKind.CONSTRAINTS, SectionKind.GOAL])
def test_protected_kinds_are_never_trimmed_even_at_normal_priority(kind: SectionKind) -> None:
    """A section of a never-evicted kind over the ceiling is an error, not silently cut
    (mutation caught: `protected()` ignoring the section kind)."""
    pipe = _pipe(2_000)
    pipe.add_source("big", kind, text="word " * 1900, priority=Priority.NORMAL)
    pipe.user("hi")
    with pytest.raises(BudgetExceededError, match="never evicted: big"):
        pipe.next_request()


def _recorded_session(path: Path) -> None:
    pipe = Pipeline(
        "m", "anthropic", 8_000, counter=TokenCounter(CharTokenizer()), serve=False, record=str(path)
    )
    pipe.identity("You are a test agent.")
    pipe.user("fix it")
    for k in range(4):
        req = pipe.next_request()
        pipe.record_usage({"input_tokens": req.trace["final_tokens"], "output_tokens": 3})
        pipe.assistant(f"step {k}", [])
        pipe.user(f"next {k}")
    pipe.close()


def test_verify_fails_on_a_tampered_request_hash(tmp_path: Path) -> None:
    """Mutation caught: verify() never comparing the rebuilt hash with the recorded one."""
    good = tmp_path / "good.cpsession"
    _recorded_session(good)
    with RecordingReader.open(good) as r:
        events = [unpack_event(e) for e in r.events()]
        header = dict(r.header)
    assert Replayer(events).verify().ok
    reqs = [e for e in events if e.get("k") == "request"]
    assert len(reqs) == 4
    reqs[2]["sha"] = "0" * 64
    report = Replayer(events).verify()
    assert not report.ok
    assert [m.turn for m in report.mismatches] == [2]
    assert "does not match the recorded 000000000000" in str(report.mismatches[0])

    bad = tmp_path / "bad.cpsession"
    with RecordingWriter(bad, header) as w:
        for e in events:
            w.append(e)
    cli = [sys.executable, "-m", "inspector.cli", "verify"]
    ok = subprocess.run([*cli, str(good)], capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert "every request hash matches" in ok.stdout
    res = subprocess.run([*cli, str(bad)], capture_output=True, text=True, timeout=120)
    assert res.returncode == 1
    assert "FAILED: 1 of 4 turns differ" in res.stdout
    assert "Traceback" not in res.stderr
    assert "note: recorded by engine" not in res.stdout  # the same engine: nothing to say about versions

    # Made by an engine of an older version, whose requests may differ from this one's: verify says so.
    old = tmp_path / "old.cpsession"
    with RecordingWriter(old, {**header, "engine_version": "0.1.0"}) as w:
        for e in events:
            w.append(e)
    res = subprocess.run([*cli, str(old)], capture_output=True, text=True, timeout=120)
    assert res.returncode == 1
    assert f"note: recorded by engine 0.1.0, replayed by {ENGINE_VERSION}" in res.stdout
    assert ENGINE_VERSION != "0.1.0"  # bumped since recordings of 0.1.0 engines were made (sessions 25-27)
