"""The proxy at its edges: compressed bodies both ways, an agent that goes away while the upstream is
silent, and OpenAI paths that end like Anthropic's. Real sockets, the stand-in upstream, real SDKs."""

from __future__ import annotations

import gzip
import json
import re
import socket
import threading
import time
import zlib
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest

from engine.capture.proxy import responses_api
from engine.capture.proxy.recording import Recorder
from engine.capture.proxy.server import ProxyServer
from engine.recording.actual import actual_requests
from tests.capture.conftest import Proxied, errors, events_of, usages, verify_ok
from tests.capture.standin import USAGE_OPENAI, StandIn

CHAT = {
    "model": "gpt-4o",
    "messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "hi"}],
}


class SilentUpstream:
    """A bare-socket upstream for one call that answers (or starts a stream) and then says nothing, as a
    model thinking without a word does; it notes how long after that the proxy closed the connection."""

    FIRST = b'data: {"id":"c","object":"chat.completion.chunk","model":"o3","choices":[]}\n\n'

    def __init__(self, stream: bool) -> None:
        self.stream = stream
        self.srv = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.srv.getsockname()[1]}"
        self.closed_after: float | None = None  # seconds from going silent to the proxy's close
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        conn, _ = self.srv.accept()
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            head, _, body = data.partition(b"\r\n\r\n")
            m = re.search(rb"content-length: *(\d+)", head, re.I)
            while m is not None and len(body) < int(m.group(1)):
                body += conn.recv(65536)
            if self.stream:
                first = b"%x\r\n%s\r\n" % (len(self.FIRST), self.FIRST)
                head_out = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
                conn.sendall(head_out + first)
            silent = time.monotonic()
            conn.settimeout(20)
            try:
                eof = conn.recv(1) == b""
            except TimeoutError:
                eof = False
            except OSError:
                eof = True  # reset: closed too
            if eof:
                self.closed_after = time.monotonic() - silent

    def close(self) -> None:
        self.srv.close()
        self.thread.join(25)


def _silent_proxy(tmp_path: Path, stream: bool) -> tuple[SilentUpstream, Recorder, ProxyServer]:
    up = SilentUpstream(stream)
    rec = Recorder(tmp_path / "rec", serve=False)
    return up, rec, ProxyServer({"anthropic": up.url, "openai": up.url}, rec).start()


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
def test_compressed_request_body_reaches_the_upstream_and_the_recording(
    proxied: Proxied, standin: StandIn, encoding: str
) -> None:
    raw = json.dumps(CHAT).encode()
    packed = gzip.compress(raw) if encoding == "gzip" else zlib.compress(raw)
    headers = {"content-type": "application/json", "content-encoding": encoding, "authorization": "Bearer k"}
    with httpx.Client(timeout=30) as c:
        r = c.post(proxied.url + "/v1/chat/completions", content=packed, headers=headers)
    # The upstream decodes what it was sent as the agent labelled it: the same request, answered
    assert r.status_code == 200, r.text
    assert standin.requests[-1][2] == raw and standin.requests[-1][1]["content-encoding"] == encoding
    assert r.json()["usage"] == USAGE_OPENAI
    paths = proxied.finish()
    assert proxied.recorder.skipped == []
    assert len(paths) == 1 and len(usages(paths[0])) == 1 and not errors(paths[0])
    verify_ok(paths[0])


def test_zstd_response_is_passed_on_and_recorded(proxied: Proxied, standin: StandIn) -> None:
    # httpx (under both SDKs) lists zstd in Accept-Encoding when zstandard is installed; a CDN answers so
    body = {**CHAT, "model": "gpt-4o-zstd"}
    with httpx.Client(timeout=30) as c:
        r = c.post(proxied.url + "/v1/chat/completions", json=body)
    assert r.status_code == 200 and r.headers["content-encoding"] == "zstd"
    assert r.json()["usage"] == USAGE_OPENAI  # httpx decoded the upstream's bytes, passed on unchanged
    paths = proxied.finish()
    assert not errors(paths[0]), errors(paths[0])
    assert usages(paths[0]) == [
        {"input_tokens": 2048, "output_tokens": 12, "cache_read_tokens": 1920, "cache_write_tokens": 0}
    ]
    verify_ok(paths[0])


def test_agent_gone_while_the_stream_is_silent_closes_the_upstream_at_once(
    tmp_path: Path, rtdir: Path
) -> None:
    # The agent reads the first event, then gives up while the model thinks in silence. The upstream
    # must be let go now, as the agent's own disconnect would, not when its next event arrives (minutes
    # of billed generation later), and the recording must say the agent left.
    up, rec, px = _silent_proxy(tmp_path, stream=True)
    body = {"model": "o3", "stream": True, "messages": [{"role": "user", "content": "think"}]}
    with httpx.Client(timeout=30) as c, c.stream("POST", px.url + "/v1/chat/completions", json=body) as r:
        assert next(r.iter_raw()) == up.FIRST
    up.close()
    assert up.closed_after is not None and up.closed_after < 3, "the upstream call outlived the agent"
    px.stop()
    rec.close()
    ((info, _),) = rec.sessions.values()
    errs = errors(info.path)
    assert len(errs) == 1 and "agent disconnected" in errs[0]["message"], errs
    verify_ok(info.path)


def test_agent_timing_out_before_the_answer_cancels_the_upstream_call(tmp_path: Path, rtdir: Path) -> None:
    # A non-streamed call the SDK gives up on after 1 s (it would then retry): the proxy must not keep
    # the first call running upstream, nor record it later as an answer the agent never read.
    up, rec, px = _silent_proxy(tmp_path, stream=False)
    client = openai.OpenAI(base_url=px.url + "/v1", api_key="k", max_retries=0, timeout=1.0)
    with pytest.raises(openai.APITimeoutError):
        client.chat.completions.create(model="o3", messages=[{"role": "user", "content": "think"}])
    up.close()
    assert up.closed_after is not None and up.closed_after < 3, "the upstream call outlived the agent"
    px.stop()
    rec.close()
    ((info, _),) = rec.sessions.values()
    errs = errors(info.path)
    assert len(errs) == 1 and "agent disconnected before the upstream answered" in errs[0]["message"], errs
    assert usages(info.path) == []


def test_openai_messages_resources_go_to_openai_unrecorded(
    standin: StandIn, tmp_path: Path, rtdir: Path
) -> None:
    # Anthropic's upstream is somewhere else entirely: nothing of an OpenAI call (its key least of all)
    # may be sent there. The stored completions' /chat/completions/{id}/messages ends like /v1/messages.
    rec = Recorder(tmp_path / "rec", serve=False)
    with ProxyServer({"anthropic": "http://127.0.0.1:9", "openai": standin.url}, rec) as px:
        client = openai.OpenAI(base_url=px.url + "/v1", api_key="sk-openai-key", max_retries=0)
        with pytest.raises(openai.BadRequestError):  # the stand-in has no stored completions: 400
            client.chat.completions.messages.list("chatcmpl-1")
        path, headers, _ = standin.requests[-1]
        assert path == "/v1/chat/completions/chatcmpl-1/messages"
        assert headers["authorization"] == "Bearer sk-openai-key"
        with pytest.raises(openai.BadRequestError):  # a GET on a model-call path lists, it is no call
            client.chat.completions.list()
        assert standin.requests[-1][0] == "/v1/chat/completions"
    rec.close()
    assert rec.sessions == {} and rec.skipped == []


PATCH = "*** Begin Patch\n*** Update File: a.py\n@@\n-x = 1\n+x = 2\n*** End Patch\n"
GRAMMAR = {"type": "grammar", "syntax": "lark", "definition": "start: begin_patch hunk+ end_patch"}


def test_responses_freeform_and_shell_calls_are_recorded_as_sent(proxied: Proxied, standin: StandIn) -> None:
    # Codex's requests: its apply_patch is a freeform (`custom`) tool whose calls carry the patch as raw
    # `input`; older models call `local_shell`. The patch, the shell command and their outputs are in
    # the prompt the agent sent, so they must be in the recording's as-sent request, not dropped.
    body = {
        "model": "gpt-5-codex",
        "instructions": "You are Codex.",
        "tools": [
            {
                "type": "custom",
                "name": "apply_patch",
                "description": "Edit files with a patch.",
                "format": GRAMMAR,
            },
            {"type": "local_shell"},
        ],
        "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Set x to 2."}]},
            {"type": "custom_tool_call", "call_id": "call_p", "name": "apply_patch", "input": PATCH},
            {"type": "custom_tool_call_output", "call_id": "call_p", "output": "Done: a.py"},
            {
                "type": "local_shell_call",
                "call_id": "call_s",
                "status": "completed",
                "action": {"type": "exec", "command": ["pytest", "-q"], "env": {}},
            },
            {
                "type": "local_shell_call_output",
                "call_id": "call_s",
                "output": [{"type": "input_text", "text": "1 passed"}],
            },
        ],
    }
    with httpx.Client(timeout=30) as c:
        assert c.post(proxied.url + "/v1/responses", json=body).status_code == 200
    (path,) = proxied.finish()
    ev = events_of(path)
    assert not errors(path) and len(usages(path)) == 1
    blobs = {
        e["h"]: e["data"] if isinstance(e["data"], str) else e["data"].decode()
        for e in ev
        if e["k"] == "blob"
    }
    sent = []
    for h in actual_requests(ev)[0]:
        m = json.loads(blobs[h])
        m["content"] = blobs[m.pop("content_h")]
        m["calls"] = [(c["name"], blobs[c["arguments_h"]]) for c in m.pop("tool_calls", [])]
        sent.append(m)
    assert [(m["role"], m["content"], m["calls"]) for m in sent] == [
        ("system", "You are Codex.", []),
        ("user", "Set x to 2.", []),
        ("assistant", "", [("apply_patch", PATCH)]),
        ("tool", "Done: a.py", []),
        ("assistant", "", [("local_shell", '{"type": "exec", "command": ["pytest", "-q"], "env": {}}')]),
        ("tool", "1 passed", []),
    ]
    actual = next(e for e in ev if e["k"] == "actual")
    assert actual["tool_names"] == ["apply_patch"]
    assert blobs[actual["tool_descriptions"][0]] == "Edit files with a patch."
    assert json.loads(blobs[actual["tools"][0]]) == {"format": GRAMMAR}
    verify_ok(path)


def test_responses_freeform_and_shell_calls_in_a_response() -> None:
    resp = {
        "model": "gpt-5-codex",
        "output": [
            {"type": "reasoning", "summary": []},
            {"type": "custom_tool_call", "call_id": "call_p", "name": "apply_patch", "input": PATCH},
            {"type": "local_shell_call", "call_id": "call_s", "action": {"type": "exec", "command": ["ls"]}},
        ],
    }
    calls = responses_api.response_to_chat(resp)["choices"][0]["message"]["tool_calls"]
    assert [(c["id"], c["function"]["name"], c["function"]["arguments"]) for c in calls] == [
        ("call_p", "apply_patch", PATCH),
        ("call_s", "local_shell", '{"type": "exec", "command": ["ls"]}'),
    ]


def test_server_tool_blocks_and_documents_do_not_lose_the_session(proxied: Proxied, standin: StandIn) -> None:
    # The model searched the web (server tool blocks in its reply); the agent sends the reply back, as
    # the SDK docs show, with a document for the next question. Every call must be recorded, with what
    # the blocks put in the prompt; before, the first reply's usage was lost and no later call recorded.
    client = anthropic.Anthropic(base_url=proxied.url, api_key="k", max_retries=0)
    tools: Any = [{"type": "web_search_20250305", "name": "web_search", "max_uses": 3}]
    msgs: list[Any] = [{"role": "user", "content": "Does aiohttp read zstd?"}]
    r = client.messages.create(
        model="claude-x-websearch", max_tokens=64, system="S", tools=tools, messages=msgs
    )
    assert [b.type for b in r.content] == ["server_tool_use", "web_search_tool_result", "text", "text"]
    doc = {
        "type": "document",
        "title": "notes",
        "source": {"type": "text", "media_type": "text/plain", "data": "N"},
    }
    msgs += [
        {"role": "assistant", "content": r.content},
        {"role": "user", "content": [doc, {"type": "text", "text": "And?"}]},
    ]
    for _ in range(2):
        client.messages.create(
            model="claude-x-websearch", max_tokens=64, system="S", tools=tools, messages=msgs
        )
    (path,) = proxied.finish()
    info, tap = next(iter(proxied.recorder.sessions.values()))
    assert (info.calls, info.tap_errors, tap.stats.errors) == (3, 0, 0), tap.stats.last_error
    assert len(usages(path)) == 3 and not errors(path)
    ev = events_of(path)
    blobs = {
        e["h"]: e["data"] if isinstance(e["data"], str) else e["data"].decode()
        for e in ev
        if e["k"] == "blob"
    }
    sent = [json.loads(blobs[h]) for h in actual_requests(ev)[1]]
    reply, question = blobs[sent[2]["content_h"]], blobs[sent[3]["content_h"]]
    assert '"query": "aiohttp zstd"' in reply and "EqgfCioIARgBIiQ3YTAwMjY1Mi1mZjM5" in reply
    assert reply.endswith("aiohttp reads zstd.\nHello from the stand-in.")
    assert question == "notes\nN\nAnd?"
    verify_ok(path)


def test_a_call_is_stamped_when_it_was_sent_not_when_its_answer_ended(
    proxied: Proxied, standin: StandIn
) -> None:
    # simulate prices the as-sent requests' cache by the gaps between their times (a 5-minute entry
    # read 4 minutes later hits, 6 minutes later misses): a call's time must be when it was sent. It was
    # when the recorder got the finished exchange, later by the whole answer (minutes for a long one).
    # The answer takes 4 s; a stamp within 2 s of the send allows for a loaded machine's lag.
    client = openai.OpenAI(base_url=proxied.url + "/v1", api_key="k", max_retries=0)
    sent = time.time()
    client.chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "[standin tokens=3 delay=4]"}]
    )
    (path,) = proxied.finish()
    ev = events_of(path)
    (actual,) = [e for e in ev if e["k"] == "actual"]
    (request,) = [e for e in ev if e["k"] == "request"]
    assert all(sent - 0.01 <= e["time"] < sent + 2.0 for e in (actual, request)), actual["time"] - sent
    verify_ok(path)


def test_tools_that_change_mid_conversation_stay_in_its_session(proxied: Proxied, standin: StandIn) -> None:
    # An MCP server that connects late, a tool the agent loads on demand: the conversation goes on with
    # one tool more, and breaks its cache, the change a recording is there to show (the actual event
    # names the new tool set). Keyed by its tools too, the conversation was split into two recordings.
    client = anthropic.Anthropic(base_url=proxied.url, api_key="k", max_retries=0)
    bash = {"name": "bash", "description": "Run a command.", "input_schema": {"type": "object"}}
    grep = {"name": "mcp__search__grep", "description": "Search files.", "input_schema": {"type": "object"}}
    msgs: list[Any] = [{"role": "user", "content": "Find the bug."}]
    r = client.messages.create(
        model="claude-sonnet-4", max_tokens=64, system="S", tools=[bash], messages=msgs
    )
    msgs += [{"role": "assistant", "content": r.content}]
    msgs += [
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.py"}]}
    ]
    client.messages.create(
        model="claude-sonnet-4", max_tokens=64, system="S", tools=[bash, grep], messages=msgs
    )
    paths = proxied.finish()
    assert len(paths) == 1, [i.number for i, _ in proxied.recorder.sessions.values()]
    actual = [e for e in events_of(paths[0]) if e["k"] == "actual"]
    assert [a.get("tool_names") for a in actual] == [["bash"], ["bash", "mcp__search__grep"]]
    assert len(usages(paths[0])) == 2
    verify_ok(paths[0])


def test_expect_100_continue_is_not_passed_on(tmp_path: Path, rtdir: Path) -> None:
    # curl sends `Expect: 100-continue` with any body over 1 MB and, without an answer, sends the body
    # after a second anyway. The proxy's server answers it and reads the body; passed on, the header
    # made the proxy wait for a 100 from an upstream that does not send one, which waited for the body.
    answer = json.dumps({"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 1}}).encode()
    srv = socket.create_server(("127.0.0.1", 0))
    got: list[bytes] = []

    def serve() -> None:
        conn, _ = srv.accept()
        with conn:
            conn.settimeout(5)
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            head, _, body = data.partition(b"\r\n\r\n")
            m = re.search(rb"content-length: *(\d+)", head, re.I)
            try:
                while m is not None and len(body) < int(m.group(1)):
                    body += conn.recv(65536)
            except TimeoutError:
                return  # the body never came
            got.append(head)
            ok = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
            conn.sendall(ok % len(answer) + answer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    rec = Recorder(tmp_path / "rec", serve=False)
    with ProxyServer(
        {"anthropic": "http://127.0.0.1:9", "openai": f"http://127.0.0.1:{srv.getsockname()[1]}"}, rec
    ) as px:
        with httpx.Client(timeout=15) as c:
            r = c.post(px.url + "/v1/chat/completions", json=CHAT, headers={"Expect": "100-continue"})
    thread.join(10)
    srv.close()
    rec.close()
    assert r.status_code == 200 and r.content == answer, r.text[:300]
    assert b"expect:" not in got[0].lower()


def test_a_responses_conversation_chained_by_previous_response_id_is_one_session(
    proxied: Proxied, standin: StandIn
) -> None:
    # With server-side state each request carries only its new input and names the reply it follows.
    # Keyed by its first message, every turn was a session of its own, and held only that input, while
    # the model read (and the bill counted) the whole conversation.
    client = openai.OpenAI(base_url=proxied.url + "/v1", api_key="k", max_retries=0)
    r = client.responses.create(model="gpt-4.1", instructions="S", input="Task: fix the bug.")
    for k in range(2):
        r = client.responses.create(
            model="gpt-4.1", instructions="S", previous_response_id=r.id, input=f"more {k}"
        )
    (path,) = proxied.finish()
    ev = events_of(path)
    assert len(usages(path)) == 3 and not errors(path)
    blobs = {
        e["h"]: e["data"] if isinstance(e["data"], str) else e["data"].decode()
        for e in ev
        if e["k"] == "blob"
    }
    sent = [json.loads(blobs[h]) for h in actual_requests(ev)[2]]
    reply = "Hello from the stand-in."
    assert [(m["role"], blobs[m["content_h"]]) for m in sent] == [
        ("system", "S"),
        ("user", "Task: fix the bug."),
        ("assistant", reply),
        ("user", "more 0"),
        ("assistant", reply),
        ("user", "more 1"),
    ]
    verify_ok(path)


def test_explain_says_the_call_failed(proxied: Proxied, standin: StandIn) -> None:
    # A rate-limited call is a recorded turn: explain must say it failed, and why, as it shows usage
    from typer.testing import CliRunner

    from inspector.cli import app

    client = openai.OpenAI(base_url=proxied.url + "/v1", api_key="k", max_retries=0)
    with pytest.raises(openai.RateLimitError):
        client.chat.completions.create(model="gpt-4o-error429", messages=[{"role": "user", "content": "hi"}])
    (path,) = proxied.finish()
    res = CliRunner().invoke(app, ["explain", str(path), "--turn", "0"])
    assert res.exit_code == 0, res.output
    assert "call failed: error: HTTP 429: " in res.stdout and "stand-in says 429" in res.stdout
    res = CliRunner().invoke(app, ["explain", str(path), "--turn", "0", "--format", "json"])
    assert json.loads(res.stdout)["error"].startswith("error: HTTP 429: ")


def test_a_reply_the_journal_cannot_read_keeps_its_usage(tmp_path: Path, rtdir: Path) -> None:
    # A 200 whose reply holds no message (Azure's content filter answers `choices: []`, with usage): the
    # call was billed, so its usage belongs to its turn even though no reply can be fed to the history.
    from engine.capture.proxy.exchange import Exchange
    from engine.capture.proxy.routes import DEFAULT_UPSTREAMS, match

    rec = Recorder(tmp_path / "rec", serve=False)
    usage = {"prompt_tokens": 900, "completion_tokens": 0, "total_tokens": 900}
    filtered = {"id": "c1", "object": "chat.completion", "model": "gpt-4o", "choices": [], "usage": usage}
    ex = Exchange(
        match("/v1/chat/completions", "", {}, DEFAULT_UPSTREAMS),
        json.dumps(CHAT).encode(),
        time.time(),
        status=200,
        content_type="application/json",
        response=[json.dumps(filtered).encode()],
    )
    rec(ex)
    rec.close()
    (info, tap) = next(iter(rec.sessions.values()))
    assert tap.stats.errors == 1 and "choices" in (tap.stats.last_error or "")  # said, and counted
    assert usages(info.path) == [
        {"input_tokens": 900, "output_tokens": 0, "cache_read_tokens": 0, "cache_write_tokens": 0}
    ]
    verify_ok(info.path)


def test_a_request_past_the_default_window_is_recorded(proxied: Proxied, standin: StandIn) -> None:
    # The task itself is ~200k tokens (a repository pasted whole into the first message), to a model whose
    # window holds it (1M): the shadow plan's window (128k by default) cannot fit it, and the task is
    # never evicted. The turn was lost: not journaled, nor its usage, only a tap error ("request not
    # journaled: BudgetExceededError"). Now the plan's window grows to fit, and the recording says so.
    standin.script = []
    client = anthropic.Anthropic(base_url=proxied.url, api_key="k", max_retries=0)
    msgs: list[Any] = [{"role": "user", "content": "Review this code:\n" + "word " * 200_000}]
    client.messages.create(model="claude-sonnet-4", max_tokens=64, system="S", messages=msgs)
    msgs += [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "And the tests?"}]
    client.messages.create(model="claude-sonnet-4", max_tokens=64, system="S", messages=msgs)
    (path,) = proxied.finish()
    (info, _) = next(iter(proxied.recorder.sessions.values()))
    assert info.tap_errors == 0, info.notes
    assert len(usages(path)) == 2 and not errors(path)
    windows = [e["config"]["window"] for e in events_of(path) if e.get("k") == "config"]
    assert windows == [256_000], windows
    verify_ok(path)
