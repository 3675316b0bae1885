"""The tap over the real anthropic and openai SDK clients, talking HTTP to a local stand-in server."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from engine.capture.tap import tap
from engine.recording.cpsession import RecordingReader
from engine.recording.journal import unpack_event
from engine.recording.replay import Replayer

ANTHROPIC_REPLY = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4",
    "content": [{"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"cmd": "ls"}}],
    "stop_reason": "tool_use",
    "stop_sequence": None,
    "usage": {
        "input_tokens": 20,
        "output_tokens": 9,
        "cache_read_input_tokens": 100,
        "cache_creation_input_tokens": 5,
    },
}
OPENAI_REPLY = {
    "id": "c1",
    "object": "chat.completion",
    "created": 1,
    "model": "gpt-4o",
    "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "done"}}],
    "usage": {
        "prompt_tokens": 50,
        "completion_tokens": 3,
        "total_tokens": 53,
        "prompt_tokens_details": {"cached_tokens": 0},
    },
}


class _Handler(BaseHTTPRequestHandler):
    bodies: list[dict[str, Any]] = []

    def do_POST(self) -> None:  # noqa: N802 (http.server naming)
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        _Handler.bodies.append(body)
        if body.get("max_tokens") == 13:  # the agent's request that the "provider" rejects
            self.send_response(400)
            reply: dict[str, Any] = {
                "type": "error",
                "error": {"type": "invalid_request_error", "message": "prompt is too long"},
            }
        else:
            self.send_response(200)
            reply = ANTHROPIC_REPLY if self.path.endswith("/messages") else OPENAI_REPLY
        data = json.dumps(reply).encode()
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()


def _events(path: Path) -> list[dict[str, Any]]:
    return [unpack_event(e) for e in RecordingReader.open(path).events()]


def test_anthropic_tap_records_actual_requests_and_usage(server: str, tmp_path: Path) -> None:
    rec = tmp_path / "tap.cpsession"
    client = tap(anthropic.Anthropic(api_key="x", base_url=server, max_retries=0), record=rec)
    tools = [{"name": "bash", "description": "run", "input_schema": {"type": "object"}}]
    msgs: list[dict[str, Any]] = [{"role": "user", "content": "list files"}]
    r1 = client.messages.create(
        model="claude-sonnet-4", max_tokens=100, system="You are terse.", tools=tools, messages=msgs
    )
    assert r1.content[0].type == "tool_use"  # the agent gets the SDK's own object back
    msgs += [
        {"role": "assistant", "content": [b.model_dump() for b in r1.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.py"}]},
    ]
    client.messages.create(
        model="claude-sonnet-4", max_tokens=100, system="You are terse.", tools=tools, messages=msgs
    )
    with pytest.raises(anthropic.BadRequestError):
        client.messages.create(
            model="claude-sonnet-4", max_tokens=13, system="You are terse.", tools=tools, messages=msgs
        )
    t = client._contextpipe_tap
    assert t.tap_errors == 0, t.last_error
    t.close()
    events = _events(rec)
    actual = [e for e in events if e["k"] == "actual"]
    usage = [e for e in events if e["k"] == "usage"]
    errors = [e for e in events if e["k"] == "error"]
    assert [a["turn"] for a in actual] == [0, 1, 2]
    assert actual[1]["base"] == 2 and len(actual[1]["add"]) == 2  # delta: assistant + tool result
    assert usage[0]["usage"] == {
        "input_tokens": 125,
        "output_tokens": 9,
        "cache_read_tokens": 100,
        "cache_write_tokens": 5,
        "finish_reason": "tool_use",  # the reply's stop_reason, kept for the OpenTelemetry export
    }
    assert errors and errors[0]["kind"] == "prompt_too_long"
    assert Replayer(events).verify().ok


def test_openai_tap(server: str, tmp_path: Path) -> None:
    rec = tmp_path / "tap.cpsession"
    client = tap(openai.OpenAI(api_key="x", base_url=server, max_retries=0), record=rec)
    out = client.chat.completions.create(
        model="gpt-4o",
        messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}],
    )
    assert out.choices[0].message.content == "done"
    client._contextpipe_tap.close()
    events = _events(rec)
    assert [e["usage"]["input_tokens"] for e in events if e["k"] == "usage"] == [50]
    assert Replayer(events).verify().ok


def test_tap_rejects_other_objects() -> None:
    with pytest.raises(TypeError, match="anthropic.Anthropic or openai.OpenAI"):
        tap(object())
