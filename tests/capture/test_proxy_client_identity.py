"""A standalone proxy's conversations in `ps` and `top`: each under the local process that made its calls
(the peer of its connection, engine/capture/proxy/peer.py) and the opening of its first message, or
"unknown agent" when the proxy cannot tell; not all under the proxy's own command line, as before."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

from typer.testing import CliRunner

from engine.capture.proxy.exchange import Exchange
from engine.capture.proxy.peer import _diag_inode, _table_inode, peer_process
from engine.capture.proxy.recording import client_fields
from engine.capture.proxy.routes import match, opening_text
from engine.probe.client import AgentInfo, list_agents
from inspector.cli import app
from tests.capture.conftest import Proxied

# An agent of its own: one call through the proxy on a kept-alive connection, then it waits (as an SDK's
# connection pool keeps the connection) until the test is done.
AGENT = """
import http.client, json, sys, time
host, port = sys.argv[1], int(sys.argv[2])
conn = http.client.HTTPConnection(host, port, timeout=30)
body = {"model": "claude-sonnet-4", "max_tokens": 64,
        "messages": [{"role": "user", "content": "Fix the   parser bug in tokens.py, then run the tests"}]}
conn.request("POST", "/v1/messages", json.dumps(body), {"content-type": "application/json", "x-api-key": "k"})
conn.getresponse().read()
print("called", flush=True)
time.sleep(60)
"""


def _the_conversation(proxied: Proxied) -> AgentInfo:
    """The proxy's one conversation as `ps` lists it, once its recording has caught up."""
    assert proxied.recorder.flush(60)
    give_up = time.monotonic() + 20
    live: list[AgentInfo] = []
    while not live and time.monotonic() < give_up:
        live = [a for a in list_agents() if a.session is not None]
        time.sleep(0.05)
    assert len(live) == 1
    return live[0]


def test_a_conversation_is_shown_as_the_process_that_made_its_calls(proxied: Proxied, tmp_path: Path) -> None:
    host, port = proxied.url.removeprefix("http://").rsplit(":", 1)
    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    agent = subprocess.Popen(
        [sys.executable, str(script), host, port, "--task", "parser"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert agent.stdout is not None and agent.stdout.readline().strip() == "called"
        info = _the_conversation(proxied)
        assert info.client == f"pid {agent.pid}"
        assert info.command == f"{sys.executable} {script} {host} {port} --task parser"
        assert info.opening == "Fix the parser bug in tokens.py, then run the tests"
        assert (
            info.label == f"\u201cFix the parser bug in tokens.py, then run the tests\u201d · {info.command}"
        )
        out = CliRunner().invoke(app, ["ps"])
        assert out.exit_code == 0, out.output
        row = next(line for line in out.output.splitlines() if line.strip().startswith(info.target))
        assert "--task parser" in row and "Fix the parser bug" in row and "cp-inspect proxy" not in row
        got = json.loads(CliRunner().invoke(app, ["ps", "--json"]).output)
        assert got[0]["client"] == f"pid {agent.pid}" and got[0]["opening"].startswith("Fix the parser bug")
    finally:
        agent.kill()
        agent.wait()


def test_an_unknown_client_is_said_unknown_with_the_opening() -> None:
    body = {
        "model": "claude-sonnet-4",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Hello"}]}],
    }
    route = match("/v1/messages", "", {}, {"anthropic": "http://upstream"}, "POST")
    ex = Exchange(route, b"{}", 0.0)  # no addresses known (a transport that does not say)
    assert client_fields(ex, "anthropic", body) == {"client": "unknown", "opening": "Hello"}
    ex.peer, ex.local = ("10.255.255.1", 4321), ("127.0.0.1", 8080)  # not a connection this host holds
    assert client_fields(ex, "anthropic", body)["client"] == "unknown"
    info = AgentInfo(
        7,
        "python -m inspector.cli proxy --port 8080",
        "m",
        "anthropic",
        3,
        Path("x"),
        session=2,
        client="unknown",
        opening="Hello",
    )
    assert info.label == "\u201cHello\u201d · unknown agent"
    own = AgentInfo(8, "python agent.py", "m", "anthropic", 3, Path("y"))  # an agent's own probe
    assert own.label == "python agent.py"


def test_the_opening_is_one_line_and_short() -> None:
    long = "word " * 40
    assert (
        opening_text(
            "openai", {"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": long}]}
        )
        == ("word " * 12)[:59] + "…"
    )
    assert opening_text("anthropic", {"messages": []}) == ""
    assert opening_text("anthropic", {"messages": "not a list"}) == ""


def test_the_peer_of_a_local_connection_ipv4_and_mapped() -> None:
    for family, bind, dial in (
        (socket.AF_INET, "127.0.0.1", "127.0.0.1"),
        (socket.AF_INET6, "::", "127.0.0.1"),
    ):
        try:
            srv = socket.socket(family)
            srv.bind((bind, 0))
        except OSError:
            continue  # no IPv6 here
        srv.listen()
        port = srv.getsockname()[1]
        child = subprocess.Popen(
            [
                sys.executable,
                "-c",
                f"import socket,time; s=socket.create_connection(({dial!r},{port})); time.sleep(30)",
            ]
        )
        try:
            conn, addr = srv.accept()
            found = peer_process(addr[:2], conn.getsockname()[:2])
            assert found is not None and found.pid == child.pid and found.argv[0] == sys.executable
            # The client socket's inode asked of the kernel (sock_diag.py) is the one /proc/net/tcp holds.
            client, server = addr[:2], conn.getsockname()[:2]
            inode = _table_inode(client, server, "/proc")
            assert inode is not None and _diag_inode(client, server) == inode
            assert _diag_inode((client[0], 1), server) is None  # no such socket: none, not a guess
            conn.close()
        finally:
            child.kill()
            child.wait()
            srv.close()


async def test_top_shows_each_conversation_by_its_opening_and_agent(
    proxied: Proxied, tmp_path: Path, rtdir: Path
) -> None:
    """Two agents' conversations through one proxy: top's COMMAND says which is which (the filter finds
    a conversation by its task), where both rows read the proxy's command line before."""
    import asyncio

    from engine.probe.watch import FleetWatcher
    from inspector.top_app import TopApp
    from panels.fleet_table import FleetTable

    host, port = proxied.url.removeprefix("http://").rsplit(":", 1)
    script = tmp_path / "agent.py"
    script.write_text(AGENT.replace("Fix the   parser bug in tokens.py, then run the tests", "TASK"))
    agents = []
    for task in ("Write the release notes", "Refactor the tokenizer"):
        patched = tmp_path / f"agent_{len(agents)}.py"
        patched.write_text(script.read_text().replace('"TASK"', repr(task)))
        agents.append(
            subprocess.Popen([sys.executable, str(patched), host, port], stdout=subprocess.PIPE, text=True)
        )
    try:
        for a in agents:
            assert a.stdout is not None and a.stdout.readline().strip() == "called"
        assert proxied.recorder.flush(60)
        watcher = FleetWatcher().start()  # (the proxy's sockets are in rtdir: XDG_RUNTIME_DIR)
        try:
            app = TopApp(watcher, refresh_s=0.1)
            async with app.run_test(size=(200, 20)) as pilot:
                table = app.query_one(FleetTable)
                give_up = time.monotonic() + 30
                while table.row_count < 2 and time.monotonic() < give_up:
                    await pilot.pause(0.05)
                commands = sorted(str(table.get_cell_at((r, len(table.columns) - 1))) for r in range(2))
                # (the agent's command after it, cut to the column: the path of the script is long here)
                assert commands[0].startswith(f"\u201cRefactor the tokenizer\u201d · {sys.executable}")
                assert commands[1].startswith(f"\u201cWrite the release notes\u201d · {sys.executable}")
                await pilot.press("slash")
                for key in "release":
                    await pilot.press(key)
                await asyncio.sleep(0.3)
                await pilot.pause()
                assert table.row_count == 1 and "release notes" in str(
                    table.get_cell_at((0, len(table.columns) - 1))
                )
        finally:
            watcher.stop()
    finally:
        for a in agents:
            a.kill()
            a.wait()


ONE_SHOT = """
import http.client, json, sys
conn = http.client.HTTPConnection(sys.argv[1], int(sys.argv[2]), timeout=30)
body = {"model": "gpt-4o-slow", "stream": True, "messages": [{"role": "user", "content": "A one-shot question"}]}
conn.request("POST", "/v1/chat/completions", json.dumps(body),
             {"content-type": "application/json", "connection": "close", "authorization": "Bearer k"})
conn.getresponse().read()
conn.close()
"""


def test_a_client_that_closes_after_one_call_is_still_known(proxied: Proxied, tmp_path: Path) -> None:
    """Looked up when the call arrives (the agent waits with its connection open), not when the recorder
    gets to it: a client that sent one call and closed was "unknown agent" by then. (A streamed call whose
    events come 0.2 s apart, as a model's do: a stand-in that answers within the ~6 ms a look-up takes
    is gone before it, and is said "unknown", honestly.)"""
    host, port = proxied.url.removeprefix("http://").rsplit(":", 1)
    script = tmp_path / "one_shot.py"
    script.write_text(ONE_SHOT)
    agent = subprocess.run([sys.executable, str(script), host, port, "--once"], timeout=60)
    assert agent.returncode == 0
    info = _the_conversation(proxied)
    assert info.client is not None and info.client.startswith("pid ")
    assert info.command == f"{sys.executable} {script} {host} {port} --once"
    assert info.label.startswith("\u201cA one-shot question\u201d · ")


def test_a_call_answered_at_once_is_still_known(proxied: Proxied, tmp_path: Path) -> None:
    """A call the upstream answers in a few ms (the stand-in's non-streamed answer; a cached or local
    model's) from a client that closes and exits at once: the look-up of its process reads every process's
    descriptors (5-20 ms at load) and reached the client's after it had closed its socket: "unknown agent"
    for 6 of 6 such clients at load 7. The answer's last bytes now wait for the look-up (a call longer
    than the look-up never waits), so the client is still there to be found; several clients in turn, as
    each connection is looked up afresh."""
    host, port = proxied.url.removeprefix("http://").rsplit(":", 1)
    script = tmp_path / "quick.py"
    script.write_text(
        ONE_SHOT.replace('"gpt-4o-slow", "stream": True', '"gpt-4o"').replace(
            '"A one-shot question"', '"Quick " + sys.argv[3]'
        )
    )
    for n in range(3):
        started = time.monotonic()
        agent = subprocess.run([sys.executable, str(script), host, port, f"--n={n}"], timeout=60)
        assert agent.returncode == 0
        assert time.monotonic() - started < 30
    assert proxied.recorder.flush(60)
    give_up = time.monotonic() + 20
    live: list[AgentInfo] = []
    while len(live) < 3 and time.monotonic() < give_up:
        live = sorted((a for a in list_agents() if a.session is not None), key=lambda a: a.session or 0)
        time.sleep(0.05)
    assert [a.command for a in live] == [f"{sys.executable} {script} {host} {port} --n={n}" for n in range(3)]
    assert all(a.client is not None and a.client.startswith("pid ") for a in live)
