"""`cp-inspect run`'s TUI when the agent opens more than one conversation, driven as a person would
(Pilot): a real proxy (in this process, serving each session on its own probe socket) in front of the
stand-in, the real openai SDK holding two conversations. The inspector opens on the first session,
announces the second when it starts, `o` lists this run's sessions (and only them), Enter opens the
one picked, and it shows that session's own turns."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

import openai
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

from inspector import run_tui
from inspector.run_tui import RunInspectorApp, RunWatcher, pick_session
from inspector.sources.live import LiveSource
from inspector.top_app import TopApp
from panels.fleet_table import FleetTable
from tests.capture.conftest import Proxied


def _converse(url: str, system: str, turns: int) -> None:
    client = openai.OpenAI(base_url=url + "/v1", api_key="k", max_retries=0)
    messages: list[Any] = [{"role": "system", "content": system}, {"role": "user", "content": "Count files."}]
    for t in range(turns):
        r = client.chat.completions.create(model="gpt-4o", messages=messages)
        messages += [r.choices[0].message.model_dump(exclude_none=True), {"role": "user", "content": f"{t}"}]


async def _until(check: Any, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.1)


def _announcements(app: RunInspectorApp) -> list[str]:
    """The messages of the "new session" notifications the app raises, as it raises them. (The app's own
    list, `app._notifications`, forgets a notification once its 10 s are up: reading it after the
    sub-agent's three calls, which take longer than that on a loaded machine, found nothing.)"""
    notes: list[str] = []
    notify = app.notify

    def recording(message: str, *, title: str = "", **kwargs: Any) -> None:
        if title == "new session":
            notes.append(message)
        notify(message, title=title, **kwargs)

    app.notify = recording  # type: ignore[method-assign]
    return notes


async def test_run_tui_announces_and_opens_the_runs_other_sessions(proxied: Proxied, rtdir: Path) -> None:
    pid = os.getpid()
    await asyncio.to_thread(_converse, proxied.url, "You are the main agent.", 2)
    assert proxied.recorder.flush(60)
    watcher = RunWatcher(pid).start()
    try:
        app = RunInspectorApp(LiveSource(pid, session=1), watcher, f"{pid}.1")
        announced = _announcements(app)
        async with app.run_test(size=(120, 40)) as pilot:
            await _until(lambda: len(app.timeline) == 2)
            await pilot.pause(1.5)  # a few announcement ticks: nothing to announce yet
            assert not announced
            # the agent starts a sub-agent: a second conversation, so a second proxy session
            await asyncio.to_thread(_converse, proxied.url, "You are a sub-agent.", 3)
            await _until(lambda: announced)
            (note,) = announced
            assert f"session {pid}.2 (gpt-4o) started" in note and "press o" in note
            await pilot.press("o")
            await pilot.pause()
        assert app.show_sessions  # `o` asked for the list, rather than quitting
        top = TopApp(watcher, refresh_s=0.2)
        async with top.run_test(size=(140, 30)) as pilot:
            table = top.query_one(FleetTable)
            await _until(lambda: table.row_count == 2)
            await _until(
                lambda: {r.target: r.turns for r in watcher.snapshot()} == {f"{pid}.1": 2, f"{pid}.2": 3}
            )
            while table.selected_target() != f"{pid}.2":
                await pilot.press("down")
            await pilot.press("enter")
            await pilot.pause()
        assert top.return_value == f"{pid}.2"
        # what follow_run does with the pick: that session's own turns, live
        second = LiveSource(pid, session=2)
        app2 = RunInspectorApp(second, watcher, f"{pid}.2")
        announced2 = _announcements(app2)
        async with app2.run_test(size=(120, 40)) as pilot:
            await _until(lambda: len(app2.timeline) == 3)
            await pilot.pause(1.5)  # the first session is known to the watcher, but not new: announced once
            assert announced2 == [
                f"session {pid}.1 (gpt-4o) started: press o to list this run's sessions"
            ]
            await pilot.press("q")
        assert not app2.show_sessions
    finally:
        watcher.stop()


async def test_run_tui_footer_shows_o_sessions_at_80_columns(proxied: Proxied, rtdir: Path) -> None:
    """"o Sessions", the key every new session's announcement names, is the live footer's last key; at 80
    columns the right-docked "^p palette" hint drew over it. The hint gives way below 90 columns."""
    pid = os.getpid()
    await asyncio.to_thread(_converse, proxied.url, "You are the main agent.", 1)
    assert proxied.recorder.flush(60)
    watcher = RunWatcher(pid).start()
    try:
        app = RunInspectorApp(LiveSource(pid, session=1), watcher, f"{pid}.1")
        async with app.run_test(size=(80, 24)) as pilot:
            await _until(lambda: len(app.timeline) == 1)
            await pilot.pause()

            def keys() -> dict[str, Any]:
                return {k.key: k.region for k in app.screen.query_one(Footer).query(FooterKey)}

            o = keys()["o"]
            assert o.width and o.right <= 80
            assert not any(r.overlaps(o) for k, r in keys().items() if k != "o"), keys()
            await pilot.resize_terminal(120, 40)
            await pilot.pause()
            await pilot.pause()
            assert "ctrl+p" in keys()  # room for the hint again
            assert not keys()["ctrl+p"].overlaps(keys()["o"])
    finally:
        watcher.stop()


def test_run_watcher_follows_only_its_own_proxy(proxied: Proxied, rtdir: Path) -> None:
    _converse(proxied.url, "You are the main agent.", 1)
    assert proxied.recorder.flush(60)
    mine, other = RunWatcher(os.getpid()), RunWatcher(os.getpid() + 1_000_000)
    try:
        deadline = time.monotonic() + 60
        while not mine.snapshot():  # the probe socket is put in place by the server's own thread
            assert time.monotonic() < deadline
            mine.scan()
            time.sleep(0.05)
        other.scan()
        assert [r.target for r in mine.snapshot()] == [f"{os.getpid()}.1"]
        assert other.snapshot() == []
    finally:
        mine.stop()
        other.stop()


def test_pick_session_skips_a_session_that_went_away(monkeypatch: Any) -> None:
    """A session that cannot be opened (its socket gone) is said and the list comes back."""
    from engine.errors import ContextPipeError

    picks = iter(["7.1", "8.2", "7.2", None])
    monkeypatch.setattr(TopApp, "run", lambda self: next(picks))
    monkeypatch.setattr(run_tui._Screen, "stopping", False)  # a run told to stop shows no list at all
    opened: list[int] = []

    def open_session(n: int) -> Any:
        opened.append(n)
        if n == 1:
            raise ContextPipeError("gone")
        return f"source {n}"

    got = pick_session(RunWatcher(7), 7, None, open_session)
    assert got == ("source 2", "7.2") and opened == [1, 2]  # 8.2 is another process: ignored


async def _one_session(proxied: Proxied, turns: int) -> tuple[Any, Any]:
    """The proxy's only session (its info and tap) after `turns` calls of one conversation, recorded."""
    await asyncio.to_thread(_converse, proxied.url, "You are the main agent.", turns)
    assert proxied.recorder.flush(60)
    ((info, tap),) = proxied.recorder.sessions.values()
    return info, tap


async def test_a_runs_first_session_is_read_as_attach_reads_it(proxied: Proxied, rtdir: Path) -> None:
    # `cp-inspect run` opened its first session on the elided stream and its later ones on the fold
    # stream: the first session's proxy then built every turn's trace for the inspector. Both come
    # through run_session_source now, which reads as attach does: the session's recording followed
    # (the proxy records it), nothing sent to the inspector a turn; without it, the fold stream.
    from inspector.sources.live import LiveSource
    from inspector.sources.live_recording import RecordingFollower

    pid = os.getpid()
    info, tap = await _one_session(proxied, 2)
    assert info.number == 1 and tap.pipe is not None and tap.pipe.probe is not None
    probe = tap.pipe.probe
    src = run_tui.run_session_source(pid, 1)
    try:
        assert isinstance(src, RecordingFollower) and src.header["recording"] == os.path.abspath(info.path)
        await asyncio.sleep(0.5)  # (an attached or tracing client would have said so by now)
        assert probe.client_count == 0 and probe.tracing_clients == 0
    finally:
        src.close()
    probe.follow_recording = False  # (a session whose recording may not be followed)
    src = run_tui.run_session_source(pid, 1)
    try:
        assert type(src) is LiveSource
        await _until(lambda: probe.client_count == 1, 60)
        await asyncio.sleep(0.5)
        assert probe.tracing_clients == 0
    finally:
        src.close()


async def test_the_run_inspector_says_when_the_agent_ended_and_where_its_recording_is(
    proxied: Proxied, rtdir: Path
) -> None:
    # The session is the proxy's, which lives on until the inspector is left: the line said "● LIVE
    # following newest" over a finished run (and over mini-swe-agent aborted at its first confirmation),
    # and attached to a proxy conversation that ended it said "press s to save" (the proxy's header named
    # the recording under a key the inspector never read).
    pid = os.getpid()
    info, _tap = await _one_session(proxied, 1)
    ended: list[str] = []
    watcher = RunWatcher(pid).start()
    try:
        source = run_tui.run_session_source(pid, 1)
        assert source.header["recording"] == os.path.abspath(info.path)
        app = RunInspectorApp(source, watcher, f"{pid}.1", agent_ended=lambda: ended[0] if ended else None)
        notes: list[str] = []
        notify = app.notify
        app.notify = lambda message, **kw: (notes.append(message), notify(message, **kw))[1]  # type: ignore[method-assign]
        async with app.run_test(size=(120, 40)) as pilot:
            await _until(lambda: len(app.timeline) == 1)
            await pilot.pause(1.5)  # a few ticks while the agent runs: nothing said
            assert app.disconnected is None and not notes
            ended.append("the agent exited with status 3 (its output: rec/agent.log)")
            await _until(lambda: app.disconnected is not None)
            await pilot.pause()
            assert app.disconnected == ended[0]
            (note,) = notes
            assert note.startswith("The agent exited with status 3 (its output: rec/agent.log). 1 turn kept")
            assert f"recording is kept at {os.path.abspath(info.path)}" in note
            status = app.query_one("#status").render_line(0).text
            assert "ENDED" in status and "LIVE" not in status, status
            await pilot.pause(1.5)
            assert len(notes) == 1  # said once
    finally:
        watcher.stop()


def test_agent_ended_says_the_status_the_signal_and_where_the_output_is(tmp_path: Path) -> None:
    import signal
    import subprocess
    import sys

    from inspector.proxy_cli import agent_ended

    log = tmp_path / "agent.log"
    ok = subprocess.Popen([sys.executable, "-c", "pass"])
    failed = subprocess.Popen([sys.executable, "-c", "raise SystemExit(2)"])
    slow = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        ok.wait(60)
        failed.wait(60)
        assert agent_ended(slow, log) is None  # still running
        assert agent_ended(ok, log) == "the agent exited with status 0"
        assert agent_ended(failed, log) == f"the agent exited with status 2 (its output: {log})"
        slow.send_signal(signal.SIGTERM)
        slow.wait(60)
        assert agent_ended(slow, log) == f"the agent was ended by SIGTERM (its output: {log})"
    finally:
        slow.kill()
        slow.wait()
