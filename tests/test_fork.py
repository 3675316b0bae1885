"""ForkPrefix and validate_spawn through the real `anthropic` and `openai` SDKs: parent and child requests
are sent by the SDK clients to a local stand-in server (a real socket), the bodies the SDKs put on the wire
are compared, and the cache simulator shows the child reading its parent's prefix."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from engine import Pipeline
from engine.errors import ConfigError
from engine.fork import validate_spawn
from engine.request_diff import parse_request
from engine.sim.forks import price_forks
from engine.sim.simulate import load_recording_events
from inspector.cli import app

anthropic = pytest.importorskip("anthropic")
openai = pytest.importorskip("openai")

PARAMS = {"type": "object", "properties": {"cmd": {"type": "string"}}}
REPLIES = {
    "/v1/messages": {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4",
        "content": [{"type": "text", "text": "ok"}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 2},
    },
    "/v1/chat/completions": {
        "id": "c1",
        "object": "chat.completion",
        "created": 0,
        "model": "gpt-4o",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12},
    },
}


class StandIn(BaseHTTPRequestHandler):
    bodies: list[bytes] = []

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        type(self).bodies.append(body)
        reply = json.dumps(REPLIES[self.path.split("?")[0]]).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def upstream() -> Iterator[str]:
    StandIn.bodies = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), StandIn)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def parent_pipeline(provider: str, record: Path | None = None) -> Pipeline:
    clock = iter(range(0, 1_000_000, 3))
    model = "claude-sonnet-4" if provider == "anthropic" else "gpt-4o"
    p = Pipeline(model, provider=provider, window=200_000, record=record, clock=lambda: next(clock))
    p.identity("You are a careful coding agent. Read before you edit; run the tests after. " * 60)
    p.constraints("Never push to main.")
    p.add_tool("bash", "Run a shell command", PARAMS)
    p.add_tool("read_file", "Read a file", PARAMS)
    p.latch("permissions", "read-only")
    p.goal("Make tests/test_io.py pass.")
    p.user("The test fails with a KeyError.")
    return p


def send(provider: str, base: str, body: dict[str, Any]) -> bytes:
    if provider == "anthropic":
        anthropic.Anthropic(api_key="test", base_url=base, max_retries=0).messages.create(**body)
    else:
        openai.OpenAI(api_key="test", base_url=f"{base}/v1", max_retries=0).chat.completions.create(**body)
    return StandIn.bodies[-1]


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_child_repeats_the_parents_prefix_on_the_wire(provider: str, upstream: str) -> None:
    p = parent_pipeline(provider)
    preq = p.next_request()
    wire_parent = send(provider, upstream, preq.body)
    p.record_usage({"input_tokens": preq.trace["final_tokens"], "output_tokens": 2})
    child = p.fork("Find every caller of parse_header.")
    creq = child.next_request()
    wire_child = send(provider, upstream, creq.body)
    # The engine's own requests: the boundary comes from the section scopes.
    rep = validate_spawn(preq, creq)
    assert rep.ok and rep.cache_readable and rep.shared_tokens and rep.shared_tokens >= 1024, rep.message
    assert rep.shared_units == 2 + 4  # two tools; identity, constraints, goal, latches
    # What the SDKs actually sent: the same prefix, byte for byte.
    wire = validate_spawn(wire_parent, wire_child, provider=provider)
    assert wire.ok and wire.shared_bytes == rep.shared_bytes and wire.cache_readable is True, wire.message
    if provider == "anthropic":  # a breakpoint on the boundary block in both requests
        pu, cu = parse_request(wire_parent).units, parse_request(wire_child).units
        assert pu[rep.shared_units - 1].marker and cu[rep.shared_units - 1].marker
    # One byte changed inside the shared prefix is caught, at that byte.
    body = json.loads(wire_child)
    target = body["system"][0] if provider == "anthropic" else body["messages"][0]
    key = "text" if provider == "anthropic" else "content"
    target[key] = target[key].replace("careful", "carefuL", 1)
    bad = validate_spawn(wire_parent, json.dumps(body).encode(), provider=provider)
    assert not bad.ok and bad.divergence is not None
    sa, sb = parse_request(wire_parent).stream(), parse_request(body).stream()
    first = next(i for i in range(min(len(sa), len(sb))) if sa[i] != sb[i])
    assert bad.divergence.offset == first < bad.shared_bytes
    assert bad.divergence.segment == "system"
    # Scope "global" shares the tools and the global sections only.
    g = p.fork("x", scope="global")
    grep = validate_spawn(preq, g.next_request(), scope="global")
    assert grep.ok and grep.shared_units == 2 + 2
    with pytest.raises(ConfigError, match="fork scope"):
        p.fork("x", scope="everything")


def run_tree(tmp_path: Path, provider: str) -> tuple[Path, list[Path]]:
    p = parent_pipeline(provider, tmp_path / "parent.cpsession")
    kids = []
    for t in range(5):
        req = p.next_request()
        p.record_usage({"input_tokens": req.trace["final_tokens"], "output_tokens": 20})
        calls = p.assistant(f"step {t}", tool_calls=[{"id": f"c{t}", "name": "bash", "arguments": "{}"}])
        p.tool_result(calls[0].id, "output\n" * 40)
        if t in (1, 3):
            path = tmp_path / f"child{t}.cpsession"
            child = p.fork(f"subtask {t}", record=path)
            for k in range(3):
                cr = child.next_request()
                child.record_usage({"input_tokens": cr.trace["final_tokens"], "output_tokens": 20})
                cc = child.assistant(f"k{k}", tool_calls=[{"id": f"d{k}", "name": "bash", "arguments": "{}"}])
                child.tool_result(cc[0].id, "o\n" * 10)
            child.close()
            kids.append(path)
    p.close()
    return tmp_path / "parent.cpsession", kids


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_simulator_prices_a_forked_run_against_independent_subagents(tmp_path: Path, provider: str) -> None:
    parent, kids = run_tree(tmp_path, provider)
    pev, _ = load_recording_events(parent)
    forks = [e for e in pev if e.get("k") == "fork"]
    assert [f["record"] for f in forks] == [str(k) for k in kids]
    for k, f in zip(kids, forks, strict=True):
        events, header = load_recording_events(k)
        assert header["parent_session"] == f["session_id"] and header["session_id"] == f["child"]
        assert header["fork_turn"] == f["turn"]
        assert CliRunner().invoke(app, ["verify", str(k)]).exit_code == 0
    assert CliRunner().invoke(app, ["verify", str(parent)]).exit_code == 0
    rep = price_forks((parent.name, pev), [(k.name, load_recording_events(k)[0]) for k in kids])
    for c in rep["children"]:
        assert c["spawn"]["ok"]
        # The child's first call reads the parent's prefix; on its own it would read nothing.
        assert c["first_call_cache_read"] > 1000 and c["first_call_cache_read_independent"] == 0
        assert c["first_call_cache_read"] <= c["spawn"]["shared_tokens"]
        assert c["forked"]["cost_usd"] < c["independent"]["cost_usd"]
    assert rep["forked_cost_usd"] < rep["independent_cost_usd"] and rep["saving_pct"] > 0
    # The inspector's fork tree finds the children from the parent's fork events.
    res = CliRunner().invoke(app, ["forks", str(parent)])
    assert res.exit_code == 0, res.output
    assert (
        "first call reads" in res.stdout
        and "child1.cpsession" in res.stdout
        and "child3.cpsession" in res.stdout
    )
    res = CliRunner().invoke(app, ["forks", str(parent), "--json"])
    assert json.loads(res.stdout)["children"][0]["fork_turn"] == forks[0]["turn"]


def test_forks_without_children_is_a_clear_error(tmp_path: Path) -> None:
    p = parent_pipeline("anthropic", tmp_path / "solo.cpsession")
    p.next_request()
    p.close()
    res = CliRunner().invoke(app, ["forks", str(tmp_path / "solo.cpsession")])
    assert res.exit_code == 2 and "no recorded forks" in res.output


def test_fork_under_contextpipe_record_records_the_child_beside_the_parent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CONTEXTPIPE_RECORD names one file, which the parent holds: fork() opened the same path for the
    child and raised "already exists", so no sub-agent could be forked under it."""
    run = tmp_path / "run.cpsession"
    monkeypatch.setenv("CONTEXTPIPE_RECORD", str(run))
    p = parent_pipeline("anthropic")
    req = p.next_request()
    p.record_usage({"input_tokens": req.trace["final_tokens"], "output_tokens": 2})
    child = p.fork("Find every caller of parse_header.")
    creq = child.next_request()
    child.record_usage({"input_tokens": creq.trace["final_tokens"], "output_tokens": 2})
    child.close()
    p.close()
    fork = next(e for e in load_recording_events(run)[0] if e.get("k") == "fork")
    kid = Path(fork["record"])
    assert kid.parent == tmp_path and kid.name == f"run.fork-{fork['child']}.cpsession"
    assert load_recording_events(kid)[1]["parent_session"] == fork["session_id"]
    res = CliRunner().invoke(app, ["forks", str(run)])
    assert res.exit_code == 0 and kid.name in res.stdout, res.output


def test_a_child_of_a_redacted_served_parent_serves_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pipeline(redact=True, serve=True): a child it forks with serve=True served its prompts in the clear
    (fork passed neither redact nor otel on)."""
    from engine.probe.client import ProbeClient

    rt = Path(tempfile.mkdtemp(prefix="cpf-", dir="/tmp"))  # a Unix socket path must stay short
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(rt))
    monkeypatch.delenv("CONTEXTPIPE_REDACT", raising=False)
    p = Pipeline("claude-sonnet-4", serve=True, redact=True)
    child = None
    try:
        p.identity("You are a careful coding agent.")
        child = p.fork("The secret is hunter2.", serve=True)
        # Served at all: the parent holds <pid>.sock, and a second probe there was refused ("already
        # serving"), so a sub-agent was never served while its parent was.
        assert p.probe is not None and p.probe.path.name == f"{os.getpid()}.sock"
        assert child.probe is not None and child.probe.path.name.startswith(f"{os.getpid()}.")
        assert child.probe.path != p.probe.path
        with ProbeClient.connect_path(child.probe.path, os.getpid()) as c:
            assert c.hello["redacted"] is True
    finally:
        if child is not None:
            child.close()
        p.close()
        shutil.rmtree(rt, ignore_errors=True)
