"""The descriptor a ProbeServer keeps in reserve (for telling a client it is out of descriptors) is held
only while the server listens: one made and never started, or dropped, holds no descriptor."""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.probe.server import ProbeServer

# (conftest.young_heap: each gc.collect() here scans only what the test made)
pytestmark = pytest.mark.usefixtures("young_heap")

HELLO = {"model": "claude-sonnet-4", "provider": "anthropic", "engine_version": "0.1.0"}


def _open_fds() -> set[int]:
    # Collect first: garbage an earlier test left (a writer, a socket) closes its descriptor when
    # collected, which would look like this test's count changing under it.
    gc.collect()
    return {int(x) for x in os.listdir("/proc/self/fd")}


@pytest.fixture
def runtime_dir(tmp_path: Path) -> Iterator[Path]:
    d = tmp_path / "rt"
    d.mkdir(mode=0o700)
    yield d


def test_a_server_never_started_holds_no_descriptor(runtime_dir: Path) -> None:
    before = _open_fds()
    servers = [ProbeServer(HELLO, list, runtime_dir=runtime_dir) for _ in range(20)]
    assert _open_fds() == before, "a server that was never started opened descriptors"
    for s in servers:
        s.close()  # never started: closes nothing it does not hold
    assert _open_fds() == before
    del servers
    gc.collect()
    assert _open_fds() == before


def test_the_reserve_is_held_while_listening_and_given_back(runtime_dir: Path) -> None:
    before = _open_fds()
    server = ProbeServer(HELLO, list, runtime_dir=runtime_dir)
    server.start()
    try:
        reserve = server._reserve_fd
        assert reserve is not None and reserve not in before
        assert os.readlink(f"/proc/self/fd/{reserve}") == os.devnull
    finally:
        server.close()
    assert server._reserve_fd is None
    assert _open_fds() <= before, "descriptors left open after close()"
