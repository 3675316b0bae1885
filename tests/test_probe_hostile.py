"""The probe against careless users and hostile same-uid clients (probe22): junk in the runtime directory,
dead connections piling up in the listener's backlog, an agent ended by SIGTERM. Real sockets, real files,
real agent processes; no timing assertions beyond generous bounds that only a broken probe reaches."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.probe.client import NoSuchProcess, ProbeClient, list_agents
from engine.probe.runtime_dir import ensure_runtime_dir, parse_target, pid_alive
from engine.probe.server import ProbeServer

HELLO = {"model": "claude-sonnet-4", "provider": "anthropic", "engine_version": "0.1.0"}


@pytest.fixture
def rtdir() -> Iterator[Path]:
    # A short path under /tmp: a Unix socket path must fit in 107 bytes.
    base = Path(tempfile.mkdtemp(prefix="cph-", dir="/tmp"))
    try:
        yield base / "rt"
    finally:
        shutil.rmtree(base, ignore_errors=True)


# ------------------------------------------------------------------ junk names in the runtime directory


@pytest.mark.parametrize("junk", ["99999999999999999999", "2147483648", "²", "1.²"])
def test_ps_skips_junk_names_that_are_no_pid_and_lists_the_agent(rtdir: Path, junk: str) -> None:
    ensure_runtime_dir(rtdir)
    (rtdir / f"{junk}.sock").write_text("junk")
    server = ProbeServer(HELLO, list, runtime_dir=rtdir)
    with server:
        agents = list_agents(rtdir)  # raised OverflowError / ValueError on such a name
    assert [a.pid for a in agents] == [os.getpid()]
    assert (rtdir / f"{junk}.sock").exists()  # not ours to delete: it is no socket


def test_attach_to_a_pid_no_process_can_have_says_no_such_process(rtdir: Path) -> None:
    ensure_runtime_dir(rtdir)
    for pid in (2**31, 10**20):
        assert pid_alive(pid) is False
        with pytest.raises(NoSuchProcess, match="no process with pid"):
            ProbeClient.connect(pid, runtime_dir=rtdir)
    assert parse_target("²") is None and parse_target("12.³") is None and parse_target("١٢") is None
    assert parse_target("12.3") == (12, 3)
