"""The proxy's recording files under many sessions and agents that go away (capture22's leftovers): each
session kept its `.cpsession` open for the life of the proxy, one descriptor each (a harness running
hundreds of tasks through one proxy ran out of them), and an agent that went away left a file without
its footer until the proxy stopped. Real proxy, real stand-in upstream, real files."""

from __future__ import annotations

import json
import os
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.capture.proxy.recording import Recorder
from engine.capture.proxy.server import ProxyServer
from engine.recording.cpsession import RecordingReader, RecordingWriter
from tests.capture.conftest import verify_ok
from tests.capture.standin import StandIn


def _call(url: str, task: str, then: str | None = None) -> None:
    msgs = [{"role": "user", "content": task}]
    if then is not None:
        msgs += [{"role": "assistant", "content": "ok"}, {"role": "user", "content": then}]
    body = json.dumps({"model": "gpt-4o", "messages": msgs}).encode()
    req = urllib.request.Request(url + "/v1/chat/completions", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        resp.read()


def _recorded(rec: Recorder, calls: int) -> None:
    """Wait until `calls` calls are journaled. The proxy hands an exchange to the recorder after its last
    byte went out, so the agent may have read its answer before: flush() alone could return too early
    (this test failed now and then on a loaded machine)."""
    deadline = time.monotonic() + 30
    while sum(info.calls for info, _ in rec.sessions.values()) < calls and time.monotonic() < deadline:
        rec.flush(1)
        time.sleep(0.01)
    assert rec.flush(30)


def _open_files(d: Path) -> int:
    """Descriptors of this process open on files in `d`."""
    n = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}").startswith(str(d)):
                n += 1
        except OSError:
            pass
    return n


@pytest.fixture
def proxy_with(standin: StandIn, tmp_path: Path, rtdir: Path) -> Iterator[tuple[ProxyServer, Recorder, Path]]:
    made: list[tuple[ProxyServer, Recorder]] = []

    def make(**kw: float) -> tuple[ProxyServer, Recorder, Path]:
        d = tmp_path / f"rec{len(made)}"
        rec = Recorder(d, serve=False, **kw)  # type: ignore[arg-type]
        ups = {"anthropic": standin.url, "openai": standin.url, "deepseek": standin.url}
        server = ProxyServer(ups, rec).start()
        made.append((server, rec))
        return server, rec, d

    yield make  # type: ignore[misc]
    for server, rec in made:
        server.stop()
        rec.close()


def test_many_sessions_hold_a_bounded_number_of_recording_files(proxy_with) -> None:  # type: ignore[no-untyped-def]
    """Old proxy: 40 sessions, 40 descriptors on their files until the proxy stopped."""
    server, rec, d = proxy_with(max_open=8)
    for i in range(40):
        _call(server.url, f"task {i}")
    _recorded(rec, 40)
    assert _open_files(d) <= 8
    # every session goes on where it left off, parked or not: its second call appends to its file
    for i in range(40):
        _call(server.url, f"task {i}", then="next")
    _recorded(rec, 80)
    assert _open_files(d) <= 8
    server.stop()
    rec.close()
    paths = [info.path for info, _ in rec.sessions.values()]
    assert len(paths) == 40
    for path in paths:
        assert verify_ok(path) == 2


def test_by_default_a_proxy_holds_at_most_32_recording_files(proxy_with) -> None:  # type: ignore[no-untyped-def]
    """The default (recording.MAX_OPEN_RECORDINGS, with the figures it was chosen by): 40 sessions held
    40 files open until the 64th; at 32, descriptors stay for the agents' connections."""
    server, rec, d = proxy_with()
    for i in range(40):
        _call(server.url, f"default task {i}")
    _recorded(rec, 40)
    assert _open_files(d) == 32


def test_an_agent_gone_quiet_leaves_a_finished_file_while_the_proxy_runs(proxy_with) -> None:  # type: ignore[no-untyped-def]
    """Old proxy: the file had no footer and stayed open until the proxy stopped (a reader had to rebuild
    its index, verify called it not closed, a descriptor was held for good)."""
    server, rec, d = proxy_with(idle_park=0.3)
    _call(server.url, "quiet task")
    _recorded(rec, 1)
    (path,) = [info.path for info, _ in rec.sessions.values()]
    deadline = time.monotonic() + 30  # parked after 0.3 s idle; generous for a loaded machine
    while _open_files(d) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _open_files(d) == 0
    with RecordingReader.open(path) as r:
        assert r.finished and r.damage is None and r.turn_count == 1
    assert verify_ok(path) == 1
    # the agent comes back: the same file goes on
    _call(server.url, "quiet task", then="again")
    _recorded(rec, 2)
    server.stop()
    rec.close()
    assert [info.path for info, _ in rec.sessions.values()] == [path]
    assert verify_ok(path) == 2


def test_a_parked_file_replaced_meanwhile_is_left_alone_and_says_why(tmp_path: Path) -> None:
    w = RecordingWriter(tmp_path / "a.cpsession", {"model": "m"})
    w.append({"k": "turn", "turn": 1, "trace": {}})
    assert w.park() and w.parked
    kept = (tmp_path / "a.cpsession").read_bytes()
    (tmp_path / "a.cpsession").rename(tmp_path / "moved.cpsession")
    (tmp_path / "a.cpsession").write_bytes(b"someone else's")
    with pytest.raises(Exception, match="replaced or moved while the writer was idle.*keeps every turn"):
        w.append({"k": "turn", "turn": 2, "trace": {}})
    w.close()
    assert (tmp_path / "a.cpsession").read_bytes() == b"someone else's"
    assert (tmp_path / "moved.cpsession").read_bytes() == kept
    with RecordingReader.open(tmp_path / "moved.cpsession") as r:
        assert r.finished and r.turn_numbers() == [1]


def test_a_parked_writer_reopens_and_a_follower_reads_on(tmp_path: Path) -> None:
    path = tmp_path / "b.cpsession"
    w = RecordingWriter(path, {"model": "m"})
    w.append({"k": "turn", "turn": 1, "trace": {"a": 1}})
    follower = RecordingReader.open(path)
    follower.refresh()
    assert w.park()
    assert follower.refresh() == [] and follower.finished
    w.append({"k": "turn", "turn": 2, "trace": {"a": 2}})
    w.flush()
    assert [e["turn"] for e in follower.refresh() if e["k"] == "turn"] == [2]
    w.close()
    follower.close()
    with RecordingReader.open(path) as r:
        assert r.finished and r.turn_numbers() == [1, 2]
        assert [e["trace"]["a"] for e in r.events() if e["k"] == "turn"] == [1, 2]


def test_legacy_completions_calls_are_said_to_be_unrecorded_once(
    proxied, caplog: pytest.LogCaptureFixture  # type: ignore[no-untyped-def]
) -> None:
    """Old proxy: `/v1/completions` (OpenAI's legacy text completions) was forwarded and nothing said it
    was not recorded; the user found a recording with fewer calls than the agent made, or none."""
    import openai

    client = openai.OpenAI(base_url=proxied.url + "/v1", api_key="sk-test", max_retries=0)
    with caplog.at_level("WARNING", logger="contextpipe.proxy"):
        for _ in range(3):
            try:
                client.completions.create(model="gpt-3.5-turbo-instruct", prompt="Say hi")
            except openai.APIError:
                pass  # whatever the stand-in answers: the call was forwarded
    assert proxied.recorder.flush(30)
    said = [n for n in proxied.recorder.skipped if "/v1/completions" in n]
    assert len(said) == 1, proxied.recorder.skipped
    assert "legacy Completions API" in said[0] and "forwarded but not recorded" in said[0]
    warned = [r for r in caplog.records if "/v1/completions" in r.getMessage()]
    assert len(warned) == 1
    assert not proxied.recorder.sessions
    # chat completions next to it are recorded as before, and not said to be unrecorded
    client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
    assert proxied.recorder.flush(30)
    assert len(proxied.recorder.sessions) == 1
    assert [n for n in proxied.recorder.skipped if "completions" in n] == said


def test_an_answered_call_is_the_recorders_before_the_agent_has_it(standin: StandIn, tmp_path: Path) -> None:
    """flush() after the agent has its answer waits for that call. The exchange was handed to the recorder
    only after the response's end went out: an agent (or a test) that had read its answer could find the
    recorder idle, the call not journaled yet. A hook slow to run (an event loop under load) shows it."""
    rec = Recorder(tmp_path / "r", serve=False)

    def slow(ex: Any) -> None:
        time.sleep(0.3)
        rec(ex)

    server = ProxyServer({"openai": standin.url}, slow).start()
    try:
        _call(server.url, "prompt task")
        assert rec.flush(30)
        assert [info.calls for info, _ in rec.sessions.values()] == [1]
    finally:
        server.stop()
        rec.close()
