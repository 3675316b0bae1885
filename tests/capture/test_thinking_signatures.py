"""Thinking goes back to Anthropic with its signature, and redacted thinking with its `data`, on every
path that records a conversation: the tap (streamed and not) and the proxy over the real anthropic SDK
talking to the stand-in upstream, and the proxy-jsonl importer reading a file in the real format.

The API refuses a thinking block whose signature is missing or wrong ("Invalid `signature` in
`thinking` block") and the engine leaves an unsigned one out of its request, so a path that kept
only the text rebuilt each later request without the model's thinking."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anthropic

from engine.capture.tap import tap
from engine.importers import load
from engine.importers.ingest import ingest
from engine.recording.replay import Replayer
from tests.capture.conftest import Proxied, events_of
from tests.capture.standin import REDACTED, SIGNATURE, THINKING, THINKING_BLOCKS, StandIn

MODEL = "claude-sonnet-4-thinking"  # the stand-in opens its reply with THINKING_BLOCKS
TOOLS: Any = [{"name": "bash", "description": "Run", "input_schema": {"type": "object", "properties": {}}}]
SENT_BACK = [
    {"type": "thinking", "thinking": THINKING, "signature": SIGNATURE},
    {"type": "redacted_thinking", "data": REDACTED},
]


def _engine_assistants(path: Path, turn: int) -> list[list[dict[str, Any]]]:
    """The content of each assistant message in the engine's own request for `turn`, rebuilt from the
    recording."""
    body = json.loads(Replayer(events_of(path)).replan(turn).serialized.body)
    return [m["content"] for m in body["messages"] if m["role"] == "assistant"]


def _thinking_of(content: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [b for b in content if b["type"] in ("thinking", "redacted_thinking")]


def _conversation(client: anthropic.Anthropic) -> None:
    """Three calls: created, then streamed (the signature comes as a signature_delta), each reply sent
    back as the SDK returned it (its content blocks) with the tool's result."""
    msgs: list[Any] = [{"role": "user", "content": "List the files."}]
    r = client.messages.create(model=MODEL, max_tokens=256, tools=TOOLS, messages=msgs)
    assert [b.type for b in r.content][:2] == ["thinking", "redacted_thinking"]
    msgs += [
        {"role": "assistant", "content": r.content},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.py"}]},
    ]
    with client.messages.stream(model=MODEL, max_tokens=256, tools=TOOLS, messages=msgs) as s:
        final = s.get_final_message()
    assert final.content[0].type == "thinking" and final.content[0].signature == SIGNATURE
    msgs += [
        {"role": "assistant", "content": final.content},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "b.py"}]},
    ]
    client.messages.create(model=MODEL, max_tokens=256, tools=TOOLS, messages=msgs)


def _check(path: Path) -> None:
    # Turn 2's request holds both replies: the created one's and the streamed one's thinking, each
    # with its signature, and the redacted block's data as it came.
    assistants = _engine_assistants(path, 2)
    assert len(assistants) == 2
    for content in assistants:
        assert _thinking_of(content) == SENT_BACK
        assert content[0]["type"] == "thinking"  # the API wants the thinking first
    assert Replayer(events_of(path)).verify().ok


def test_tap_carries_signatures(standin: StandIn, tmp_path: Path) -> None:
    rec = tmp_path / "t.cpsession"
    client = tap(anthropic.Anthropic(base_url=standin.url, api_key="k", max_retries=0), record=rec)
    _conversation(client)
    client.contextpipe_tap.close()  # type: ignore[attr-defined]
    assert client.contextpipe_stats.errors == 0  # type: ignore[attr-defined]
    _check(rec)


def test_proxy_carries_signatures(proxied: Proxied) -> None:
    client = anthropic.Anthropic(base_url=proxied.url, api_key="k", max_retries=0)
    _conversation(client)
    assert proxied.recorder.flush(60)
    paths = proxied.finish()
    assert len(paths) == 1
    _check(paths[0])


def _line(messages: list[Any], content: list[Any], t: float) -> str:
    """One proxy-jsonl line as a logging proxy writes it: the raw request and response bodies."""
    return json.dumps(
        {
            "timestamp": t,
            "request": {"model": MODEL, "max_tokens": 256, "tools": TOOLS, "messages": messages},
            "response": {
                "id": f"msg_{t}",
                "type": "message",
                "role": "assistant",
                "model": MODEL,
                "content": content,
                "stop_reason": "tool_use",
                "stop_sequence": None,
                "usage": {"input_tokens": 10, "output_tokens": 5},
            },
        }
    )


def test_importer_carries_signatures(tmp_path: Path) -> None:
    reply = [*THINKING_BLOCKS, {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {}}]
    m0: list[Any] = [{"role": "user", "content": "List the files."}]
    m1 = [*m0, {"role": "assistant", "content": reply},
          {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "a"}]}]
    f = tmp_path / "calls.jsonl"
    f.write_text(_line(m0, reply, 1.0) + "\n" + _line(m1, [{"type": "text", "text": "Done."}], 2.0) + "\n")
    imp = load(f)
    assert imp.format == "proxy-jsonl"
    resp = imp.calls[0].response
    assert resp is not None and resp.thinking == THINKING + "\n[redacted thinking]"  # the text, as before
    rec = tmp_path / "i.cpsession"
    pipe, _ = ingest(imp, rec)
    pipe.close()
    assistants = _engine_assistants(rec, 1)
    assert [_thinking_of(c) for c in assistants] == [SENT_BACK]


def test_importer_unsigned_thinking_unchanged(tmp_path: Path) -> None:
    """Thinking recorded without a signature (a log that dropped it) is imported as its text, as before:
    the engine leaves it out of a message that has anything else."""
    reply = [{"type": "thinking", "thinking": THINKING},
             {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {}}]
    m0: list[Any] = [{"role": "user", "content": "List the files."}]
    m1 = [*m0, {"role": "assistant", "content": reply},
          {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "a"}]}]
    f = tmp_path / "calls.jsonl"
    f.write_text(_line(m0, reply, 1.0) + "\n" + _line(m1, [{"type": "text", "text": "Done."}], 2.0) + "\n")
    imp = load(f)
    resp = imp.calls[0].response
    assert resp is not None and resp.thinking == THINKING and resp.thinking_blocks == ()
    rec = tmp_path / "u.cpsession"
    pipe, _ = ingest(imp, rec)
    pipe.close()
    assert [_thinking_of(c) for c in _engine_assistants(rec, 1)] == [[]]


def test_importer_keeps_tool_names_as_sent(tmp_path: Path) -> None:
    """add_tool refuses a name outside the providers' pattern, but an imported session's tools are
    another agent's, kept as it sent them (the import does not fail)."""
    tools = [{"name": "fs.read", "description": "Read", "input_schema": {"type": "object", "properties": {}}}]
    line = json.loads(_line([{"role": "user", "content": "Read a."}], [{"type": "text", "text": "A."}], 1.0))
    line["request"]["tools"] = tools
    f = tmp_path / "calls.jsonl"
    f.write_text(json.dumps(line) + "\n")
    pipe, _ = ingest(load(f), tmp_path / "n.cpsession")
    assert [t.name for t in pipe.tools] == ["fs.read"]
    pipe.close()


def test_swe_agent_thinking_blocks(tmp_path: Path) -> None:
    """SWE-agent keeps litellm's `thinking_blocks` on each assistant message: their text was imported as
    the list's Python repr, and their signatures were lost."""
    call = {"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
    history = [
        {"role": "system", "content": "You are an agent."},
        {"role": "user", "content": "List the files."},
        {"role": "assistant", "content": "Looking.", "thinking_blocks": THINKING_BLOCKS, "tool_calls": [call]},
        {"role": "tool", "content": "a.py", "tool_call_ids": ["call_1"]},
        {"role": "assistant", "content": "Done."},
    ]
    traj = {
        "history": history,
        "trajectory": [],
        "replay_config": {"agent": {"model": {"name": "claude-sonnet-4-5"}}},
    }
    f = tmp_path / "run.traj"
    f.write_text(json.dumps(traj))
    imp = load(f)
    assert imp.format == "swe-agent" and imp.provider == "anthropic"
    resp = imp.calls[0].response
    assert resp is not None and resp.thinking == THINKING + "\n[redacted thinking]"
    rec = tmp_path / "s.cpsession"
    pipe, _ = ingest(imp, rec)
    pipe.close()
    assert [_thinking_of(c) for c in _engine_assistants(rec, 1)] == [SENT_BACK]


def _sent_assistants(path: Path, turn: int) -> list[dict[str, Any]]:
    """The assistant messages of the request the agent actually sent at `turn` (the journaled as-sent
    copy), as replay and explain rebuild it."""
    from engine.recording.why import actual_bodies

    body = actual_bodies(events_of(path))[turn]
    return [m for m in body["messages"] if m["role"] == "assistant"]


def _check_sent_copy(path: Path) -> None:
    from engine.recording.sent import sent_view
    from tests.test_simulate import COUNTER

    for m in _sent_assistants(path, 2):
        assert m["thinking_blocks"] == SENT_BACK  # signature and data, not only the text
        assert m["reasoning_content"].startswith(THINKING)  # the joined text as before
    view = sent_view(events_of(path), 2, COUNTER)
    assert view is not None
    assert f"[thinking block: signed ({len(SIGNATURE)}-character signature)]" in view
    assert f"[redacted thinking: {len(REDACTED)} characters of data sent back]" in view


def test_as_sent_copy_keeps_thinking_blocks_proxy(proxied: Proxied) -> None:
    client = anthropic.Anthropic(base_url=proxied.url, api_key="k", max_retries=0)
    _conversation(client)
    assert proxied.recorder.flush(60)
    paths = proxied.finish()
    _check_sent_copy(paths[0])


def test_as_sent_copy_keeps_thinking_blocks_import(tmp_path: Path) -> None:
    reply = [*THINKING_BLOCKS, {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {}}]
    m0: list[Any] = [{"role": "user", "content": "List the files."}]
    result = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "a"}]}
    m1 = [*m0, {"role": "assistant", "content": reply}, result]
    m2 = [*m1, {"role": "assistant", "content": reply}, result]
    f = tmp_path / "calls.jsonl"
    f.write_text("\n".join(_line(m, reply, t) for m, t in ((m0, 1.0), (m1, 2.0), (m2, 3.0))) + "\n")
    rec = tmp_path / "i.cpsession"
    pipe, _ = ingest(load(f), rec)
    pipe.close()
    _check_sent_copy(rec)
    assert Replayer(events_of(rec)).verify().ok
