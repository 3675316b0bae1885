"""Importers fed what a careless or hostile user gives them (import24): a file named as the wrong format,
a tool result with no call before the call's own result, one call id used twice in a message, a run cut
short, timestamps out of order or absurd, more notes than the CLI prints. Each imports what it can and
says what it repaired, or refuses saying what to do; never a traceback or a silently wrong recording."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from engine.errors import ConfigError
from engine.importers import ImportFormatError, load
from engine.importers.ingest import ingest
from engine.recording.cpsession import RecordingReader
from engine.recording.journal import unpack_event
from engine.recording.replay import Replayer
from inspector.cli import app

TOOLS = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]


def _call(cid: str, cmd: str) -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": "bash", "arguments": json.dumps({"cmd": cmd})}}


def _openhands(tmp_path: Path, msgs: list[dict[str, Any]], name: str = "oh.json") -> Path:
    f = tmp_path / name
    f.write_text(json.dumps({"messages": msgs, "tools": TOOLS, "run_id": "gpt-4o_maxiter_3"}))
    return f


def _imported(tmp_path: Path, src: Path) -> tuple[list[dict[str, Any]], list[str]]:
    rec = tmp_path / "r.cpsession"
    pipe, report = ingest(load(src), rec)
    pipe.close()
    events = [unpack_event(e) for e in RecordingReader.open(rec).events()]
    assert Replayer(events).verify().ok
    return events, report.notes


def _sent_bodies(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [json.loads(Replayer(events).replan(t).serialized.body) for t in range(2)]


def test_named_format_that_the_file_is_not_is_refused(tmp_path: Path) -> None:
    # An OpenHands record named as mini-swe-agent came out with mini-swe-agent's bash tool in place
    # of the record's own tools, without a word.
    f = _openhands(tmp_path, [{"role": "user", "content": "go"}, {"role": "assistant", "content": "ok", "tool_calls": [_call("a", "ls")]}, {"role": "tool", "tool_call_id": "a", "content": "x"}, {"role": "assistant", "content": "done"}])  # noqa: E501
    with pytest.raises(ImportFormatError, match=r"the file is an openhands trajectory: import it as `openhands` \(or `auto`\)"):  # noqa: E501
        load(f, "mini-swe-agent")
    assert load(f, "openhands").calls[0].tools[0].name == "bash"


def test_result_without_call_before_the_calls_own_result(tmp_path: Path) -> None:
    # A result with no call id between a call and its result: kept as user text after the call's
    # result. It used to go in between, and the engine refused the request (pairing broken).
    msgs = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [_call("a", "ls")]},
        {"role": "tool", "tool_call_id": None, "content": "stray"},
        {"role": "tool", "tool_call_id": "a", "content": "a.py"},
        {"role": "assistant", "content": "done"},
    ]
    events, notes = _imported(tmp_path, _openhands(tmp_path, msgs))
    assert notes == ["turn 1: unpaired tool result without a call id kept as user text"]
    body = _sent_bodies(events)[1]
    roles = [m["role"] for m in body["messages"]]
    assert roles[-2:] == ["tool", "user"] and body["messages"][-2]["content"] == "a.py"
    assert "stray" in body["messages"][-1]["content"]


def test_call_id_twice_in_one_message_pairs_both_results(tmp_path: Path) -> None:
    msgs = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [_call("c1", "ls"), _call("c1", "pwd")]},
        {"role": "tool", "tool_call_id": "c1", "content": "a.py"},
        {"role": "tool", "tool_call_id": "c1", "content": "/x"},
        {"role": "assistant", "content": "done"},
    ]
    events, notes = _imported(tmp_path, _openhands(tmp_path, msgs))
    # Before: the second result was kept as user text and the renamed call got a placeholder.
    # The second is renamed in characters every provider takes ('c1~1' until 2026-12-04: Anthropic and
    # Bedrock refuse '~' in an id).
    assert notes == ["turn 1: call id 'c1' used twice in one message; the second is 'c1_r1'"]
    tools = [m for m in _sent_bodies(events)[1]["messages"] if m["role"] == "tool"]
    assert [(m["tool_call_id"], m["content"]) for m in tools] == [("c1", "a.py"), ("c1_r1", "/x")]


def _mini(tmp_path: Path, n_calls: int, api_calls: int, times: list[Any] | None = None) -> Path:
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "sys"}, {"role": "user", "content": "task"}]
    for k in range(n_calls):
        t = times[k] if times else 1000.0 + k
        usage = {"prompt_tokens": 100 + k, "completion_tokens": 5}
        msgs.append({"role": "assistant", "content": f"step {k}", "extra": {"response": {"model": "deepseek-chat", "usage": usage}, "timestamp": t}})  # noqa: E501
        msgs.append({"role": "user", "content": f"output {k}"})
    msgs.append({"role": "exit", "content": "", "extra": {"exit_status": "Submitted"}})
    info = {"model_stats": {"api_calls": api_calls}, "exit_status": "Submitted"}
    f = tmp_path / "m.traj.json"
    f.write_text(json.dumps({"info": info, "messages": msgs, "trajectory_format": "mini-swe-agent-1.1"}))
    return f


def test_mini_run_cut_short_is_said_not_turned_into_a_failed_call(tmp_path: Path) -> None:
    imp = load(_mini(tmp_path, 2, 5))
    # A normal exit made no failed call: the calls not in the file are said, none is invented.
    assert [c.error for c in imp.calls] == [None, None]
    assert imp.meta["notes"] == [
        "info.model_stats.api_calls counts 5 model calls but the messages hold 2: the rest are not in "
        "the file (cut short?) and are not imported"
    ]
    with pytest.raises(ConfigError, match="no model calls to import .*counts 5 model calls but the messages hold 0"):
        ingest(load(_mini(tmp_path, 0, 5)))


def test_timestamps_out_of_order_or_absurd(tmp_path: Path) -> None:
    src = _mini(tmp_path, 4, 4, times=[1000.0, 900.0, 1e300, 1010.0])
    events, notes = _imported(tmp_path, src)
    assert notes == [
        "turn 1: its timestamp is 100 s before the previous call's; kept at the previous call's time",
        "turn 2: its timestamp 1e+300 is not a time; left out",
    ]
    times = [e["time"] for e in events if e.get("k") == "actual" and "time" in e]
    assert times == [1000.0, 1000.0, 1010.0]


def test_cli_says_how_many_notes_it_did_not_print(tmp_path: Path) -> None:
    msgs: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for k in range(7):  # seven calls without a result: seven placeholders, seven notes
        msgs.append({"role": "assistant", "content": None, "tool_calls": [_call(f"c{k}", "ls")]})
    msgs.append({"role": "assistant", "content": "done"})
    res = CliRunner().invoke(app, ["import", "auto", str(_openhands(tmp_path, msgs)), "-o", str(tmp_path / "o.cpsession")])  # noqa: E501
    assert res.exit_code == 0, res.output
    assert res.output.count("  note: ") == 5
    assert "  ... and 2 more notes of the same kinds" in res.output


def test_openhands_event_stream_is_refused_saying_what_to_import(tmp_path: Path) -> None:
    f = tmp_path / "events.json"
    f.write_text(json.dumps([
        {"id": 0, "source": "user", "action": "message", "args": {"content": "fix it"}},
        {"id": 1, "source": "agent", "action": "run", "args": {"command": "ls"}},
        {"id": 2, "source": "agent", "observation": "run", "content": "a.py", "cause": 1},
    ]))
    with pytest.raises(ImportFormatError, match=r"OpenHands' event stream.*import a record of the conversation's messages"):  # noqa: E501
        load(f)


def _trace_line(body: dict[str, Any], response: Any) -> str:
    return json.dumps({"request": {"timestamp": 1.0, "method": "POST", "url": "https://api.anthropic.com/v1/messages", "headers": {}, "body": body}, "response": response, "logged_at": "x"})  # noqa: E501


def test_cli_says_which_calls_failed_and_that_no_model_is_named(tmp_path: Path) -> None:
    body = {"max_tokens": 100, "messages": [{"role": "user", "content": "hi"}]}  # no model anywhere
    ok = {"status_code": 200, "headers": {}, "body": {"type": "message", "role": "assistant", "content": [{"type": "text", "text": "yo"}], "usage": {"input_tokens": 5, "output_tokens": 1}}}  # noqa: E501
    overloaded = {"status_code": 529, "headers": {}, "body": {"type": "error", "error": {"type": "overloaded_error"}}}
    # The second call goes on from the first's reply: the same conversation, whose turn 1 failed.
    more = {**body, "messages": [*body["messages"], {"role": "assistant", "content": "yo"}, {"role": "user", "content": "more"}]}  # noqa: E501
    src = tmp_path / "log.jsonl"
    src.write_text(_trace_line(body, ok) + "\n" + _trace_line(more, overloaded) + "\n")
    res = CliRunner().invoke(app, ["import", "auto", str(src), "-o", str(tmp_path / "o.cpsession")])
    assert res.exit_code == 0, res.output
    assert "note: the source names no model: recorded as 'unknown'; import with --model NAME to price it" in res.output
    assert 'note: turn 1: no reply in the source (HTTP 529: {"type": "error", "error": {"type": "overloaded_error"}}); kept as a failed call' in res.output  # noqa: E501


def test_the_same_opening_asked_again_is_another_conversation_named_without_a_model(tmp_path: Path) -> None:
    # The opening asked again after it was answered is a restart (engine/capture/lineage.py), as the
    # proxy files it; the note on the conversation left out names its model, or says it has none.
    body = {"max_tokens": 100, "messages": [{"role": "user", "content": "hi"}]}
    ok = {"status_code": 200, "headers": {}, "body": {"type": "message", "role": "assistant", "content": [{"type": "text", "text": "yo"}], "usage": {"input_tokens": 5, "output_tokens": 1}}}  # noqa: E501
    src = tmp_path / "log.jsonl"
    src.write_text(_trace_line(body, ok) + "\n" + _trace_line(body, ok) + "\n")
    res = CliRunner().invoke(app, ["import", "auto", str(src), "-o", str(tmp_path / "o.cpsession")])
    assert res.exit_code == 0, res.output
    assert (
        "imported conversation 1 of 2 (1 call); the others: 2: 1 call on an unnamed model, 'hi' (same opening "
        "as 1: a restart or another attempt)" in res.output
    )


def test_call_id_used_again_by_a_later_message_is_said_and_both_pair(tmp_path: Path) -> None:
    # Some agents number their calls per reply (call_0 every turn). The later reply's calls are renamed
    # (Anthropic refuses a request whose tool_use ids repeat, across messages too; OpenAI a repeated
    # tool_call_id) and said; each result pairs with its own message's call.
    msgs = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [_call("c1", "ls")]},
        {"role": "tool", "tool_call_id": "c1", "content": "a.py"},
        {"role": "assistant", "content": None, "tool_calls": [_call("c1", "pwd"), _call("c1", "id")]},
        {"role": "tool", "tool_call_id": "c1", "content": "/x"},
        {"role": "tool", "tool_call_id": "c1", "content": "uid=0"},
        {"role": "assistant", "content": "done"},
    ]
    events, notes = _imported(tmp_path, _openhands(tmp_path, msgs))
    said = "was used by an earlier assistant message too (turn 1); sent as {!r} (Anthropic, OpenAI and "
    assert notes == [
        f"turn 2: call id 'c1' {said.format('c1_r1')}Bedrock refuse a request that repeats a tool call id)",
        f"turn 2: call id 'c1' {said.format('c1_r2')}Bedrock refuse a request that repeats a tool call id)",
    ]
    body = json.loads(Replayer(events).replan(2).serialized.body)
    tools = [(m["tool_call_id"], m["content"]) for m in body["messages"] if m["role"] == "tool"]
    assert tools == [("c1", "a.py"), ("c1_r1", "/x"), ("c1_r2", "uid=0")]


def test_reply_answered_in_part_gets_placeholders_before_the_request(tmp_path: Path) -> None:
    # The next prompt holds c1's result and not c2's: the engine refused that request (a user message
    # answering some calls of the reply before it and not the others) and the import stopped on an
    # UnpairedToolResultError. c2's result, come late, is kept as user text.
    msgs = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [_call("c1", "ls"), _call("c2", "pwd")]},
        {"role": "tool", "tool_call_id": "c1", "content": "a.py"},
        {"role": "assistant", "content": "one more", "tool_calls": [_call("c3", "id")]},
        {"role": "tool", "tool_call_id": "c2", "content": "/x"},
        {"role": "tool", "tool_call_id": "c3", "content": "uid=0"},
        {"role": "assistant", "content": "done"},
    ]
    events, notes = _imported(tmp_path, _openhands(tmp_path, msgs))
    assert notes == [
        "turn 1: call c2 had no result; placeholder added",
        "turn 2: unpaired tool result 'c2' kept as user text",
    ]
    body = json.loads(Replayer(events).replan(2).serialized.body)
    tools = [(m["tool_call_id"], m["content"][:12]) for m in body["messages"] if m["role"] == "tool"]
    assert tools == [("c1", "a.py"), ("c2", "[no result r"), ("c3", "uid=0")]
