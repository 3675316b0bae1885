"""A long-running proxy's memory over many conversations (a harness running task after task through one
proxy). Each session's recording keeps a zstd stream compressor while it is written (~2.5 MB of RSS at
the recordings' level), and a parked recording (its file finished and closed when idle or when more than
max_open sessions are active) kept it too: the proxy grew ~2.9 MB with every conversation it had ever
seen (206 MB over 72 sessions of 5 calls, measured with `cp-inspect proxy`). Parked, a recording lets
its compressor go; its next chunk, if its agent comes back, starts a new stream. Real openai SDK through
the proxy, against the stand-in; the proxy's own process's RSS."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from engine.capture.proxy.recording import Recorder
from engine.capture.proxy.server import ProxyServer
from tests.capture.conftest import events_of, verify_ok
from tests.capture.standin import StandIn

SESSIONS = 36


def _rss_kb() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS")


@pytest.fixture
def small_proxy(standin: StandIn, tmp_path: Path, rtdir: Path) -> Iterator[tuple[ProxyServer, Recorder]]:
    rec = Recorder(tmp_path / "rec", serve=False, max_open=2)
    server = ProxyServer({"openai": standin.url}, rec).start()
    yield server, rec
    server.stop()
    rec.close()


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads RSS from /proc")
def test_parked_sessions_do_not_keep_their_compressors(
    small_proxy: tuple[ProxyServer, Recorder], standin: StandIn
) -> None:
    server, rec = small_proxy
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="k", max_retries=0)

    def session(i: int) -> None:
        msgs = [{"role": "system", "content": f"You are agent {i}."}, {"role": "user", "content": f"Task {i}."}]
        client.chat.completions.create(model="gpt-4o", messages=msgs)  # type: ignore[arg-type]

    standin.script = []
    for i in range(4):  # warm up: the first sessions' imports, caches and the proxy's own buffers
        session(i)
    assert rec.flush(30)
    gc.collect()
    before = _rss_kb()
    for i in range(4, 4 + SESSIONS):
        session(i)
    assert rec.flush(30)
    gc.collect()
    grown_mb = (_rss_kb() - before) / 1024
    # kept, the compressors alone were ~2.5 MB a session (~90 MB here); without, the rest of a session
    # (its engine state, the shadow plan's caches) is ~0.35 MB
    assert grown_mb < SESSIONS * 1.0, f"{grown_mb:.0f} MB for {SESSIONS} sessions"
    # a parked session whose agent comes back goes on in the same recording, which reads and verifies
    msgs = [{"role": "system", "content": "You are agent 5."}, {"role": "user", "content": "Task 5."},
            {"role": "assistant", "content": "Hello from the stand-in."}, {"role": "user", "content": "More."}]
    client.chat.completions.create(model="gpt-4o", messages=msgs)  # type: ignore[arg-type]
    assert rec.flush(30)
    server.stop()
    rec.close()
    path = next(info.path for info, _ in rec.sessions.values() if info.number == 6)
    assert [e["turn"] for e in events_of(path) if e["k"] == "turn"] == [0, 1]
    assert verify_ok(path) == 2


def test_past_max_kept_the_oldest_sessions_state_is_let_go(standin: StandIn, tmp_path: Path, rtdir: Path) -> None:
    """Every conversation's engine state stayed in the proxy for its whole life (~0.35 MB each once its
    file was parked): past max_kept, the least recently active session's recording is finished and its
    state dropped; its agent calling again opens a new session that says which one it continues."""
    rec = Recorder(tmp_path / "rec", serve=True, max_open=2, max_kept=3)
    server = ProxyServer({"openai": standin.url}, rec).start()
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="k", max_retries=0)
    standin.script = []

    def call(i: int, more: bool = False) -> None:
        msgs = [{"role": "system", "content": f"You are agent {i}."}, {"role": "user", "content": f"Task {i}."}]
        if more:
            msgs += [{"role": "assistant", "content": "Hello from the stand-in."}, {"role": "user", "content": "More."}]
        client.chat.completions.create(model="gpt-4o", messages=msgs)  # type: ignore[arg-type]

    try:
        for i in range(6):
            call(i)
        assert rec.flush(30)
        assert sorted(info.number for info, _ in rec.sessions.values()) == [4, 5, 6]
        assert [info.number for info in rec.let_go] == [1, 2, 3]
        assert len([tap for _, tap in rec._kept.values() if tap.pipe is not None]) == 3
        call(0, more=True)  # session 1's agent comes back
        assert rec.flush(30)
    finally:
        server.stop()
        rec.close()
    (back,) = [info for info, _ in rec.sessions.values() if info.number == 7]
    assert any("continues session 1 " in n for n in back.notes), back.notes
    for info in [*rec.let_go, *(i for i, _ in rec.sessions.values())]:
        assert verify_ok(info.path) >= 1, info.path  # every recording finished, readable, verified
    assert [e["turn"] for e in events_of(back.path) if e["k"] == "turn"] == [0]
