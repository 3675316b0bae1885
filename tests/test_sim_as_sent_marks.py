"""simulate's as_sent column caches where the agent's own requests asked to, for as long as they asked.

An Anthropic request says where the provider may cache (`cache_control` breakpoints, at most four) and for
how long (`"ttl": "1h"` or the default 5 minutes). Until the twenty-first session the imports (proxy
JSONL, claude-trace) and the capture tap dropped the breakpoints, and the as_sent column (the `paper`
baseline) assumed one rolling 5-minute breakpoint on the newest message: an agent that kept its system
prompt cached for an hour read nothing back after a 10-minute pause, and one that asked for no caching
at all was simulated as if it had.
"""

from __future__ import annotations

import json
from pathlib import Path

from engine.importers import ImportedSession, load
from engine.importers.ingest import ingest
from engine.sim.simulate import SimSettings, simulate_file
from engine.sim.simulate_figures import PolicyFigures

SYSTEM = "You are a careful coding agent working in a large repository. " * 250  # ~3,000 tokens
GAP_S = 600.0  # ten minutes between calls: past a 5-minute entry's life, within a 1-hour one's


def _line(k: int, system: object, user_turns: int, mark_last: bool) -> str:
    msgs: list[dict[str, object]] = []
    for j in range(user_turns):
        msgs.append({"role": "user", "content": [{"type": "text", "text": f"step {j}: look at file_{j}.py"}]})
        if j + 1 < user_turns:
            msgs.append({"role": "assistant", "content": [{"type": "text", "text": f"Looked at file_{j}.py."}]})
    if mark_last:
        msgs[-1]["content"][-1]["cache_control"] = {"type": "ephemeral"}  # type: ignore[index]
    req = {"model": "claude-sonnet-4-5", "max_tokens": 256, "system": system, "messages": msgs}
    resp = {
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": f"Looked at file_{user_turns - 1}.py."}],
        "usage": {"input_tokens": 10, "output_tokens": 8},
    }
    return json.dumps({"timestamp": 1_700_000_000 + k * GAP_S, "request": req, "response": resp})


def _simulate(tmp_path: Path, system: object, mark_last: bool) -> tuple[ImportedSession, PolicyFigures | None]:
    log = tmp_path / "a.jsonl"
    log.write_text("".join(_line(k, system, k + 1, mark_last) + "\n" for k in range(3)))
    imp = load(log)
    pipe, _ = ingest(imp, tmp_path / "a.cpsession")
    pipe.close()
    r = simulate_file(tmp_path / "a.cpsession", SimSettings(calibrate=False))
    return imp, r.policies["as_sent"]


def test_one_hour_breakpoints_are_simulated_as_one_hour(tmp_path: Path) -> None:
    system = [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral", "ttl": "1h"}}]
    imp, sent = _simulate(tmp_path, system, mark_last=True)
    assert sent is not None
    t0, t1, t2 = sent.turns
    # The first call writes the system prompt for an hour; ten minutes later both others read it
    # (with the old rolling 5-minute assumption: nothing read, everything written again each call).
    assert t0.cache_read_tokens == 0 and t0.cache_write_tokens > 2_500
    assert t1.cache_read_tokens > 2_500 and t2.cache_read_tokens > 2_500
    assert sent.totals.cache_write_1h >= t0.cache_write_tokens - 50
    assert imp.calls[0].cache_marks == (("message", 0, "1h"), ("message", 1, "5m"))
    assert imp.calls[2].cache_marks == (("message", 0, "1h"), ("message", 5, "5m"))


def test_a_request_without_breakpoints_caches_nothing(tmp_path: Path) -> None:
    imp, sent = _simulate(tmp_path, [{"type": "text", "text": SYSTEM}], mark_last=False)
    assert sent is not None
    assert sent.totals.cache_read == 0 and sent.totals.cache_write == 0
    assert all(c.cache_marks == () for c in imp.calls)


def test_openai_requests_keep_no_marks(tmp_path: Path) -> None:
    line = {
        "request": {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]},
        "response": {"choices": [{"message": {"role": "assistant", "content": "hello"}}]},
    }
    log = tmp_path / "o.jsonl"
    log.write_text(json.dumps(line) + "\n")
    assert load(log).calls[0].cache_marks is None  # automatic prefix caching: nothing to keep


def test_the_tap_keeps_an_anthropic_requests_breakpoints(tmp_path: Path) -> None:
    # The capture path (tap, proxy) journals through the same parser: a real SDK client against a local
    # stand-in server, and the `actual` event holds the request's breakpoints.
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from typing import Any

    import anthropic

    from engine.capture.tap import tap
    from engine.recording.cpsession import RecordingReader
    from engine.recording.journal import unpack_event

    reply = json.dumps(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4",
            "content": [{"type": "text", "text": "ok"}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 20, "output_tokens": 2},
        }
    ).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server naming)
            self.rfile.read(int(self.headers["content-length"]))
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, *args: Any) -> None:
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        rec = tmp_path / "tap.cpsession"
        client = tap(
            anthropic.Anthropic(api_key="x", base_url=f"http://127.0.0.1:{srv.server_address[1]}", max_retries=0),
            record=rec,
        )
        client.messages.create(
            model="claude-sonnet-4",
            max_tokens=50,
            system=[{"type": "text", "text": "terse", "cache_control": {"type": "ephemeral", "ttl": "1h"}}],
            tools=[{"name": "bash", "description": "run", "input_schema": {"type": "object"}}],
            messages=[
                {
                    "role": "user",
                    "content": [{"type": "text", "text": "list files", "cache_control": {"type": "ephemeral"}}],
                }
            ],
        )
        client._contextpipe_tap.close()
    finally:
        srv.shutdown()
    actual = [e for e in map(unpack_event, RecordingReader.open(rec).events()) if e["k"] == "actual"]
    assert actual[0]["marks"] == [["message", 0, "1h"], ["message", 1, "5m"]]
