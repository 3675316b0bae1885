"""`cp-inspect run` told to end (SIGTERM, SIGHUP) while its inspector is on screen ends, wherever the
signal lands. Signal handlers run in the main thread, the one running Textual's event loop: a handler
that raised to stop the run lost its exception whenever the signal landed inside one of the loop's
callbacks or tasks (asyncio keeps it as the task's error), and the inspector stayed open after the
agent had gone (the tmux test caught it under load). Here the signal is sent from inside an event-loop
callback, the case that lost it, so the outcome does not depend on timing."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from textual.app import App, ComposeResult
from textual.widgets import Static

from inspector import proxy_cli, run_tui


class _KillsItself(App[None]):
    """An inspector stand-in that sends its own process `signum` from an event-loop callback and gives up
    (records a timeout and exits) if it is still open 20 s later."""

    def __init__(self, signum: int, seen: dict[str, Any]) -> None:
        super().__init__()
        self.signum, self.seen = signum, seen
        self.show_sessions = False  # as RunInspectorApp: the user did not ask for the session list

    def compose(self) -> ComposeResult:
        yield Static("inspector")

    def on_mount(self) -> None:
        # From a plain asyncio callback, as data handed over from another thread runs
        # (call_soon_threadsafe): asyncio's Handle swallows any exception but SystemExit/KeyboardInterrupt.
        self.set_timer(0.2, lambda: asyncio.get_running_loop().call_soon(os.kill, os.getpid(), self.signum))
        self.set_timer(20.0, self._give_up)

    def _give_up(self) -> None:
        self.seen["timed_out"] = True
        self.exit()

    def run(self, *args: Any, **kwargs: Any) -> None:  # type: ignore[override]
        self.seen["shown"] = self.seen.get("shown", 0) + 1
        super().run(headless=True, size=(80, 24))


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_inside_an_app_callback_ends_the_run(
    signum: int, tmp_path: Path, rtdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, Any] = {}
    # The signal leaves the run stopping (run_tui._Screen.stopping, a class attribute): restored after the
    # test, or every later pick_session of the process showed no list and returned None.
    monkeypatch.setattr(run_tui._Screen, "stopping", False)

    def fake_tui(child: Any, px: Any, theme: Any, agent_log: Any) -> None:
        # The real follow_run, with the stand-in for the inspector (no agent sessions to list after it).
        run_tui.follow_run(os.getpid(), first=None, theme=theme)  # type: ignore[arg-type]

    monkeypatch.setattr(run_tui, "RunInspectorApp", lambda *a, **k: _KillsItself(signum, seen))
    monkeypatch.setattr(proxy_cli, "_tui", fake_tui)
    old = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)}
    # The stand-in agent starts with the default SIGHUP action, as an agent started by a terminal does: a
    # child inherits an ignored signal, and a suite run under `nohup` would otherwise leave it deaf to SIGHUP.
    agent = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                             preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_DFL))
    proxy = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        with pytest.raises(proxy_cli._Stopped) as stop:
            proxy_cli._supervise(agent, proxy, False, None, tmp_path / "agent.log")
        assert stop.value.signum == signum
        assert not seen.get("timed_out"), "the inspector stayed open after the signal"
        assert seen["shown"] == 1, "the run showed another screen after it was told to end"
        assert agent.wait(10) == -signum  # the agent got the signal too
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        for p in (agent, proxy):
            p.kill()
            p.wait()
