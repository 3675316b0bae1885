"""engine.recording.why on real recordings: the demo agent's (engine requests rebuilt by replay) and an
imported proxy log (the agent's own requests, from `actual` events); provider diagnostics shown."""

from __future__ import annotations

from pathlib import Path

from engine.importers import load as load_import
from engine.importers.ingest import ingest
from engine.recording.why import actual_bodies, describe, why_missed
from engine.sim.simulate_read import load_recording_events
from engine.whatif import Overrides

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "demo_sessions" / "scout-anthropic.cpsession"
# The first engine's recording of the same scenario: its planner trimmed tool schemas mid-session (turn 12),
# which the current engine never does, so the tool_removed diagnosis is checked there.
V1 = ROOT / "tests" / "fixtures" / "v1_recordings" / "scout-anthropic.cpsession"


def test_engine_recording_names_each_break() -> None:
    events, _ = load_recording_events(DEMO)
    assert why_missed(events, 0)["engine"] is None
    assert describe(why_missed(events, 0)) == ["first turn: nothing cached yet"]
    kept = why_missed(events, 3)["engine"]
    assert kept["cause"] == "appended" and not kept["breaks_cache"]
    latch = why_missed(events, 15)["engine"]
    assert latch["cause"] == "latch_changed" and latch["section"] == "latches"
    compacted = why_missed(events, 17)["engine"]
    assert compacted["cause"] == "history_compacted" and compacted["breaks_cache"]
    assert why_missed(events, 21)["engine"]["section"] == "environment"
    v1_events, _ = load_recording_events(V1)
    tools = why_missed(v1_events, 12)["engine"]
    assert tools["cause"] == "tool_removed" and tools["segment"] == "tools"
    # Under a what-if the diff is between the re-planned requests.
    ov = why_missed(events, 15, Overrides(gates={"trim_schemas": False}))["engine"]
    assert ov["cause"] == "latch_changed"


def test_as_sent_requests_and_provider_diagnostics(tmp_path: Path) -> None:
    imp = load_import(ROOT / "tests" / "fixtures" / "synthetic" / "proxy_openai.jsonl")
    pipe, _ = ingest(imp, tmp_path / "p.cpsession")
    pipe.close()
    events, _ = load_recording_events(tmp_path / "p.cpsession")
    bodies = actual_bodies(events)
    assert len(bodies) >= 2
    w = why_missed(events, 1)
    assert w["as_sent"] is not None and w["as_sent"]["cause"] in (
        "appended",
        "message_rewritten",
        "identical",
    )
    lines = describe(w)
    assert any("(as sent)" in x for x in lines)
    # The tap/proxy keep Anthropic's cache diagnostics in the usage event; explain shows them.
    events.append(
        {
            "k": "usage",
            "turn": 1,
            "usage": {
                "input_tokens": 5,
                "output_tokens": 1,
                "cache_miss_reason": "tools_changed",
                "cache_missed_input_tokens": 1200,
            },
        }
    )
    w = why_missed(events, 1)
    assert w["diagnostics"] == {"cache_miss_reason": "tools_changed", "cache_missed_input_tokens": 1200}
    assert any("provider says: tools_changed (1200 input tokens missed" in x for x in describe(w))


def test_as_sent_tool_changes_mid_session_are_named(tmp_path: Path) -> None:
    """An agent (seen through the tap, the proxy or an importer) that edits a tool description at call 2
    and adds a tool at call 3 while its history grows: the as-sent diff names both."""
    from engine.importers.model import CallRec, ImportedSession, MessageRec, ToolSchemaRec, UsageRec

    params = {"type": "object", "properties": {"cmd": {"type": "string"}}}
    bash = ToolSchemaRec("bash", "Run a shell command", params)
    bash2 = ToolSchemaRec("bash", "Run a shell command (30 s timeout)", params)
    grep = ToolSchemaRec("grep", "Search files", params)
    toolsets = [(bash,), (bash,), (bash2,), (bash2, grep), (bash2, grep)]
    msgs = [MessageRec("system", "You are careful."), MessageRec("user", "fix it")]
    calls = []
    for k, tools in enumerate(toolsets):
        calls.append(
            CallRec(
                tuple(msgs), MessageRec("assistant", f"step {k}"), tools, UsageRec(100, 5, 0, 0), float(k), "gpt-4o"
            )
        )
        msgs += [MessageRec("assistant", f"step {k}"), MessageRec("user", f"next {k}")]
    pipe, _ = ingest(ImportedSession("test", "test", "gpt-4o", "openai", calls), tmp_path / "t.cpsession")
    pipe.close()
    events, _ = load_recording_events(tmp_path / "t.cpsession")
    assert why_missed(events, 1)["as_sent"]["cause"] == "appended"
    edited = why_missed(events, 2)["as_sent"]
    assert edited["cause"] == "tool_description" and edited["section"] == "tools"
    added = why_missed(events, 3)["as_sent"]
    assert added["cause"] == "tool_added" and "grep" in added["detail"]
    assert why_missed(events, 4)["as_sent"]["cause"] == "appended"


def test_explain_prints_why_the_cache_missed() -> None:
    import json

    from typer.testing import CliRunner

    from inspector.cli import app

    res = CliRunner().invoke(app, ["explain", str(DEMO), "--turn", "15", "--format", "json"])
    assert res.exit_code == 0, res.output
    why = json.loads(res.stdout)["why_cache_missed"]
    assert why["previous"] == 14 and why["engine"]["cause"] == "latch_changed"
    res = CliRunner().invoke(app, ["explain", str(DEMO), "--turn", "17"])
    assert "why the cache missed" in res.stdout and "history_compacted" in res.stdout
    res = CliRunner().invoke(app, ["explain", str(V1), "--turn", "12"])
    assert "why the cache missed" in res.stdout and "tool_removed" in res.stdout
