"""`top`, Enter, the inspector, `q`: back to the table as it was left. `top` shows a new table after each
attach; the sort column, its order and the filter went back to the defaults (cost, highest first, none)."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import Input

from engine.probe.watch import FleetWatcher
from inspector.top_app import TopApp, TopView
from panels.fleet_table import FleetTable


async def test_the_sort_and_filter_set_before_an_attach_are_there_after_it(tmp_path: Path) -> None:
    watcher = FleetWatcher(tmp_path / "none")
    view = TopView()  # what `cp-inspect top` keeps across its tables
    first = TopApp(watcher, refresh_s=0.2, view=view)
    async with first.run_test(size=(140, 30)) as pilot:
        await pilot.pause()
        await pilot.press("s", "r", "slash", "4", "2", "enter")
        await pilot.pause()
        table = first.query_one(FleetTable)
        left = (table.sort_key, table.reverse, table.filter)
        assert left != ("cost", True, "") and table.filter == "42"
        await pilot.press("q")
    again = TopApp(watcher, refresh_s=0.2, view=view)  # the table shown when the inspector returns
    async with again.run_test(size=(140, 30)) as pilot:
        await pilot.pause()
        table = again.query_one(FleetTable)
        assert (table.sort_key, table.reverse, table.filter) == left
        assert again.query_one("#filter", Input).value == "42"
        assert again.focused is table  # keys go to the table, as before the attach
        await pilot.press("q")


async def test_enter_on_an_agent_that_has_ended_says_why_in_the_next_table(tmp_path: Path) -> None:
    """Enter on a row whose agent had just ended: the reason was printed to the terminal between two
    tables and the next table, drawn at once, hid it (the Enter seemed to do nothing). The next table
    says it now."""
    import subprocess
    import sys

    from inspector.fleet_cli import attach_from_top

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # a pid that was an agent's a moment ago
    view = TopView()
    assert attach_from_top(str(gone.pid), view) is None
    assert f"cannot attach to {gone.pid}" in view.notice and "no process" in view.notice
    app = TopApp(FleetWatcher(tmp_path / "none"), refresh_s=0.2, view=view)
    async with app.run_test(size=(140, 30)) as pilot:
        await pilot.pause()
        await pilot.pause()
        shown = [str(n.message) for n in app._notifications]  # the toasts Textual shows
        assert any(f"cannot attach to {gone.pid}" in s for s in shown), shown
        assert view.notice == ""  # said once: the table after the next attach does not repeat it
        await pilot.press("q")


async def test_a_stopped_agent_is_not_counted_as_ended(tmp_path: Path) -> None:
    """A SIGSTOPped agent (a debugger, ^Z): its row says error (it did not answer), and the summary said
    "1 ended" though it had not; it says "1 not answering" until the agent answers again."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from textual.widgets import Static

    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    agent = subprocess.Popen([sys.executable, "-m", "inspector.demo_agent", "--turns", "400", "--delay", "0.5",
                              "--serve"], env={**os.environ, "XDG_RUNTIME_DIR": str(runtime)},
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        sock = runtime / "contextpipe" / f"{agent.pid}.sock"
        give_up = time.monotonic() + 20
        while not sock.exists() and time.monotonic() < give_up:
            time.sleep(0.05)
        agent.send_signal(signal.SIGSTOP)
        watcher = FleetWatcher(runtime / "contextpipe").start()
        try:
            app = TopApp(watcher, refresh_s=0.2)
            async with app.run_test(size=(140, 30)) as pilot:
                summary = ""
                while time.monotonic() < give_up:
                    await pilot.pause(0.1)
                    summary = str(app.query_one("#summary", Static).render())
                    if "not answering" in summary or ("ended" in summary and "0 ended" not in summary):
                        break
                assert "0 live agents, 1 not answering, 0 ended" in summary, summary
                await pilot.press("q")
        finally:
            watcher.stop()
    finally:
        agent.kill()
        agent.wait()
