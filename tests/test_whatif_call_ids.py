"""A what-if at another provider than the session's (the inspector's what-if, `explain --provider`, a
shadow) sends the tool call ids that provider takes (engine/providers/call_ids.py), as a live session at
it would have: it reused the session's ids, which are its own provider's. An Anthropic session keeps a
50-character id (Anthropic sets no length) that OpenAI refuses ("string too long. Expected a string with
maximum length 40"); an OpenAI session keeps 'functions.eval:301', which Anthropic and Bedrock refuse.
A what-if at the session's own provider is the recorded request, byte for byte."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from engine import Pipeline
from engine.recording.cpsession import RecordingReader
from engine.recording.journal import unpack_event
from engine.recording.replay import Replayer
from engine.whatif import Overrides
from tests.test_live_call_ids import BASH, MODEL, _check_sendable, _history_note

LONG = "toolu_" + "a" * 44  # 50 characters: Anthropic takes it, OpenAI does not
KIMI = "functions.eval:301"  # OpenAI takes it, Anthropic and Bedrock do not


def _session(tmp_path: Path, provider: str, ids: list[list[str]]) -> Path:
    rec = tmp_path / f"{provider}.cpsession"
    p = Pipeline(MODEL[provider], provider, 200_000, serve=False, record=rec)
    p.identity("You are a careful coding agent.")
    p.add_tool("bash", "Run a shell command", BASH)
    p.user("List the files.")
    for turn, message in enumerate(ids):
        p.next_request()
        p.record_usage({"input_tokens": 100, "output_tokens": 5})
        calls = p.assistant(
            "", [{"id": c, "name": "bash", "arguments": '{"command": "ls"}'} for c in message]
        )
        for c in calls:
            p.tool_result(c.id, f"out {turn} {c.id}")
    p.next_request()
    p.close()
    return rec


def _replayer(rec: Path) -> Replayer:
    with RecordingReader.open(rec) as r:
        return Replayer([unpack_event(e) for e in r.events()])


def test_a_whatif_at_openai_of_an_anthropic_session_cuts_its_long_ids(tmp_path: Path) -> None:
    rec = _session(tmp_path, "anthropic", [[LONG], ["call_0"], ["call_0", KIMI]])
    rp = _replayer(rec)
    last = rp.turns - 1
    recorded = json.loads(rp.replan(last).serialized.body)
    assert _check_sendable(recorded, "anthropic") == [LONG, "call_0", "call_0_r1", "functions_eval_301"]
    built = rp.replan(last, Overrides(provider="openai"))
    body = json.loads(built.serialized.body)
    # the agent's own ids through OpenAI's rule: the long one cut to 40, the Kimi one as it came
    assert _check_sendable(body, "openai") == ["toolu_" + "a" * 22 + "_r1", "call_0", "call_0_r1", KIMI]
    note = _history_note(built.trace)
    assert "sent to OpenAI with another id than the agent gave" in note and "Anthropic" not in note, note
    assert note.startswith("2 tool calls of the conversation sent to OpenAI"), note  # "2 tool call(s)"
    # each result goes with its own call, under the new id
    results = [m for m in body["messages"] if m["role"] == "tool"]
    assert [r["tool_call_id"] for r in results] == ["toolu_" + "a" * 22 + "_r1", "call_0", "call_0_r1", KIMI]
    assert [r["content"] for r in results] == [
        f"out 0 {LONG}",
        "out 1 call_0",
        "out 2 call_0",
        f"out 2 {KIMI}",
    ]
    # at its own provider: the recorded request, byte for byte
    assert rp.replan(last, Overrides(provider="anthropic")).serialized.body == rp.replan(last).serialized.body
    assert rp.verify().ok


def test_a_whatif_at_anthropic_and_bedrock_of_an_openai_session_spells_its_ids(tmp_path: Path) -> None:
    rec = _session(tmp_path, "openai", [[KIMI], ["call_0"], ["call_0"]])
    rp = _replayer(rec)
    last = rp.turns - 1
    assert _check_sendable(json.loads(rp.replan(last).serialized.body), "openai") == [
        KIMI,
        "call_0",
        "call_0_r1",
    ]
    for provider in ("anthropic", "bedrock"):
        built = rp.replan(last, Overrides(provider=provider))
        body = json.loads(built.serialized.body)
        assert _check_sendable(body, provider) == ["functions_eval_301", "call_0", "call_0_r1"], provider
        name = provider.capitalize()
        assert (
            f"sent to {name} with another id than the agent gave (message 1: {KIMI!r} as 'functions_eval_301'"
            in (_history_note(built.trace))
        )
    # every turn of the what-if, the same ids (the cached prefix does not move)
    firsts = [
        _check_sendable(
            json.loads(rp.replan(t, Overrides(provider="anthropic")).serialized.body), "anthropic"
        )
        for t in range(1, rp.turns)
    ]
    for a, b in zip(firsts, firsts[1:], strict=False):
        assert b[: len(a)] == a


def test_explain_provider_sends_the_targets_ids(tmp_path: Path) -> None:
    from inspector.cli import app

    rec = _session(tmp_path, "anthropic", [[LONG]])
    res = CliRunner().invoke(app, ["explain", str(rec), "--provider", "openai", "--format", "json"])
    assert res.exit_code == 0, res.output
    data: dict[str, Any] = json.loads(res.output)
    hist = next(s for s in data["sections"] if s["kind"] == "history")
    assert "sent to OpenAI with another id than the agent gave" in hist.get("note", ""), hist


def test_the_inspectors_whatif_at_another_provider_says_the_targets_ids(tmp_path: Path) -> None:
    from inspector.sources.file import FileSource

    rec = _session(tmp_path, "openai", [[KIMI]])
    src = FileSource(rec)
    traces = src.load_initial()
    trace = src.replan(traces[-1]["turn"], Overrides(provider="anthropic"))
    hist = next(s for s in trace["sections"] if s["kind"] == "history")
    assert f"{KIMI!r} as 'functions_eval_301'" in str(hist.get("note", "")), hist
