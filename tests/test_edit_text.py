"""Pipeline.edit_text: an agent's edit of an earlier message, one `edit` event, and the requests after it
those of the same conversation never edited.

The history was append-only, and what the engine carries from turn to turn for speed (the express
lane extending the last request, the memos of its prefix, the running token count) assumed it. A
session of twelve steady turns edits turn 0's reply before turn 6: every request from there on is
byte-identical to that of a session whose reply was the edited text from the start, unobserved (the
lanes on) and recording alike; the recording replays to the same hashes, and the edit is one event.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.errors import ConfigError, ContentError
from engine.pipeline import Pipeline
from engine.recording.cpsession import RecordingReader
from engine.recording.journal import unpack_event
from engine.recording.replay import Replayer

FIRST = "I will look at the code first."
EDITED = "I will look at the code first, carefully."


def _session(edit_at: int | None, from_start: bool = False, record: Path | None = None) -> list[str]:
    """Twelve turns of a tool-calling agent; `edit_at`: turn 0's reply edited before that turn's request;
    `from_start`: the reply was the edited text in the first place. Each turn's request body (JSON)."""
    p = Pipeline("claude-sonnet-4", "anthropic", 200_000, record=record)
    p.identity("You are a careful coding agent. " * 120)
    p.add_tool("bash", "Run a command.", {"type": "object", "properties": {"command": {"type": "string"}}})
    p.user("Fix the failing test.")
    bodies, reply_at = [], -1
    for t in range(12):
        if t == edit_at:
            assert p.edit_text(reply_at, EDITED)
            assert not p.edit_text(reply_at, EDITED), "the text is that already: nothing journaled"
        bodies.append(json.dumps(p.next_request().body, sort_keys=True))
        text = (EDITED if from_start else FIRST) if t == 0 else f"Step {t}: running the tests again."
        (call,) = p.assistant(
            text, [{"id": f"call_{t}", "name": "bash", "arguments": '{"command": "pytest -x"}'}]
        )
        if t == 0:
            reply_at = len(p.history) - 1
        p.tool_result(call.id, f"line {t}\n" * 80)
    p.close()
    return bodies


def test_requests_after_an_edit_are_those_never_edited() -> None:
    edited, plain, never = _session(6), _session(None, from_start=True), _session(None)
    assert edited[:6] == never[:6] and edited[1:6] != plain[1:6]  # the original, until the edit
    assert edited[6:] == plain[6:]  # then byte for byte the conversation edited from the start
    assert all(EDITED in b and FIRST + '"' not in b for b in edited[6:])
    assert all(FIRST + '"' in b for b in edited[1:6])


def test_a_recorded_edit_is_one_event_and_replays(tmp_path: Path) -> None:
    rec = tmp_path / "edit.cpsession"
    bodies = _session(6, record=rec)
    assert bodies[6:] == _session(None, from_start=True)[6:]
    with RecordingReader.open(rec) as r:
        events = [unpack_event(e) for e in r.events()]
    (edit,) = [e for e in events if e["k"] == "edit"]
    assert edit["turn"] == 6 and edit["at"] == 1  # (the task, then the reply)
    report = Replayer(events).verify()
    assert report.ok and report.turns == 12, report.mismatches[:1]


def test_bad_edits_are_refused_with_what_to_do() -> None:
    p = Pipeline("claude-sonnet-4", "anthropic", 20_000)
    p.user("hello")
    with pytest.raises(ConfigError, match=r"edit_text\(5\): no such message \(the history holds none yet"):
        p.edit_text(5, "x")
    p.next_request()
    with pytest.raises(ConfigError, match=r"holds 1: give an index into pipe.history, 0 to 0"):
        p.edit_text(-1, "x")
    with pytest.raises(ContentError, match=r"edit_text\(0, \.\.\.\): the text is a bytes, not a str: give"):
        p.edit_text(0, b"x")  # type: ignore[arg-type]
    assert p.edit_text(0, "hello there")  # (what it takes: the message's whole new text)


@pytest.mark.parametrize("window", [4_000, 12_000])
def test_simulate_reads_an_edit_back_as_the_session_never_edited(tmp_path: Path, window: int) -> None:
    """simulate over the recording with the edit: every column (the engine's policies and the peers; at
    4,000 tokens each compacts) from turn 6 on as over the session edited from the start. The peers'
    views took only what a turn appended as new, and kept the original reply (2 tokens short a turn).
    But for cost_aware at 12,000 (over its target, under the trigger): the edit breaks the cache at
    turn 6 whatever it does, so it compacts there, at no extra rewrite (tests/test_cost_aware_agent_edit.py),
    where the session edited from the start holds; it sends less from then on."""
    from engine.sim.simulate import simulate_file
    from engine.sim.simulate_settings import SimSettings

    edited, plain = tmp_path / "edited.cpsession", tmp_path / "plain.cpsession"
    _session(6, record=edited)
    _session(None, from_start=True, record=plain)
    settings = SimSettings(policies=("all",), calibrate=False, window=window)
    a, b = simulate_file(edited, settings), simulate_file(plain, settings)
    assert sorted(a.policies) == sorted(b.policies)
    ran = [n for n, c in a.policies.items() if c is not None]
    assert len(ran) > 3 and ran == [n for n, c in b.policies.items() if c is not None]
    for name in ran:
        got = [t.to_json()["prompt_tokens"] for t in a.policies[name].turns]  # type: ignore[union-attr]
        want = [t.to_json()["prompt_tokens"] for t in b.policies[name].turns]  # type: ignore[union-attr]
        if window == 12_000 and name in ("pipeline", "cost_aware"):
            rode = [t.compaction for t in a.policies[name].turns]  # type: ignore[union-attr]
            held = [t.compaction for t in b.policies[name].turns]  # type: ignore[union-attr]
            assert rode[6] and not any(held), (name, rode, held)
            assert all(g < w for g, w in zip(got[6:], want[6:], strict=True)), (name, got, want)
            continue
        assert got[6:] == want[6:], (name, got, want)
