"""Importers for logged HTTP exchanges: claude-trace's JSONL (SSE `body_raw`, orphaned requests, other
endpoints, several conversations in one log) and proxy JSONL with streamed responses. Real SSE event
sequences from the stand-in; the imports ingest into recordings that `verify` accepts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from engine.importers import load, sniff
from engine.importers.ingest import ingest
from engine.importers.model import ImportFormatError
from engine.importers.proxy_jsonl import every_call
from tests.capture.conftest import usages, verify_ok
from tests.capture.standin import StandIn

S = StandIn()
SYSTEM = [{"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}}]
ROOT = Path(__file__).resolve().parents[2]


def _main_body(turn: int) -> dict[str, Any]:
    msgs: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": "Fix the bug."}]}]
    for i in range(turn):
        msgs.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Hello from the stand-in."},
                    {"type": "tool_use", "id": f"toolu_{i}", "name": "bash", "input": {"cmd": "ls -la"}},
                ],
            }
        )
        msgs.append(
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": "a.py"}],
            }
        )
    # Claude Code moves the cache marker to the newest message each call: still one conversation.
    msgs[-1]["content"][-1]["cache_control"] = {"type": "ephemeral"}
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 8192,
        "system": SYSTEM,
        "stream": True,
        "messages": msgs,
        "tools": [{"name": "bash", "description": "Run", "input_schema": {"type": "object"}}],
    }


def _pair(
    body: dict[str, Any],
    response: dict[str, Any] | None,
    url: str = "https://api.anthropic.com/v1/messages?beta=true",
) -> str:
    req = {
        "timestamp": 1700000000.5,
        "method": "POST",
        "url": url,
        "headers": {"x-api-key": "sk-ant-api...abcd", "content-type": "application/json"},
        "body": body,
    }
    return json.dumps({"request": req, "response": response, "logged_at": "2025-01-01T00:00:00Z"})


def _sse_response(turn: int) -> dict[str, Any]:
    raw = b"".join(S.anthropic_stream("claude-sonnet-4-5-20250929", "Hello from the stand-in.")).decode()
    raw = raw.replace('"toolu_1"', f'"toolu_{turn}"')  # the call the next request answers
    return {
        "timestamp": 1700000001.0,
        "status_code": 200,
        "headers": {"content-type": "text/event-stream"},
        "body_raw": raw,
    }


def _trace_log(tmp_path: Path) -> Path:
    lines = [_pair(_main_body(t), _sse_response(t)) for t in range(3)]
    title = {
        "model": "claude-3-5-haiku",
        "max_tokens": 512,
        "system": "Write a title.",
        "messages": [{"role": "user", "content": "Fix the bug."}],
    }
    lines.insert(
        1,
        _pair(
            title,
            {
                "timestamp": 1.0,
                "status_code": 200,
                "headers": {},
                "body": S.anthropic_message("claude-3-5-haiku", "Bug fix"),
            },
        ),
    )
    lines.append(
        _pair(
            {"model": "claude-sonnet-4-5", "messages": []},
            {"status_code": 200, "body": {"input_tokens": 9}},
            url="https://api.anthropic.com/v1/messages/count_tokens",
        )
    )
    lines.append(
        _pair(
            _main_body(3),
            {
                "status_code": 429,
                "headers": {},
                "body": {"type": "error", "error": {"type": "rate_limit_error"}},
            },
        )
    )
    lines.append(_pair(_main_body(3), None))  # ORPHANED_REQUEST
    p = tmp_path / "log-2025-01-01-00-00-00.jsonl"
    p.write_text("\n".join(lines) + "\n")
    return p


def test_claude_trace_main_conversation(tmp_path: Path) -> None:
    log = _trace_log(tmp_path)
    assert sniff(log) == "claude-trace"
    imp = load(log)
    assert imp.format == "claude-trace" and imp.provider == "anthropic"
    assert len(imp.calls) == 5  # three answered, one 429, one orphaned
    assert imp.meta["conversations"] == [5, 1]
    assert any("count_tokens" in n for n in imp.meta["notes"])
    u = imp.calls[0].usage
    assert u is not None and (u.cache_read_tokens, u.cache_write_tokens) == (3400, 1200)
    assert u.input_tokens == 21 + 3400 + 1200
    assert (
        imp.calls[0].response is not None
        and imp.calls[0].response.tool_calls[0].arguments == '{"cmd": "ls -la"}'
    )
    assert "HTTP 429" in (imp.calls[3].error or "") and "no response" in (imp.calls[4].error or "")
    out = tmp_path / "trace.cpsession"
    pipe, report = ingest(imp, out)
    pipe.close()
    assert len(usages(out)) == 3
    assert verify_ok(out) == 5
    assert b"sk-ant-api" not in out.read_bytes()  # headers are never read


def test_claude_trace_other_conversation_and_cli(tmp_path: Path) -> None:
    from engine.importers.claude_trace import parse_lines

    log = _trace_log(tmp_path)
    small = parse_lines(log.read_text(), str(log), conversation=2)
    assert len(small.calls) == 1 and small.model == "claude-3-5-haiku"
    out = tmp_path / "cli.cpsession"
    p = subprocess.run(
        [sys.executable, "-m", "inspector.cli", "import", "auto", str(log), "-o", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert p.returncode == 0, p.stderr
    assert "turns from claude-trace" in p.stdout and "conversation 1 of 2" in p.stdout


def test_claude_trace_a_conversation_run_twice_is_two(tmp_path: Path) -> None:
    """Two runs with one opening in one log (a sub-agent of one kind started twice, the second while the
    first goes on): two conversations, as the proxy files them, not one whose every other call rewrites
    its history (the import had all five calls, each run's start a 'rewrite' of the other)."""

    def run_b(line: str) -> str:
        return line.replace("toolu_", "toolu_b")  # the second run's own tool calls

    a = [_pair(_main_body(t), _sse_response(t)) for t in range(3)]
    b = [run_b(_pair(_main_body(t), _sse_response(t))) for t in range(2)]
    log = tmp_path / "log-twice.jsonl"
    log.write_text("\n".join([a[0], b[0], a[1], b[1], a[2]]) + "\n")
    imp = load(log)
    assert imp.meta["conversations"] == [3, 2]
    assert [c.response.tool_calls[0].id for c in imp.calls if c.response] == ["toolu_0", "toolu_1", "toolu_2"]
    out = tmp_path / "twice.cpsession"
    pipe, _ = ingest(imp, out)
    pipe.close()
    assert verify_ok(out) == 3


def test_claude_trace_bad_line_names_it(tmp_path: Path) -> None:
    log = _trace_log(tmp_path)
    log.write_text(
        log.read_text()
        + '{"request": {"url": "https://api.anthropic.com/v1/messages", "method": "POST", "body": {"messages": 3}}, "response": null}\n'
    )
    with pytest.raises(ImportFormatError, match=r"line 8"):
        load(log, "claude-trace")


def _proxy_line(req: dict[str, Any], resp: Any) -> str:
    return json.dumps({"request": req, "response": resp, "timestamp": 1700000000})


def test_proxy_jsonl_streamed_responses(tmp_path: Path) -> None:
    a_req = {"model": "claude-sonnet-4", "system": "S", "messages": [{"role": "user", "content": "hi"}]}
    o_req = {
        "model": "gpt-4o",
        "messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "hi"}],
    }
    r_req = {"model": "gpt-4.1", "instructions": "S", "input": "hi"}
    d_req = {"model": "deepseek-reasoner", "messages": [{"role": "user", "content": "hi"}]}
    lines = [
        _proxy_line(a_req, b"".join(S.anthropic_stream("claude-sonnet-4", "Hello there.")).decode()),
        _proxy_line(o_req, b"".join(S.chat_stream("gpt-4o", "Hello there.", True)).decode()),
        _proxy_line(r_req, b"".join(S.responses_stream("gpt-4.1", "Hello there.")).decode()),
        _proxy_line(d_req, b"".join(S.chat_stream("deepseek-reasoner", "Hello there.", True)).decode()),
        _proxy_line(o_req, b"".join(S.chat_stream("gpt-4o", "Cut", True)[:2]).decode()),  # cut short
        _proxy_line(o_req, json.dumps(S.chat_completion("gpt-4o", "As text JSON."))),
    ]
    log = tmp_path / "proxy.jsonl"
    log.write_text("\n".join(lines) + "\n")
    assert sniff(log) == "proxy-jsonl"
    imp = every_call(log)  # (each line its own conversation: read as a set of calls)
    assert imp.format == "proxy-jsonl" and len(imp.calls) == 6
    reads = [c.usage.cache_read_tokens if c.usage else None for c in imp.calls]
    assert reads == [3400, 1920, 1024, 640, None, 1920]
    assert imp.calls[0].usage is not None and imp.calls[0].usage.cache_write_tokens == 1200
    assert imp.calls[3].response is not None and imp.calls[3].response.thinking == "Think first."
    assert "incomplete stream" in (imp.calls[4].error or "")
    assert imp.calls[2].messages[0].role == "system" and imp.calls[2].response is not None
    assert imp.calls[2].response.content == "Hello there."


def test_proxy_jsonl_text_that_is_not_a_stream(tmp_path: Path) -> None:
    log = tmp_path / "bad.jsonl"
    log.write_text(_proxy_line({"model": "gpt-4o", "messages": []}, "<html>502 Bad Gateway</html>") + "\n")
    with pytest.raises(ImportFormatError, match="neither JSON nor"):
        load(log)


def test_proxy_jsonl_chat_stream_without_done(tmp_path: Path) -> None:
    # A logged chat stream from a server that never sends `data: [DONE]` (llama.cpp forks, older TGI) is
    # a whole reply when every choice finished and the line names no failure, as the proxy records it
    # (Reassembled.settle); it was imported as an incomplete stream, a failed call without its usage.
    # A line that says the call failed, or text cut mid-event (the usage chunk), is still incomplete.
    req = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
    events = [e for e in S.chat_stream("gpt-4o", "Hello there.", True) if e != b"data: [DONE]\n\n"]
    whole = b"".join(events).decode()
    failed = json.dumps(
        {"request": req, "response": whole, "timestamp": 1700000000, "error": "upstream reset the connection"}
    )
    lines = [_proxy_line(req, whole), failed, _proxy_line(req, whole[:-20])]
    log = tmp_path / "nodone.jsonl"
    log.write_text("\n".join(lines) + "\n")
    imp = every_call(log)  # (one request three times: three conversations)
    ok, cut, mid_event = imp.calls
    assert ok.error is None and ok.response is not None and ok.response.content == "Hello there."
    assert ok.usage is not None and ok.usage.cache_read_tokens == 1920
    assert cut.error == "upstream reset the connection" and cut.response is None
    assert "incomplete stream: the stream ended before [DONE]" in (mid_event.error or ""), mid_event.error
