"""`cp-inspect top` driven the way a person uses it (Pilot), on 20 real demo agents serving their probes
in a private runtime directory: rows appear live, sort and filter work, an agent that ends is marked,
Enter picks the agent to attach to."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from textual import events
from textual.widgets import Input, Static

from engine.fleet import AgentStats
from engine.probe.watch import FleetWatcher
from inspector.top_app import TopApp
from panels.fleet_table import FleetTable

AGENTS = 20


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[tuple[Path, list[subprocess.Popen[bytes]]]]:
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    env = {**os.environ, "XDG_RUNTIME_DIR": str(runtime)}
    children = [
        subprocess.Popen([sys.executable, "-m", "inspector.demo_agent", "--turns", "400", "--delay",
                          str(0.6 + 0.05 * i), "--serve"], env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
        for i in range(AGENTS)
    ]
    try:
        yield runtime / "contextpipe", children
    finally:
        for c in children:
            c.kill()
        for c in children:
            c.wait(10)


def _column(table: FleetTable, key: str, conv: type) -> list:  # type: ignore[type-arg]
    """A column's values in display order (the table is refreshed in one go, so it is consistent)."""
    index = [k.value for k in table.columns].index(key)
    return [conv(str(table.get_row_at(i)[index]).rstrip("+")) for i in range(table.row_count)]


async def _until(pilot: object, check: object, timeout: float = 300.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out waiting for the table"
        await asyncio.sleep(0.25)


async def test_top_follows_twenty_live_agents(fleet: tuple[Path, list[subprocess.Popen[bytes]]]) -> None:
    runtime, children = fleet
    watcher = FleetWatcher(runtime).start()
    app = TopApp(watcher, refresh_s=0.2)
    try:
        async with app.run_test(size=(140, 40)) as pilot:
            table = app.query_one(FleetTable)
            await _until(pilot, lambda: table.row_count == AGENTS and all(
                a.turns >= 1 for a in watcher.snapshot()))
            await pilot.pause()
            # sorted by cost, most expensive first (read from the cells, as the person sees them)
            costs = _column(table, "cost", float)
            assert costs == sorted(costs, reverse=True)
            assert set(_column(table, "model", str)) == {"claude-sonnet-4"}
            # `s` moves the sort to the next column (alerts), `r` reverses it
            await pilot.press("s")
            assert table.sort_key == "alerts"
            await pilot.press("r")
            alerts = _column(table, "alerts", int)
            assert alerts == sorted(alerts)
            # filter by one pid
            target = str(children[3].pid)
            await pilot.press("slash", *target, "enter")
            await _until(pilot, lambda: table.row_count == 1)
            assert table.selected_target() == target
            await pilot.press("escape")
            await _until(pilot, lambda: table.row_count == AGENTS)
            # an agent that ends stays on screen, marked
            children[5].kill()
            gone = str(children[5].pid)
            await _until(pilot, lambda: any(a.target == gone and a.state == "exited" for a in watcher.snapshot()))
            # Enter picks the highlighted agent
            await pilot.press("slash", *target, "enter")
            await _until(pilot, lambda: table.row_count == 1)
            await pilot.press("enter")
            await pilot.pause()
        assert app.return_value == target
    finally:
        watcher.stop()


def test_agent_stats_fold() -> None:
    a = AgentStats("1", 1)
    trace = {"turn": 0, "model": "claude-sonnet-4", "provider": "anthropic", "tier": "Normal",
             "pressure": {"predictive": 0.5}, "alerts": [{"rule": "x"}], "cache_break": None,
             "usage": {"input_tokens": 1000, "cache_read_tokens": 600, "output_tokens": 100}}
    a.take_trace(trace, now=100.0)
    a.take_trace({**trace, "turn": 1, "cache_break": {"section": "tools"},
                  "usage": {"input_tokens": 2000, "cache_read_tokens": 0, "output_tokens": 50}}, now=130.0)
    assert (a.turns, a.last_turn, a.alerts, a.cache_breaks) == (2, 1, 2, 1)
    assert a.hit_rate == pytest.approx(600 / 3000)
    assert a.tokens_per_min(130.0) == pytest.approx(3150.0)
    assert a.tokens_per_min(175.0) == pytest.approx(2050.0), "the first call left the one-minute window"
    assert a.cost_usd > 0 and a.priced
    a.take_trace({**trace, "model": "no-such-model", "turn": 2}, now=140.0)
    assert not a.priced


def test_watcher_waits_for_the_directory_and_retries_an_agent_that_did_not_answer(tmp_path: Path) -> None:
    """The runtime directory may not exist yet, and an agent may be too busy to answer the first hello:
    the watcher keeps looking and picks both up."""
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    watcher = FleetWatcher(runtime / "contextpipe").start()
    try:
        time.sleep(0.5)
        assert watcher.snapshot() == []
        env = {**os.environ, "XDG_RUNTIME_DIR": str(runtime)}
        child = subprocess.Popen([sys.executable, "-m", "inspector.demo_agent", "--turns", "200", "--delay", "0.3",
                                  "--serve"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 120
            while not any(a.turns >= 1 and a.state == "live" for a in watcher.snapshot()):
                assert time.monotonic() < deadline, f"never followed: {watcher.snapshot()} {watcher.error}"
                time.sleep(0.2)
            # simulate a failed first contact: mark the row as an error, as a hello timeout does
            with watcher._lock:
                row = watcher._agents[str(child.pid)]
                row.state, row.detail = "error", "probe timeout"
            deadline = time.monotonic() + 60
            while not any(a.state == "live" for a in watcher.snapshot()):
                assert time.monotonic() < deadline, "the agent was never retried"
                time.sleep(0.2)
        finally:
            child.kill()
            child.wait(10)
    finally:
        watcher.stop()


async def test_keys_typed_right_after_slash_go_to_the_filter(tmp_path: Path) -> None:
    """`/` then the filter, typed (or pasted) faster than the app handles keys: every key is already
    waiting when `/` is handled. Each was handed to the widget focused at the time, the table, because
    the filter box was focused only later (a callback behind them): the filter came out empty and
    Enter attached to the highlighted agent. (test_top_follows_twenty_live_agents under load: Pilot
    sends the next key after at most 1 s even when the app has not handled the last one.)"""
    app = TopApp(FleetWatcher(tmp_path / "none"), refresh_s=0.2)
    async with app.run_test(size=(140, 30)) as pilot:
        await pilot.pause()
        for key, char in [("slash", "/"), ("1", "1"), ("slash", "/"), ("2", "2"), ("enter", "\r")]:
            app.post_message(events.Key(key, char))  # all queued before the first is handled
        box, table = app.query_one("#filter", Input), app.query_one(FleetTable)
        # Until Enter has applied a filter (its handler focuses the table again); the deadline only says
        # that never happens (the keys went elsewhere).
        await _until(pilot, lambda: app.focused is table and table.filter, timeout=30)
        assert box.value == "1/2" and table.filter == "1/2"  # a `/` in the box is text
        # Leave as a person does (q: the app's exit stops its refresh timer before the table goes; the
        # harness's own teardown does not, and a tick in between raised NoMatches: 1 run in 9)
        await pilot.press("q")
    assert app.return_value is None  # Enter attached to nobody


async def test_total_cost_is_a_lower_bound_when_a_row_is(tmp_path: Path) -> None:
    """A row with an unpriced model's calls shows its cost with a "+" (a lower bound); the total above the
    table summed it and showed the sum as exact."""
    watcher = FleetWatcher(tmp_path / "none")
    trace = {"turn": 0, "model": "claude-sonnet-4", "provider": "anthropic", "tier": "Normal",
             "pressure": {"predictive": 0.5}, "alerts": [], "cache_break": None,
             "usage": {"input_tokens": 1000, "cache_read_tokens": 600, "output_tokens": 100}}
    priced, unpriced = AgentStats("1", 1), AgentStats("2", 2)
    priced.take_trace(trace, now=100.0)
    unpriced.take_trace(trace, now=100.0)
    unpriced.take_trace({**trace, "turn": 1, "model": "no-such-model"}, now=101.0)
    app = TopApp(watcher, refresh_s=0.2)
    async with app.run_test(size=(140, 30)) as pilot:
        with watcher._lock:
            watcher._agents.update({"1": priced})
        app.refresh_table()
        await pilot.pause()
        cells = {c.plain for c in app.query_one(FleetTable)._cells[0]}
        summary = str(app.query_one("#summary", Static).render())
        assert f"{priced.cost_usd:.4f}" in cells and f"total ${priced.cost_usd:.4f} ·" in summary, summary
        with watcher._lock:
            watcher._agents.update({"2": unpriced})
        app.refresh_table()
        await pilot.pause()
        total = priced.cost_usd + unpriced.cost_usd
        assert f"{unpriced.cost_usd:.4f}+" in {c.plain for row in app.query_one(FleetTable)._cells for c in row}
        summary = str(app.query_one("#summary", Static).render())
        assert f"total ${total:.4f}+ ·" in summary, summary
        await pilot.press("q")


def _screen(app: TopApp) -> list[str]:
    """The terminal as the person sees it, one string per line."""
    return [strip.text for strip in app.screen._compositor.render_strips()]


def _agents(n: int) -> dict[str, AgentStats]:
    trace = {"turn": 0, "model": "claude-sonnet-4", "provider": "anthropic", "tier": "Normal",
             "pressure": {"predictive": 0.5}, "alerts": [], "cache_break": None,
             "usage": {"input_tokens": 1000, "cache_read_tokens": 600, "output_tokens": 100}}
    out = {}
    for i, target in enumerate(["1234", "123.4", "99", "123.12", "5000"][:n]):
        a = AgentStats(target, int(target.split(".")[0]), command="python agent.py")
        for t in range(i + 1):
            a.take_trace({**trace, "turn": t}, now=100.0 + t)
        out[target] = a
    return out


@pytest.mark.parametrize("size", [(80, 24), (40, 12)])
async def test_top_fits_a_small_terminal(tmp_path: Path, size: tuple[int, int]) -> None:
    """At 80x24 the row was 122 cells wide: COST $ (the column it sorts by) and STATE were past the right
    edge, behind a horizontal scroll bar, and at 40 columns the summary line stopped mid-sentence (the
    total, or the "no agents yet" hint). Now the columns that fit are shown, the sorted one always, and
    the summary wraps."""
    watcher = FleetWatcher(tmp_path / "none")
    app = TopApp(watcher, refresh_s=0.2)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        text = " ".join(" ".join(_screen(app)).split())
        assert "CONTEXTPIPE_SERVE=1" in text and "cp-inspect run -- CMD" in text, text
        agents = _agents(5)
        with watcher._lock:
            watcher._agents.update(agents)
        app.refresh_table()
        await pilot.pause()
        lines = _screen(app)
        assert all(len(line) == size[0] for line in lines)
        text = " ".join(" ".join(lines).split())
        total = sum(a.cost_usd for a in agents.values())
        assert f"total ${total:.4f}" in text, text
        header = next(line for line in lines if "PID" in line)
        assert "COST $" in header and "STATE" in header, header
        for a in agents.values():
            assert f"{a.cost_usd:.4f}" in text
        # `s` moves the sort to a column that was left out at this width: it is shown
        await pilot.press("s")
        await pilot.pause()
        header = next(line for line in _screen(app) if "PID" in line)
        assert "ALERTS" in header, header
        await pilot.press("q")


async def test_top_sorts_targets_by_number(tmp_path: Path) -> None:
    """PID.SESSION targets were sorted as zero-padded text: 1234 before 123.4, 123.12 before 123.4."""
    watcher = FleetWatcher(tmp_path / "none")
    app = TopApp(watcher, refresh_s=0.2)
    async with app.run_test(size=(140, 30)) as pilot:
        with watcher._lock:
            watcher._agents.update(_agents(5))
        table = app.query_one(FleetTable)
        table.sort_key, table.reverse = "target", False
        app.refresh_table()
        await pilot.pause()
        assert _column(table, "target", str) == ["99", "123.4", "123.12", "1234", "5000"]
        await pilot.press("q")


def _wait(check: object, what: object, timeout: float = 60.0) -> None:
    """`what` may be a callable, called for the message only on failure (so it says the state then)."""
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, what() if callable(what) else what
        time.sleep(0.1)


def _demo_agent(tmp_path: Path) -> tuple[subprocess.Popen[bytes], Path]:
    """A demo agent (200 turns 0.3 s apart) serving its probe in a private runtime directory under
    tmp_path: (the process, where its socket will be). Its stderr goes to tmp_path/agent.err."""
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    env = {**os.environ, "XDG_RUNTIME_DIR": str(runtime)}
    with open(tmp_path / "agent.err", "wb") as err:
        child = subprocess.Popen([sys.executable, "-m", "inspector.demo_agent", "--turns", "200", "--delay", "0.3",
                                  "--serve"], env=env, stdout=subprocess.DEVNULL, stderr=err)
    return child, runtime / "contextpipe" / f"{child.pid}.sock"


def _followed_agent(tmp_path: Path) -> tuple[subprocess.Popen[bytes], FleetWatcher, AgentStats]:
    """A demo agent (_demo_agent) and a started watcher following it live past its first turn: (the
    process, the watcher, the row's AgentStats). The caller stops the watcher and kills the agent."""
    child, sock = _demo_agent(tmp_path)
    watcher = FleetWatcher(sock.parent).start()
    try:
        _wait(lambda: any(a.state == "live" and a.turns >= 1 for a in watcher.snapshot()), "never followed",
              timeout=120)
        with watcher._lock:
            return child, watcher, watcher._agents[str(child.pid)]
    except BaseException:
        watcher.stop()
        child.kill()
        child.wait(10)
        raise


def _stopped_agent(tmp_path: Path) -> tuple[subprocess.Popen[bytes], Path]:
    """A demo agent (_demo_agent) stopped (SIGSTOP) once its socket is in place: (the process, its socket)."""
    import signal

    from engine.probe.runtime_dir import proc_stat

    child, sock = _demo_agent(tmp_path)
    try:
        _wait(sock.exists, lambda: f"the agent never served (exit code {child.poll()}): "
              f"{(tmp_path / 'agent.err').read_text(errors='replace')[-2000:]}")
        child.send_signal(signal.SIGSTOP)
        # kill() returns before the agent has stopped (/proc says R until it is next scheduled): the
        # watcher is started on a stopped agent, as the tests mean.
        _wait(lambda: (proc_stat(child.pid) or [b""])[0] == b"T", lambda: f"the agent never stopped: "
              f"{proc_stat(child.pid)}")
    except BaseException:
        child.kill()
        child.wait(10)
        raise
    return child, sock


def _not_shown_stopped(watcher: FleetWatcher, child: subprocess.Popen[bytes], sock: Path) -> str:
    """What a wait for a stopped agent's "not answering" row saw when it gave up (it failed once in a
    fresh-clone CI at load ~3 and in no run since, alone or under load): the watcher's rows, error and
    threads, and the agent's side: whether it still runs and is stopped, its socket, its stderr."""
    from engine.probe.runtime_dir import proc_stat

    fields = proc_stat(child.pid)
    err = (sock.parents[2] / "agent.err").read_text(errors="replace")[-2000:]
    return (
        f"never shown as not answering: {watcher.snapshot()}, error {watcher.error!r}, threads "
        f"{[t.name for t in threading.enumerate() if t.name.startswith('contextpipe-top')]}; the agent: exit code "
        f"{child.poll()}, process state {fields[0] if fields else None!r}, runtime directory "
        f"{sorted(p.name for p in sock.parent.iterdir()) if sock.parent.exists() else 'gone'}, stderr {err!r}"
    )


def test_a_stopped_agent_killed_while_stopped_ends(tmp_path: Path) -> None:
    """A SIGSTOPped agent is a "not answering" row with no reader behind it. Killed while stopped, its row
    stayed in the table for as long as top ran; it is now ended (and dropped after KEEP_EXITED_S) as a
    dead agent's row is."""

    from engine.probe.watch import KEEP_EXITED_S

    child, sock = _stopped_agent(tmp_path)
    skew = [0.0]
    watcher = FleetWatcher(sock.parent, clock=lambda: time.time() + skew[0])
    try:
        watcher.start()
        _wait(lambda: [a.state for a in watcher.snapshot()] == ["error"],
              lambda: _not_shown_stopped(watcher, child, sock))
        child.kill()
        child.wait(10)
        _wait(lambda: [a.state for a in watcher.snapshot()] == ["exited"],
              f"the dead agent's row stayed: {watcher.snapshot()}", timeout=60)
        # Waited for, not asserted at once: a scan that was waiting for the stopped agent's hello when it
        # was killed sees its socket close a moment before /proc says the process is gone, and says "its
        # probe socket is gone"; the next scan says what happened (test_a_dying_agents_row_says_it_exited).
        _wait(lambda: watcher.snapshot()[0].detail.startswith("agent exited (it was not answering: "),
              f"the dead agent's row does not say it exited: {watcher.snapshot()}", timeout=60)
        skew[0] = KEEP_EXITED_S + 1
        assert watcher.snapshot() == []
    finally:
        watcher.stop()
        child.kill()
        child.wait(10)


def test_a_dying_agents_row_says_it_exited(tmp_path: Path) -> None:
    """A not-answering row whose socket refused while its process still lived said "its probe socket is
    gone" for as long as it was shown, even once the process was gone. That is what a scan sees of a
    stopped agent killed while the scan waits for its hello (its socket closes while it exits, before
    /proc says zombie), the race that made test_a_stopped_agent_killed_while_stopped_ends fail under
    load. Here the same order of events, made by hand: the socket removed while the stopped agent
    lives, then the agent killed. Later scans look at the pid again and say it exited."""

    child, sock = _stopped_agent(tmp_path)
    watcher = FleetWatcher(sock.parent)
    try:
        watcher.start()
        _wait(lambda: [a.state for a in watcher.snapshot()] == ["error"],
              lambda: _not_shown_stopped(watcher, child, sock))
        sock.unlink()  # gone while its process lives (stopped): that is what the row says
        _wait(lambda: [a.state for a in watcher.snapshot()] == ["exited"], "the row did not end", timeout=60)
        assert watcher.snapshot()[0].detail.startswith("its probe socket is gone (it was not answering: ")
        child.kill()
        child.wait(10)
        _wait(lambda: watcher.snapshot()[0].detail.startswith("agent exited (it was not answering: "),
              f"the dead agent's row still says its socket is gone: {watcher.snapshot()}", timeout=60)
        assert [a.state for a in watcher.snapshot()] == ["exited"]
    finally:
        watcher.stop()
        child.kill()
        child.wait(10)


def test_a_followed_agent_that_stops_is_shown_stopped_until_it_continues(tmp_path: Path) -> None:
    """An agent followed live and then stopped (Ctrl-Z, SIGSTOP; or stopped just after a scan's hello,
    which it could still answer: kill() returns before the process has stopped) stayed "live" for as
    long as it was stopped, its turns just not coming. It is "stopped" (not answering in the summary)
    and live again, followed by the same reader, once it continues."""
    import signal

    from engine.probe.runtime_dir import proc_stat
    from engine.probe.watch import STOPPED

    child, watcher, followed = _followed_agent(tmp_path)
    try:
        child.send_signal(signal.SIGSTOP)
        _wait(lambda: (proc_stat(child.pid) or [b""])[0] == b"T", "the agent never stopped")
        _wait(lambda: [a.state for a in watcher.snapshot()] == [STOPPED],
              lambda: f"a stopped agent's row: {watcher.snapshot()}", timeout=30)
        [row] = watcher.snapshot()
        assert f"kill -CONT {child.pid}" in row.detail, row.detail
        turns = row.turns
        child.send_signal(signal.SIGCONT)
        _wait(lambda: [(a.state, a.turns > turns) for a in watcher.snapshot()] == [("live", True)],
              lambda: f"the agent continued, its row: {watcher.snapshot()}", timeout=30)
        with watcher._lock:
            assert watcher._agents[str(child.pid)] is followed  # the same reader, not a new one
    finally:
        watcher.stop()
        child.send_signal(signal.SIGCONT)
        child.kill()
        child.wait(10)


def test_an_ended_row_gives_way_to_a_live_agent_at_its_target(tmp_path: Path) -> None:
    """An ended row whose target a socket serves again (a new agent that got the dead one's pid, or an
    agent whose connection was lost while it lives on) is followed again at once: it waited out
    KEEP_EXITED_S behind the old row, shown as exited though it served."""
    child, watcher, old = _followed_agent(tmp_path)
    try:
        watcher._end(old, "exited", "connection lost: simulated")  # what the reader does on a lost connection
        _wait(lambda: [a.state for a in watcher.snapshot()] == ["live"],
              f"the live agent stayed ended: {watcher.snapshot()}", timeout=60)
        with watcher._lock:
            assert watcher._agents[str(child.pid)] is not old
    finally:
        watcher.stop()
        child.kill()
        child.wait(10)


async def test_top_says_how_many_probe_sockets_it_skipped(tmp_path: Path) -> None:
    """An entry `ps` will not open (another user's socket, a symlink, a plain file at PID.sock) is named by
    `ps` with its fix; `top` said "no agents yet", as if nothing were there. It says how many it skipped."""
    from engine.probe.runtime_dir import ensure_runtime_dir

    d = ensure_runtime_dir(tmp_path / "rt")
    (d / "4242.sock").write_text("")  # a plain file where a socket would be
    watcher = FleetWatcher(d)
    watcher.scan()
    assert [s.target for s in watcher.skipped] == ["4242"]
    app = TopApp(watcher, refresh_s=0.2)
    async with app.run_test(size=(140, 30)) as pilot:
        app.refresh_table()
        await pilot.pause()
        summary = str(app.query_one("#summary", Static).render())
        assert "no agents you can attach to: 1 probe socket skipped (`cp-inspect ps` says why)" in summary, summary
        with watcher._lock:
            watcher._agents.update(_agents(1))
        app.refresh_table()
        await pilot.pause()
        summary = str(app.query_one("#summary", Static).render())
        assert "1 live agent," in summary and "1 probe socket skipped" in summary, summary
        # Two of each: the plural ("1 live agent(s)", "1 probe socket(s) skipped" before).
        (d / "4343.sock").write_text("")
        watcher.scan()
        with watcher._lock:
            watcher._agents.update(_agents(2))
        app.refresh_table()
        await pilot.pause()
        summary = str(app.query_one("#summary", Static).render())
        assert "2 live agents," in summary and "2 probe sockets skipped" in summary, summary
        (d / "4343.sock").unlink()
        (d / "4242.sock").unlink()
        watcher.scan()
        app.refresh_table()
        await pilot.pause()
        assert "skipped" not in str(app.query_one("#summary", Static).render())
        await pilot.press("q")


async def test_a_live_agent_whose_socket_was_removed_shows_no_socket(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A live agent's socket file removed by hand: the watcher's connection still streams, so the row stayed
    "live", and Enter left the table to fail (nothing to connect to) and came back with a toast. The row
    says "no socket" at once, the summary says what to do, and Enter says why it cannot attach, in place."""
    import watchfiles

    # "At once" is the directory's watch: the removal's own file event and the scan it sets off. A time
    # bound (< 5 s) could not tell that from the RESCAN_S fallback (2 s) and a loaded host could break it,
    # so the real watchfiles.watch is wrapped to see what each wake-up was and the row after its scan
    # (the watcher scans between one yield and the next).
    woken: list[tuple[set[tuple[watchfiles.Change, str]], list[str]]] = []
    real_watch = watchfiles.watch

    def seen_watch(*args: object, **kwargs: object) -> Iterator[set[tuple[watchfiles.Change, str]]]:
        for changes in real_watch(*args, **kwargs):  # type: ignore[arg-type]
            yield changes
            woken.append((changes, [a.state for a in watcher.snapshot()]))

    monkeypatch.setattr(watchfiles, "watch", seen_watch)
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    env = {**os.environ, "XDG_RUNTIME_DIR": str(runtime)}
    child = subprocess.Popen([sys.executable, "-m", "inspector.demo_agent", "--turns", "400", "--delay", "0.3",
                              "--serve"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    watcher = FleetWatcher(runtime / "contextpipe").start()
    app = TopApp(watcher, refresh_s=0.2)
    try:
        async with app.run_test(size=(120, 20)) as pilot:
            table = app.query_one(FleetTable)
            await _until(pilot, lambda: any(a.state == "live" and a.turns >= 1 for a in watcher.snapshot()),
                         timeout=120)
            sock = runtime / "contextpipe" / f"{child.pid}.sock"
            sock.unlink()
            removal = (watchfiles.Change.deleted, sock.name)
            # The watch itself reports the removal, and the scan it sets off says "no socket". A fallback
            # rescan's wake-up carries no changes: a watcher that only rescanned never passes this.
            await _until(pilot, lambda: any(removal in {(c, Path(p).name) for c, p in changes}
                                            and states == ["no socket"] for changes, states in woken),
                         timeout=60)
            assert [a.state for a in watcher.snapshot()] == ["no socket"]
            row = watcher.snapshot()[0]
            assert "removed" in row.detail and "restart the agent" in row.detail, row.detail
            turns = row.turns
            await _until(pilot, lambda: watcher.snapshot()[0].turns > turns, timeout=30)  # still followed
            await _until(pilot, lambda: "no socket" in _column(table, "state", str))
            summary = str(app.query_one("#summary", Static).render())
            assert "0 live agents, 1 without a probe socket (restart to attach again)" in summary, summary
            await pilot.press("enter")
            await pilot.pause()
            assert app.is_running  # the table stays: no attach that can only fail
            notes = [str(n.message) for n in app._notifications]
            assert any("removed" in n and "restart the agent" in n for n in notes), notes
            await pilot.press("q")
    finally:
        watcher.stop()
        child.kill()
        child.wait(10)


LONG_COMMAND = (
    "python -m my_agent --config configs/a-rather-long-config-name.yaml --task "
    "'fix the flaky test in tests/test_probe.py' --max-steps 40"
)


@pytest.mark.parametrize("width", [280, 160])
async def test_top_shows_the_command_as_far_as_the_terminal_has_room(tmp_path: Path, width: int) -> None:
    """COMMAND was cut at 60 characters whatever the width, with no mark: at 200 columns the task was
    lost with 90 cells empty at 280 columns, the cut read as the whole command, and at 160 the row ran
    past the edge (a horizontal scroll). Now it takes what the other columns leave: whole at 280, cut with
    an ellipsis at the edge at 160."""
    watcher = FleetWatcher(tmp_path / "none")
    app = TopApp(watcher, refresh_s=0.2)
    async with app.run_test(size=(width, 30)) as pilot:
        await pilot.pause()
        agents = _agents(1)
        agents["1234"].command = LONG_COMMAND
        with watcher._lock:
            watcher._agents.update(agents)
        app.refresh_table()
        await pilot.pause()
        row = next(line for line in _screen(app) if line.lstrip().startswith("1234"))
        if width == 280:
            assert LONG_COMMAND in row, row
        else:
            shown = row.rstrip(" ▁▂▃▄▅▆▇█▌▐│").split("  ")[-1].strip()
            assert shown.endswith("…") and LONG_COMMAND.startswith(shown[:-1]), row
            assert len(row.rstrip()) <= width, row
        await pilot.press("q")
