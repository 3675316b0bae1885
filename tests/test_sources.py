"""The real sources behind the app: a recording (FileSource) and a live demo agent (LiveSource)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from engine.whatif import Overrides
from inspector.cli import app
from inspector.sources import NewTurn
from inspector.sources.file import FileSource
from inspector.sources.live import LiveSource

from .conftest import demo_agent

DEMO = Path(__file__).resolve().parents[1] / "demo_sessions" / "scout-anthropic.cpsession"


def test_file_source_replan_matches_explain_budget() -> None:
    src = FileSource(DEMO)
    traces = src.load_initial()
    assert len(traces) == 40 and traces[26]["turn"] == 26
    assert traces[26]["tier"] == "AggressivePrune"
    whatif = src.replan(26, Overrides(window=20000))
    out = CliRunner().invoke(
        app, ["explain", str(DEMO), "--turn", "26", "--budget", "20000", "--format", "json"]
    )
    assert out.exit_code == 0, out.output
    explained = json.loads(out.output)
    assert explained["tier"] == whatif["tier"]
    assert explained["request_sha256"] == whatif["request_sha256"]
    assert [s["tokens"] for s in explained["sections"]] == [s["tokens"] for s in whatif["sections"]]
    # A bigger window relaxes the tier the recorded run was in.
    assert explained["diff"]["tier"][0] != explained["diff"]["tier"][1]


def test_file_source_content_and_body() -> None:
    src = FileSource(DEMO)
    assert "Scout" in src.section_content(5, "identity")
    body = json.loads(src.request_body(5))
    assert body["model"] == "claude-sonnet-4" and body["messages"][0]["role"] == "user"


def test_verify_demo_sessions() -> None:
    for f in sorted(DEMO.parent.glob("*.cpsession")):
        out = CliRunner().invoke(app, ["verify", str(f)])
        assert out.exit_code == 0 and out.output.startswith("ok:"), out.output


def test_live_source_attach_and_disconnect(tmp_path: Path) -> None:
    with demo_agent(tmp_path, turns=6, delay=0.3) as child:
        src = LiveSource.when_serving(child, wait_s=30)
        seen = [t["turn"] for t in src.load_initial()]
        events = list(src.follow())
        seen += [e.trace["turn"] for e in events if isinstance(e, NewTurn)]
        assert seen == list(range(6))
        assert type(events[-1]).__name__ == "Disconnected"
        saved = tmp_path / "saved.cpsession"
        src.save(saved)
        out = CliRunner().invoke(app, ["verify", str(saved)])
        assert out.exit_code == 0, out.output


def test_explain_errors_are_actionable(tmp_path: Path) -> None:
    r = CliRunner()
    out = r.invoke(app, ["explain", str(tmp_path / "missing.cpsession")])
    assert out.exit_code == 1 and "no such file" in out.output
    bad = tmp_path / "bad.cpsession"
    bad.write_bytes(b"not a recording at all")
    out = r.invoke(app, ["verify", str(bad)])
    assert out.exit_code == 1 and "cp-inspect:" in out.output
    out = r.invoke(app, ["explain", str(DEMO), "--gate", "nonsense=off", "--budget", "1000"])
    assert out.exit_code == 2 and "unknown optimizer gate" in out.output


@pytest.mark.parametrize("pid", ["999999"])
def test_attach_unknown_pid(pid: str) -> None:
    out = CliRunner().invoke(app, ["explain", pid])
    assert out.exit_code == 1 and pid in out.output


def test_live_source_resyncs_after_dropped_events(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A client too slow for the agent loses events; it is told how many and re-syncs from a fresh
    snapshot, so its journal stays whole (what-if re-plans need every event) and no turn is lost."""
    import os

    from engine.probe.server import ProbeServer
    from engine.recording.cpsession import RecordingReader
    from engine.recording.journal import unpack_event

    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    journal = [unpack_event(e) for e in RecordingReader.open(DEMO).events()]
    cut = next(i for i, e in enumerate(journal) if e["k"] == "turn" and e["turn"] == 5) + 1
    live: list[dict] = list(journal[:cut])
    server = ProbeServer(
        {"model": "m", "provider": "anthropic"}, lambda: list(live), queue_limit=20, pid=os.getpid()
    )
    server.start()
    try:
        src = LiveSource(os.getpid())
        assert [t["turn"] for t in src.load_initial()] == list(range(6))
        for ev in journal[cut:]:  # the agent runs on while the inspector is not reading
            live.append(ev)
            server.publish(ev)
        turns: list[int] = []
        dropped = 0
        for item in src.follow():
            if isinstance(item, NewTurn):
                turns.append(item.trace["turn"])
            elif type(item).__name__ == "EventsLost":
                dropped += item.count  # type: ignore[attr-defined]
            if turns and turns[-1] == 39:
                break
        assert dropped > 0
        assert turns == list(range(6, 40))
        assert len(src.events) == len(journal)
        recorded = next(e["trace"] for e in journal if e["k"] == "turn" and e["turn"] == 39)
        assert src.replan(39, Overrides())["request_sha256"] == recorded["request_sha256"]
    finally:
        server.close()
