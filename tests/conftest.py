"""Shared fixtures. Real trajectories are read from ../shared/trajectories (or $CONTEXTPIPE_TRAJECTORIES),
never copied into the repository; tests that need them skip, saying where they looked."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from tests.support import bytecode, phoenix_server, suite_freeze
from tests.support.probe_dirs import short_runtime_dir

# Property tests check behaviour, not speed: on a shared 2-core machine input generation and examples run
# several times slower under load, and Hypothesis' timing checks (the per-example deadline, the "input
# generation is slow" health check) then fail tests whose behaviour is fine. Tests that set their own
# `@settings` keep every field they name and inherit these two.
settings.register_profile("contextpipe", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("contextpipe")


# The project's bytecode written before any test starts a process (tests/support/bytecode.py): under
# PYTHONDONTWRITEBYTECODE every child compiled the modules it imported from source.
def pytest_sessionstart(session: pytest.Session) -> None:
    bytecode.compile_project()


# The suite's heap frozen after collection, stepping aside for the app's own freeze and thaw
# (tests/support/suite_freeze.py): its full collections no longer rescan every imported module.
def pytest_collectstart(collector: pytest.Collector) -> None:
    suite_freeze.collection_starts()


def pytest_collection_finish(session: pytest.Session) -> None:
    suite_freeze.install()
    suite_freeze.collection_ends()
    # Phoenix's ~18 s CPU start-up on the other core while the tests before its own run
    # (tests/support/phoenix_server.py).
    if not session.config.option.collectonly:
        phoenix_server.start_early([item.path for item in session.items])


def pytest_sessionfinish(session: pytest.Session) -> None:
    phoenix_server.stop_early()


def pytest_runtest_setup(item: pytest.Item) -> None:
    suite_freeze.before_test(item.path)


TRAJECTORIES = Path(
    os.environ.get("CONTEXTPIPE_TRAJECTORIES")
    or Path(__file__).resolve().parents[2] / "shared" / "trajectories"
)
TRAJECTORY_SUFFIXES = (".json", ".traj")


def trajectory_files() -> list[Path]:
    """Every trajectory file under TRAJECTORIES (one folder per agent format); [] when absent."""
    if not TRAJECTORIES.is_dir():
        return []
    return sorted(
        p
        for d in sorted(TRAJECTORIES.iterdir())
        if d.is_dir()
        for p in d.iterdir()
        if p.is_file() and p.suffix in TRAJECTORY_SUFFIXES
    )


@pytest.fixture(scope="session")
def trajectories_dir() -> Path:
    if not trajectory_files():
        pytest.skip(
            f"real trajectories not found at {TRAJECTORIES}: put the shared trajectories folder next to the "
            "repository or set CONTEXTPIPE_TRAJECTORIES"
        )
    return TRAJECTORIES


@pytest.fixture
def rtdir(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A probe runtime directory under a short new directory in /tmp (see tests.support.probe_dirs), with
    XDG_RUNTIME_DIR pointing at that directory for this test alone."""
    with short_runtime_dir() as d:
        monkeypatch.setenv("XDG_RUNTIME_DIR", str(d.parent))
        yield d


@pytest.fixture
def young_heap() -> Iterator[None]:
    """One full collection, then everything older than the test frozen (gc.freeze) until it ends, so the
    test's own gc.collect() calls scan only what it made. For tests that collect to count descriptors: in
    the full suite's process each full collection scans ~1.2M objects of earlier imports (0.8 s of CPU),
    and tests/test_probe_reserve_fd.py's seven took 5.7 s of CPU (31 s wall in a loaded run) against
    0.23 s alone. The first collection still frees what earlier tests left waiting for the collector.
    Nothing is frozen where something already is (an app's start-up freeze, inspector/startup_gc.py):
    unfreezing at the end would thaw that too. Not for a test that runs the app (its thaw needs an empty
    permanent generation)."""
    gc.collect()
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


@contextmanager
def demo_agent(tmp_path: Path, turns: int, delay: float) -> Iterator[subprocess.Popen[bytes]]:
    """A real demo agent process serving its probe (and recording into tmp_path); waited for on exit."""
    child = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "inspector.demo_agent",
            "--turns",
            str(turns),
            "--delay",
            str(delay),
            "--serve",
            "--record",
            str(tmp_path / "live.cpsession"),
        ],
        cwd=Path(__file__).resolve().parents[1],
    )
    try:
        yield child
    finally:
        child.wait(30)
