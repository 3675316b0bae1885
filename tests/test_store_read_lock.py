"""A get that only reads takes no write lock: it is served while another process holds a long write.

context_get(..., advance_turn=False) writes nothing when there is nothing new to write: a fresh window
(sticky=False) is a look at the store, and a sticky window that appended nothing is the lane's recorded
window again. Before, every get began a write transaction to record its window, so a reader's get
waited out another process's batch (an import) and failed with StoreLockedError after its busy timeout.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.store import ContextStore, Kind, StoreLockedError

REPO = Path(__file__).resolve().parents[1]


def _fill(path: Path) -> None:
    with ContextStore(path) as s:
        s.add("You are a careful agent.", Kind.SYSTEM, pin=True)
        for i in range(30):
            s.add(f"step {i}: " + "parse_file load cache_key " * 20, Kind.TOOL_RESULT)
        s.context_get(100_000)  # the lane's recorded sticky window


@pytest.fixture()
def busy_writer(tmp_path: Path) -> Iterator[tuple[Path, subprocess.Popen[str]]]:
    """Another process inside a ContextStore.batch() (as `ctx import` runs), holding the write lock
    until its stdin closes; then it commits one more item."""
    path = tmp_path / "shared.db"
    _fill(path)
    code = textwrap.dedent(
        f"""
        import sys
        from engine.store import ContextStore, Kind
        s = ContextStore({str(path)!r})
        with s.batch():
            s.add("written by the importer", Kind.TOOL_RESULT)
            print("locked", flush=True)
            sys.stdin.read()
        s.close()
        print("committed", flush=True)
        """
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
        yield path, proc
    finally:
        if proc.poll() is None:
            assert proc.stdin is not None
            proc.stdin.close()
            proc.wait(timeout=20)


def test_reads_are_served_beside_another_process_batch(
    busy_writer: tuple[Path, subprocess.Popen[str]],
) -> None:
    path, proc = busy_writer
    # The writer holds its lock until the test lets it commit (below): a get that waited for the lock
    # would wait out the 20 s busy timeout and fail with StoreLockedError, so a get that returns did not
    # wait (no clock bound: a loaded machine only makes the reads slower, never a wait).
    with ContextStore(path, timeout_s=20.0) as reader:
        recorded = reader.windows(reader.turn - 1)[-1]
        rows_before = (
            len(reader.recorded_turns()),
            reader.state.conn.execute("SELECT count(*) FROM windows").fetchone()[0],
        )
        fresh = reader.context_get(100_000, sticky=False, advance_turn=False)
        same = reader.context_get(100_000, advance_turn=False)  # sticky, nothing appended
        assert fresh.entries and same.mode == "sticky"
        assert same.text_hash == recorded["text_hash"]  # the lane's window, not a new one
        assert (
            len(reader.recorded_turns()),
            reader.state.conn.execute("SELECT count(*) FROM windows").fetchone()[0],
        ) == rows_before
        # A get that must write (the turn moves on) still waits for the lock and says so. (It waits the
        # whole busy timeout: 1 s here, not the 20 s above, which the suite paid on every run.)
        conn = reader.state.conn
        conn.execute("PRAGMA busy_timeout = 1000")
        t0 = time.monotonic()
        with pytest.raises(StoreLockedError):
            reader.context_get(100_000)
        assert time.monotonic() - t0 >= 0.9  # it waited for the lock
        conn.execute("PRAGMA busy_timeout = 20000")
        # The importer commits; the next sticky get appends its item to the lane's window and records it.
        assert proc.stdin is not None
        proc.stdin.close()
        assert proc.stdout is not None and proc.stdout.readline().strip() == "committed"
        proc.wait(timeout=20)
        after = reader.context_get(100_000, advance_turn=False)
        assert after.mode == "sticky"
        assert after.entries[: len(same.entries)] == same.entries
        assert reader.get(after.ids[-1]).body == "written by the importer"
        assert reader.state.conn.execute("SELECT count(*) FROM windows").fetchone()[0] == rows_before[1] + 1


def test_record_binding_records_the_fresh_window_a_read_served(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    _fill(path)
    with ContextStore(path) as s:
        w = s.context_get(900, sticky=False, advance_turn=False, query="cache_key")
        s.record_binding("memory", 7)
        bound = s.bound_window("memory", 7)
        assert bound is not None and bound["text_hash"] == w.text_hash and bound["mode"] == "fresh"


step = st.one_of(
    st.tuples(st.just("add"), st.integers(min_value=1, max_value=40)),
    st.tuples(st.just("add"), st.integers(min_value=1, max_value=40)),
    st.tuples(st.just("get"), st.sampled_from([300, 900])),
    st.tuples(st.just("read"), st.sampled_from([300, 900])),
    st.tuples(st.just("peek"), st.sampled_from([300, 900])),
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(step, min_size=6, max_size=30))
def test_reads_leave_the_sticky_windows_as_they_were(steps: list[tuple[str, int]]) -> None:
    """A store that also serves read-only gets (fresh looks, and sticky gets right after a get, when
    nothing was appended) serves the same windows on its agent's gets as one that never did."""
    with tempfile.TemporaryDirectory() as tmp:
        a = ContextStore(Path(tmp) / "a.db")
        b = ContextStore(Path(tmp) / "b.db")
        for s in (a, b):
            s.add("You are a careful agent.", Kind.SYSTEM, pin=True)
        just_got: set[int] = set()
        for op, n in steps:
            if op == "add":
                for s in (a, b):
                    s.add(f"{n} " + "alpha beta parse_file " * n, Kind.TOOL_RESULT)
                just_got.clear()
            elif op == "get":
                wa, wb = a.context_get(n), b.context_get(n)
                assert (wa.mode, wa.text_hash, wa.ids) == (wb.mode, wb.text_hash, wb.ids)
                just_got.add(n)
            elif op == "read":
                a.context_get(n, sticky=False, advance_turn=False, query="parse_file")
            elif op == "peek" and n in just_got:
                w = a.context_get(n, advance_turn=False)
                assert w.mode == "sticky" and w.text_hash == b.state.last[w.lane].text_hash
        assert (
            a.state.conn.execute("SELECT count(*) FROM windows").fetchone()
            == b.state.conn.execute("SELECT count(*) FROM windows").fetchone()
        )
        a.close()
        b.close()


def test_ctx_get_fresh_is_served_during_another_process_import(
    busy_writer: tuple[Path, subprocess.Popen[str]],
) -> None:
    import json

    from typer.testing import CliRunner

    from inspector.ctx_cli import ctx_app

    path, _proc = busy_writer
    r = CliRunner().invoke(ctx_app, ["get", "--db", str(path), "--budget", "3000", "--fresh", "--json"])
    # No wait for the writer: the writer holds its lock until the test lets it go, so a get that waited
    # would wait out the store's whole busy timeout (5 s) and then fail with StoreLockedError (exit code
    # 1). (A wall-clock bound beside it, 4.5 s, left a loaded host only 0.5 s of room under the 5 s.)
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["mode"] == "fresh"
    # The sticky get records its window: it waits for the writer, and its error says how to look now.
    r = CliRunner().invoke(ctx_app, ["get", "--db", str(path), "--budget", "3000"])
    assert r.exit_code == 1 and "is locked" in r.output and "ctx get --fresh" in r.output
