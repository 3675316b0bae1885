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
from engine.sim.simulate_read import load_recording_events
from inspector.cli import app
from tests.support.fork_tree import PARAMS, parent_pipeline, run_tree

anthropic = pytest.importorskip("anthropic")
openai = pytest.importorskip("openai")

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


def test_forks_of_a_recording_without_forks_says_so_and_succeeds(tmp_path: Path) -> None:
    """A session that forked no sub-agent is not an error: it was exit 2 ("has no recorded forks"), which
    a script looping over recordings read as a bad file. A bad file is still 2."""
    solo = tmp_path / "solo.cpsession"
    p = parent_pipeline("anthropic", solo)
    p.next_request()
    p.close()
    res = CliRunner().invoke(app, ["forks", str(solo)])
    assert res.exit_code == 0, res.output
    assert res.stdout == f"no forks in {solo} (1 turn)\n" and res.stderr == ""
    demo = Path(__file__).resolve().parent.parent / "demo_sessions" / "scout-anthropic.cpsession"
    res = CliRunner().invoke(app, ["forks", str(demo)])
    assert res.exit_code == 0 and res.stdout == f"no forks in {demo} (40 turns)\n", res.output
    doc = json.loads(CliRunner().invoke(app, ["forks", str(solo), "--json"]).stdout)
    assert doc["children"] == [] and doc["parent"]["turns"] == 1  # the report's usual shape
    (tmp_path / "bad.cpsession").write_bytes(b"not a recording\n")
    res = CliRunner().invoke(app, ["forks", str(tmp_path / "bad.cpsession")])
    assert res.exit_code == 2 and res.output.startswith("cp-inspect: ")


def test_forks_that_were_not_recorded_are_still_an_error(tmp_path: Path) -> None:
    """Forks the parent made without record=PATH: there is a tree, but nothing to show of it."""
    p = parent_pipeline("anthropic", tmp_path / "parent.cpsession")
    turns(p, 1, "p")
    c = p.fork("Find every caller of parse_header.")
    turns(c, 1, "c")
    c.close()
    p.close()
    res = CliRunner().invoke(app, ["forks", str(tmp_path / "parent.cpsession")])
    assert res.exit_code == 2 and "no recorded forks" in res.output, res.output


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


def turns(p: Pipeline, n: int, tag: str) -> None:
    for t in range(n):
        req = p.next_request()
        p.record_usage({"input_tokens": req.trace["final_tokens"], "output_tokens": 20})
        calls = p.assistant(f"{tag} {t}", tool_calls=[{"id": f"{tag}{t}", "name": "bash", "arguments": "{}"}])
        p.tool_result(calls[0].id, "output\n" * 20)


def test_forks_shows_a_fork_of_a_fork_under_its_parent(tmp_path: Path) -> None:
    """A sub-agent's own sub-agent: `forks` showed only the first level, and naming the grandchild was
    an error ("forked from session ..., not from parent")."""
    p = parent_pipeline("anthropic", tmp_path / "parent.cpsession")
    turns(p, 2, "p")
    c = p.fork("subtask", record=tmp_path / "child.cpsession")
    turns(c, 1, "c")
    g = c.fork("subsubtask", record=tmp_path / "grandchild.cpsession")
    turns(g, 2, "g")
    g.close()
    turns(c, 1, "c2")
    c.close()
    s = p.fork("sibling", record=tmp_path / "sibling.cpsession")
    turns(s, 1, "s")
    s.close()
    p.close()
    res = CliRunner().invoke(app, ["forks", str(tmp_path / "parent.cpsession")])
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    at = {
        name: next(i for i, ln in enumerate(lines) if f" {name}.cpsession  (" in ln)
        for name in ("child", "grandchild", "sibling")
    }
    assert lines[at["child"]].startswith("├─ ") and lines[at["sibling"]].startswith("└─ ")
    assert at["child"] < at["grandchild"] < at["sibling"]
    assert lines[at["grandchild"]].startswith("│  └─ ") and "of child.cpsession" in lines[at["grandchild"]]
    assert "3 sub-agents, 2 levels deep" in res.stdout
    rep = json.loads(CliRunner().invoke(app, ["forks", str(tmp_path / "parent.cpsession"), "--json"]).stdout)
    kids = {k["label"]: k for k in rep["children"]}
    assert [k["label"] for k in rep["children"]] == [
        "child.cpsession",
        "grandchild.cpsession",
        "sibling.cpsession",
    ]
    assert kids["grandchild.cpsession"]["parent_label"] == "child.cpsession"
    assert kids["grandchild.cpsession"]["depth"] == 2 and kids["child.cpsession"]["depth"] == 1
    # The grandchild repeats its own parent's prefix, checked against the child's request before the fork.
    assert (
        kids["grandchild.cpsession"]["spawn"]["ok"]
        and kids["grandchild.cpsession"]["first_call_cache_read"] > 1000
    )
    # Named on the command line, in any order, the same tree.
    named = [str(tmp_path / f"{n}.cpsession") for n in ("sibling", "grandchild", "child")]
    res = CliRunner().invoke(app, ["forks", str(tmp_path / "parent.cpsession"), *named, "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["children"] == rep["children"]


def linked(path: Path, me: str, parent: str | None) -> None:
    links = (
        {"session_id": me, "parent_session": parent, "fork_turn": 1, "fork_scope": "session"}
        if parent
        else None
    )
    p = Pipeline("claude-sonnet-4", record=path, links=links)
    p.identity("You are terse.")
    p.user("hi")
    turns(p, 1, me)
    p.close()


@pytest.mark.parametrize(
    ("kids", "says"),
    [
        ([("a", "b"), ("b", "a")], "a.cpsession, b.cpsession: forked from each other in a cycle"),
        (
            [("a", "elsewhere")],
            "a.cpsession was forked from session elsewhere, which is neither root.cpsession",
        ),
        ([("a", "root"), ("a", "root")], "are the same session (a): give it once"),
    ],
)
def test_forks_names_the_link_that_breaks_the_tree(
    tmp_path: Path, kids: list[tuple[str, str]], says: str
) -> None:
    root = tmp_path / "root.cpsession"
    p = Pipeline("claude-sonnet-4", record=root, links={"session_id": "root"})
    p.identity("You are terse.")
    p.user("hi")
    turns(p, 1, "r")
    p.close()
    paths = []
    for k, (me, parent) in enumerate(kids):
        path = tmp_path / (f"{me}.cpsession" if k == 0 or me != kids[0][0] else f"{me}-again.cpsession")
        linked(path, me, parent)
        paths.append(str(path))
    res = CliRunner().invoke(app, ["forks", str(root), *paths])
    assert res.exit_code == 2 and says in res.output, res.output
    assert "Traceback" not in res.output


def test_forks_leaves_out_an_unreadable_child_with_a_warning_and_shows_the_rest(tmp_path: Path) -> None:
    """A deleted child was a warning, but a damaged one stopped the whole tree (exit 2, its path twice
    in the message), and a child that never reached its first turn gave an error naming no file."""
    p = parent_pipeline("anthropic", tmp_path / "parent.cpsession")
    turns(p, 1, "p")
    for name in ("gone", "garbage", "good", "unborn", "idle"):
        c = p.fork(name, record=tmp_path / f"{name}.cpsession")
        if name == "unborn":  # the bytes of a child killed before its first turn reached the file
            header_only = (tmp_path / "unborn.cpsession").read_bytes()
        elif name != "idle":  # idle: closed before its first request, a tree member with 0 turns
            turns(c, 1, name)
        c.close()
    (tmp_path / "unborn.cpsession").write_bytes(header_only)
    turns(p, 1, "p2")
    p.close()
    (tmp_path / "gone.cpsession").unlink()
    (tmp_path / "garbage.cpsession").write_bytes(b"not a recording\n")
    res = CliRunner().invoke(app, ["forks", str(tmp_path / "parent.cpsession")])
    assert res.exit_code == 0, res.output
    assert "good.cpsession  (" in res.stdout and "garbage.cpsession  (" not in res.stdout
    assert "gone.cpsession not found" in res.stderr
    warned = [ln for ln in res.stderr.splitlines() if "garbage.cpsession" in ln]
    assert (
        len(warned) == 1 and warned[0].count("garbage.cpsession") == 1 and "left out of the tree" in warned[0]
    )
    assert any("unborn.cpsession" in ln and "holds no events" in ln for ln in res.stderr.splitlines())
    assert "idle.cpsession  (" in res.stdout and "made no model call" in res.stdout
    # Named on the command line, an unreadable child is an error: exit 2, the file named once.
    res = CliRunner().invoke(
        app, ["forks", str(tmp_path / "parent.cpsession"), str(tmp_path / "garbage.cpsession")]
    )
    assert res.exit_code == 2 and res.output.count("garbage.cpsession") == 1, res.output
    res = CliRunner().invoke(
        app, ["forks", str(tmp_path / "parent.cpsession"), str(tmp_path / "unborn.cpsession")]
    )
    assert res.exit_code == 2 and "unborn.cpsession holds no events" in res.output, res.output


def test_forks_of_a_wide_fan_out_stays_a_screenful(tmp_path: Path) -> None:
    p = parent_pipeline("anthropic", tmp_path / "parent.cpsession")
    turns(p, 1, "p")
    for k in range(60):
        c = p.fork(f"task {k}", record=tmp_path / f"k{k}.cpsession")
        turns(c, 1, f"k{k}")
        c.close()
    p.close()
    res = CliRunner().invoke(app, ["forks", str(tmp_path / "parent.cpsession")])
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert len(lines) < 100 and "... and 30 more sub-agents (--json lists each)" in res.stdout
    assert "60 sub-agents, 1 level deep; the shared prefix diverges in 0 of the 60 checked" in res.stdout
    rep = json.loads(CliRunner().invoke(app, ["forks", str(tmp_path / "parent.cpsession"), "--json"]).stdout)
    assert len(rep["children"]) == 60
    reads = sum(c["first_call_cache_read"] for c in rep["children"])
    assert f"first calls read {reads} tokens" in res.stdout and reads > 60 * 1000


def test_a_child_plans_its_parents_shadow_candidate_too(tmp_path: Path) -> None:
    """The README forks a pipeline made with shadow=: the child planned no candidate, so the shadow's
    running delta left out every turn the sub-agents made."""
    from engine.shadow import shadow_summary
    from engine.whatif import Overrides

    clock = iter(range(0, 1_000_000, 3))
    p = Pipeline(
        "claude-sonnet-4",
        record=tmp_path / "parent.cpsession",
        clock=lambda: next(clock),
        shadow=Overrides(gates={"drop_rounds": False}),
    )
    p.identity("You are a careful coding agent. " * 100)
    p.add_tool("bash", "Run a shell command", PARAMS)
    p.user("Refactor the header parser.")
    turns(p, 1, "p")
    child = p.fork("Find every caller of parse_header.", record=tmp_path / "child.cpsession")
    turns(child, 2, "c")
    child.close()
    p.close()
    events, _ = load_recording_events(tmp_path / "child.cpsession")
    cfg = next(e for e in events if e.get("k") == "shadow_config")
    assert cfg["overrides"]["gates"] == {"drop_rounds": False}
    s = shadow_summary(events)
    assert s is not None and [r["turn"] for r in s["turns"]] == [0, 1] and s["failed_turns"] == 0
    assert CliRunner().invoke(app, ["verify", str(tmp_path / "child.cpsession")]).exit_code == 0


def test_forks_reads_past_a_damaged_fork_event_and_names_a_damaged_link(tmp_path: Path) -> None:
    """A fork event whose record is not a path, or with no turn, was a TypeError / KeyError traceback."""
    p = parent_pipeline("anthropic", tmp_path / "parent.cpsession")
    turns(p, 1, "p")
    c = p.fork("task", record=tmp_path / "child.cpsession")
    turns(c, 1, "c")
    c.close()
    # Events the engine never writes, as a damaged or hand-edited journal may hold them.
    p.journal.append({"k": "fork", "session_id": p.session_id, "child": "x1", "record": 5})
    p.journal.append({"k": "fork", "session_id": p.session_id, "child": "x2", "record": "missing.cpsession"})
    p.close()
    res = CliRunner().invoke(app, ["forks", str(tmp_path / "parent.cpsession")])
    assert res.exit_code == 0 and res.exception is None, res.output
    assert "names 5 as the child's recording, not a path" in res.stderr
    assert "child.cpsession  (" in res.stdout
    bad = tmp_path / "bad.cpsession"
    q = Pipeline(
        "claude-sonnet-4",
        record=bad,
        links={"session_id": "b", "parent_session": p.session_id, "fork_turn": "soon"},
    )
    q.identity("You are terse.")
    q.user("hi")
    turns(q, 1, "q")
    q.close()
    res = CliRunner().invoke(app, ["forks", str(tmp_path / "parent.cpsession"), str(bad)])
    assert res.exit_code == 2 and "Traceback" not in res.output, res.output
    assert "events are not what the engine writes" in res.output and str(bad) in res.output


def test_validate_spawn_refuses_a_negative_shared_units() -> None:
    """shared_units=-1 sliced off the parent's last unit and reported "ok: ... first -1 unit(s)"."""
    a = {"system": "You are terse.", "messages": [{"role": "user", "content": "hi"}]}
    b = {"system": "You are terse.", "messages": [{"role": "user", "content": "yo"}]}
    with pytest.raises(ConfigError, match="shared_units must be a number of units >= 0, got -1"):
        validate_spawn(a, b, shared_units=-1)
    rep = validate_spawn(a, b, shared_units=50)  # more than the parent has: all of it, 2 units
    assert not rep.ok and rep.shared_units == 2 and rep.divergence is not None
