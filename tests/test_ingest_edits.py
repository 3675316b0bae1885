"""An imported trajectory whose agent rewrote earlier messages where they stood (SWE-agent's history
processors: `last_n_observations` replaces old tool outputs with "Old environment output: (N lines
omitted)"): the engine's history takes each edit, as for a captured agent (engine.importers
.history_edits). Before, ingest fed only the messages after the last call's and kept every original: its
requests sent outputs the agent no longer sent, and the cache breaks its edits made were unnamed.
"""

from __future__ import annotations

from pathlib import Path

from engine.importers import load
from engine.importers.ingest import ingest
from engine.importers.model import CallRec, ImportedSession, MessageRec, ToolCallRec
from engine.recording.cpsession import RecordingReader
from engine.recording.journal import trace_of, unpack_event
from engine.recording.replay import Replayer

BIG = "".join(f"collected test {i} ... ok\n" for i in range(80))
CUT = "Old environment output: (80 lines omitted)"


def _events(path: Path) -> list[dict]:  # type: ignore[type-arg]
    with RecordingReader.open(path) as r:
        return [unpack_event(e) for e in r.events()]


def _session(cut: bool) -> ImportedSession:
    """Three calls; at the third the first call's output stands elided (`cut`) or as it came."""
    system, task = MessageRec("system", "You are a coding agent."), MessageRec("user", "Fix the test.")
    a1 = MessageRec("assistant", "Run the tests.", (ToolCallRec("c1", "bash", '{"command": "pytest"}'),))
    r1 = MessageRec("tool", BIG, tool_call_id="c1")
    a2 = MessageRec("assistant", "Look at the file.", (ToolCallRec("c2", "bash", '{"command": "cat a.py"}'),))
    r2 = MessageRec("tool", "print(1)", tool_call_id="c2")
    done = MessageRec("assistant", "Fixed.")
    third = (system, task, a1, MessageRec("tool", CUT, tool_call_id="c1") if cut else r1, a2, r2)
    calls = [
        CallRec((system, task), a1, (), None, 1.0, "gpt-4o"),
        CallRec((system, task, a1, r1), a2, (), None, 2.0, "gpt-4o"),
        CallRec(third, done, (), None, 3.0, "gpt-4o"),
    ]
    return ImportedSession(source="synthetic", format="swe-agent", calls=calls, model="gpt-4o", provider="openai")


def test_an_elided_output_is_edited_in_the_engines_history(tmp_path: Path) -> None:
    rec = tmp_path / "cut.cpsession"
    ingest(_session(cut=True), rec)
    evs = _events(rec)
    (edit,) = [e for e in evs if e["k"] == "edit"]
    assert edit["turn"] == 2 and edit["part"] == 0, edit
    rep = Replayer(evs)
    bodies = [rep.replan(t).serialized.body for t in range(3)]
    assert b"collected test 7" in bodies[1]
    assert CUT.encode() in bodies[2] and b"collected test 7" not in bodies[2]
    rw = {e["turn"]: trace_of(e) for e in evs if e["k"] == "turn"}[2]["history_rewrite"]
    assert rw["edited_parts"] == [[1, "result", "truncated"]] and rw["applied"] == 1, rw
    assert rep.verify().ok
    # the same conversation never elided journals no edit
    plain = tmp_path / "plain.cpsession"
    ingest(_session(cut=False), plain)
    assert not [e for e in _events(plain) if e["k"] == "edit"]


def test_a_real_swe_agent_run_whose_processor_elides_outputs(trajectories_dir: Path, tmp_path: Path) -> None:
    """marshmallow-1867 (function calling, last_n_observations): each elided output is an edit, a replay
    rebuilds every request, and the last request sends each output as the agent last sent it."""
    src = trajectories_dir / "swe-agent" / "marshmallow-1867_function_calling.traj"
    session = load(src)
    rec = tmp_path / "m.cpsession"
    ingest(session, rec)
    evs = _events(rec)
    edits = [e for e in evs if e["k"] == "edit"]
    assert len(edits) == 7 and all("part" in e for e in edits), edits
    rep = Replayer(evs)
    assert rep.verify().ok
    last = rep.replan(rep.turns - 1).serialized.body.decode()
    sent = session.calls[-1].messages
    elided = [m.content for m in sent if m.role == "tool" and m.content.startswith("Old environment output")]
    assert elided and last.count("Old environment output") == len(elided)
