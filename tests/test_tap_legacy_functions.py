"""The legacy OpenAI function-calling API (`functions` / `function_call`, before `tools`) through the tap
and the proxy: the request's functions are recorded as its tools, the reply's `function_call` as its call
(streamed or not), a `function` message as that call's result; the wire is untouched. Real SDK and real
sockets against the stand-in (model `*-functions` replies with a legacy call)."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

import openai
import pytest

from engine.capture.tap import tap
from engine.importers.ingest import actual_requests
from engine.recording.cpsession import RecordingReader
from engine.recording.journal import unpack_event
from engine.recording.replay import Replayer
from tests.capture.standin import LEGACY_CALL, StandIn

FUNCTIONS = [
    {"name": "bash", "description": "Run a shell command", "parameters": {"type": "object"}},
]
MODEL = "gpt-4o-functions"


@pytest.fixture(scope="module")
def upstream() -> Any:
    s = StandIn().start()
    yield s
    s.stop()


def _events(path: Path) -> list[dict[str, Any]]:
    return [unpack_event(e) for e in RecordingReader.open(path).events()]


def _second_request(reply: dict[str, Any]) -> list[dict[str, Any]]:
    """The agent's next request: the reply's call goes back into the history with its result."""
    return [
        {"role": "user", "content": "List the files."},
        {"role": "assistant", "content": None, "function_call": reply},
        {"role": "function", "name": "bash", "content": "a.py\nb.py"},
    ]


def _check(path: Path) -> None:
    ev = _events(path)
    actual = [e for e in ev if e["k"] == "actual"]
    assert [e["turn"] for e in actual] == [0, 1]
    assert actual[0]["tool_names"] == ["bash"]  # the functions, recorded as the request's tools
    blobs = {e["h"]: e["data"] for e in ev if e["k"] == "blob"}
    sent = [json.loads(blobs[h]) for h in actual_requests(ev)[1]]
    call = sent[1]["tool_calls"][0]
    assert call["name"] == "bash" and blobs[call["arguments_h"]] == LEGACY_CALL["arguments"]
    assert sent[2]["role"] == "tool" and blobs[sent[2]["content_h"]] == "a.py\nb.py"
    # the shadow history pairs the result with the call (not kept as an unpaired result in user text)
    # the reply to the first request carried the call (streamed: rebuilt from its pieces), so the next
    # request extends the history instead of rewriting it
    first_reply = next(e for e in ev if e["k"] == "msg" and e["role"] == "assistant")
    assert [p["t"] for p in first_reply["parts"]] == ["call"], first_reply
    parts = [p for e in ev if e["k"] == "msg" for p in e["parts"]] + [e["part"] for e in ev if e["k"] == "part"]
    calls = [p for p in parts if p["t"] == "call"]
    results = [p for p in parts if p["t"] == "result"]
    assert len(calls) == 2 and [r["id"] for r in results] == [calls[0]["id"]], parts
    texts = [blobs[p["h"]] for p in parts if p["t"] == "text" and p.get("h") in blobs]
    assert not any("with no matching call" in t for t in texts)
    report = Replayer(ev).verify()
    assert report.ok, report.mismatches[:1]


@pytest.mark.parametrize("streamed", [False, True])
def test_tap_records_legacy_functions(upstream: StandIn, tmp_path: Path, streamed: bool) -> None:
    rec = tmp_path / "t.cpsession"
    client = tap(openai.OpenAI(api_key="k", base_url=upstream.url + "/v1", max_retries=0), record=rec)
    first: list[Any] = [{"role": "user", "content": "List the files."}]
    kw: dict[str, Any] = {"model": MODEL, "functions": FUNCTIONS, "function_call": "auto"}
    if streamed:
        chunks = list(
            client.chat.completions.create(
                messages=first, stream=True, stream_options={"include_usage": True}, **kw
            )
        )
        args = "".join(
            c.choices[0].delta.function_call.arguments or ""
            for c in chunks
            if c.choices and c.choices[0].delta.function_call
        )
        reply = {"name": "bash", "arguments": args}
    else:
        r = client.chat.completions.create(messages=first, **kw)
        fc = r.choices[0].message.function_call
        assert fc is not None
        reply = {"name": fc.name, "arguments": fc.arguments}
    assert reply == LEGACY_CALL
    client.chat.completions.create(messages=_second_request(reply), **kw)
    client.contextpipe_tap.close()
    assert client.contextpipe_stats.errors == 0, client.contextpipe_stats.last_error
    _check(rec)


@pytest.mark.parametrize("streamed", [False, True])
def test_proxy_records_legacy_functions(upstream: StandIn, tmp_path: Path, streamed: bool) -> None:
    from engine.capture.proxy.recording import Recorder
    from engine.capture.proxy.server import ProxyServer

    rec = Recorder(tmp_path / "rec", serve=False)
    with ProxyServer({"openai": upstream.url}, rec) as px:
        for messages in ([{"role": "user", "content": "List the files."}], _second_request(LEGACY_CALL)):
            body: dict[str, Any] = {"model": MODEL, "messages": messages, "functions": FUNCTIONS}
            if streamed:
                body |= {"stream": True, "stream_options": {"include_usage": True}}
            raw = json.dumps(body, separators=(",", ":")).encode()
            req = urllib.request.Request(
                px.url + "/v1/chat/completions", raw, {"Content-Type": "application/json", "Authorization": "Bearer k"}
            )
            with urllib.request.urlopen(req, timeout=10) as resp:
                got = resp.read()
            # byte for byte, both ways
            assert upstream.requests[-1][2] == raw
            assert got == upstream.sent[-1]
    rec.close()
    [(info, _)] = rec.sessions.values()
    assert info.tap_errors == 0 and info.errors == 0, info.notes
    _check(info.path)


def test_proxy_jsonl_import_reads_legacy_functions(upstream: StandIn) -> None:
    """A logged proxy exchange (the proxy-jsonl format) shares the parser: functions, call and result."""
    from engine.importers.proxy_jsonl import parse_lines

    reply = upstream.chat_completion(MODEL, "")
    line = {
        "request": {"model": MODEL, "messages": _second_request(LEGACY_CALL), "functions": FUNCTIONS},
        "response": reply,
    }
    [call] = parse_lines(json.dumps(line), "legacy.jsonl").calls
    assert [t.name for t in call.tools] == ["bash"]
    assert call.messages[1].tool_calls[0].id == call.messages[2].tool_call_id == "function_call:bash"
    assert call.messages[2].role == "tool" and call.messages[2].content == "a.py\nb.py"
    assert call.response is not None and [c.name for c in call.response.tool_calls] == ["bash"]
