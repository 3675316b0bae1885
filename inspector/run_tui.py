"""The inspector of `cp-inspect run`: the run's first conversation, and every other one the agent opens.

An agent run through the proxy may open several sessions: sub-agents (Claude Code's Task tool), a
second conversation, a small side call on another model (a title, a quota check). The inspector opens
on the first session, as it always did; each further session of this run is announced when it appears,
and `o` lists them all. The list is `cp-inspect top` narrowed to this run's proxy: Enter opens a session,
q in the inspector comes back to the list (once the run has more than one session), q in the list
leaves the TUI. Following the newest session automatically was the other choice, rejected: side calls
and short sub-agents would pull the view away from the conversation the user is reading.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from textual.app import App
from textual.binding import Binding

from engine.errors import ContextPipeError
from engine.probe.client import AgentInfo
from engine.probe.runtime_dir import parse_target
from engine.probe.watch import FleetWatcher

from .app import InspectorApp
from .messages import SourceDisconnected
from .recording_open import warn
from .sources import Source
from .top_app import TopApp

ANNOUNCE_S = 1.0  # how often the inspector looks for new sessions of the run (a snapshot copy: cheap)


class _Screen:
    """The app the run shows now, and whether the run was told to stop (see `request_stop`)."""

    app: App[Any] | None = None
    stopping = False


def request_stop() -> bool:
    """Close the inspector because the run must end (SIGTERM, SIGHUP); called from a signal handler.

    Signal handlers run in the main thread, which is the one running Textual's event loop: an exception
    raised there is lost whenever the signal lands inside one of the loop's callbacks or tasks (asyncio
    keeps it as the task's error and the app runs on), so the app is asked to exit on the loop instead.
    False when no app is on screen (the caller raises at once: it is in plain code)."""
    app, loop = _Screen.app, asyncio._get_running_loop()
    if app is None or loop is None:
        return False
    try:
        loop.call_soon_threadsafe(app.exit)
    except RuntimeError:  # the loop is closing: the caller raises instead
        return False
    _Screen.stopping = True  # no further app (the session list) is shown
    return True


def _show(app: App[Any]) -> Any:
    """Run `app` unless the run is stopping; what it returned."""
    if _Screen.stopping:
        return None
    _Screen.app = app
    try:
        return app.run()
    finally:
        _Screen.app = None


class RunWatcher(FleetWatcher):
    """The fleet watcher narrowed to one proxy process: its sessions `PID.N`, nobody else's."""

    def __init__(self, pid: int, runtime_dir: Path | None = None) -> None:
        super().__init__(runtime_dir)
        self.pid = pid

    def _follow(self, info: AgentInfo) -> None:
        if info.pid == self.pid:  # other agents on the machine are not this run's: never connected to
            super()._follow(info)


class RunInspectorApp(InspectorApp):
    """The inspector on one session of the run, announcing the run's other sessions as they start."""

    BINDINGS = [
        Binding(
            "o", "run_sessions", "Sessions", tooltip="this run's sessions (sub-agents, other conversations)"
        ),
        # `/ Find` stays out of this footer: it came before "o Sessions" and pushed it off at 80 columns.
        # The key works as in any inspector; `?` and the palette list it.
        Binding("slash", "search", "Find", key_display="/", show=False,
                tooltip="search what each turn sent: the turns a text enters or leaves the prompt"),
    ]
    # "o Sessions", the key each new session's announcement names, is the footer's last key: it ends at
    # column 78, so the palette hint (11 columns) gives way below 90.
    PALETTE_HINT_MIN_WIDTH = 90

    def __init__(
        self,
        source: Source,
        watcher: FleetWatcher,
        target: str,
        theme: str | None = None,
        agent_ended: Callable[[], str | None] | None = None,
    ) -> None:
        super().__init__(source, theme=theme)
        self.watcher, self.target = watcher, target
        self.show_sessions = False  # the user asked for the list (`o`), rather than quitting
        self._announced = {target}
        # How the run's agent ended (None while it runs). The session is the proxy's, which lives on
        # until the inspector is left, so nothing else says the agent is gone: the line said "● LIVE
        # following newest" over a finished run, and over an agent that had failed at once.
        self.agent_ended = agent_ended

    def on_mount(self) -> None:  # Textual also runs InspectorApp's own on_mount
        self.set_interval(ANNOUNCE_S, self.announce_sessions)

    def announce_sessions(self) -> None:
        ended = self.agent_ended() if self.agent_ended is not None else None
        if ended is not None and self.disconnected is None:
            self.agent_ended = None  # said once
            self.post_message(SourceDisconnected(ended))
        for row in self.watcher.snapshot():
            if row.target in self._announced:
                continue
            self._announced.add(row.target)
            model = f" ({row.model})" if row.model else ""
            self.notify(
                f"session {row.target}{model} started: press o to list this run's sessions",
                title="new session",
                timeout=10,
                markup=False,  # the model name is the agent's: plain text
            )

    def action_run_sessions(self) -> None:
        self.show_sessions = True
        self.exit()


def run_session_source(pid: int, session: int, timeout: float = 3.0) -> Source:
    """A session of a `cp-inspect run`'s proxy, read as `cp-inspect attach` reads an agent: the session's
    recording followed (the proxy records every session, and sends a follower nothing a turn), else the
    fold stream (the proxy builds no trace for the inspector; the inspector rebuilds each turn's); why a
    recording is not followed is said on screen (the header's not_followed). The first session and the
    later ones come through here, so they cannot be read two ways."""
    from .sources.live_recording import open_live

    return open_live(pid, session, timeout, fold=True)[0]


def follow_run(
    pid: int, first: Source, theme: str | None = None, agent_ended: Callable[[], str | None] | None = None
) -> None:
    """Show the run of proxy `pid`, starting on its first session (`first`), until the user leaves.
    `agent_ended`: how the agent ended, once it has (None before): each session's inspector says it."""
    _Screen.stopping = False
    watcher = RunWatcher(pid).start()
    try:
        source, target = first, f"{pid}.1"
        while True:
            app = RunInspectorApp(source, watcher, target, theme=theme, agent_ended=agent_ended)
            _show(app)
            if _Screen.stopping:
                return
            if not app.show_sessions and len(watcher.snapshot()) <= 1:
                return  # one conversation: q leaves, as it always did
            picked = pick_session(watcher, pid, theme, lambda p: run_session_source(pid, p))
            if picked is None:
                return
            source, target = picked
    finally:
        watcher.stop()


def pick_session(
    watcher: FleetWatcher, pid: int, theme: str | None, open_session: Callable[[int], Source]
) -> tuple[Source, str] | None:
    """The run's session list until the user opens one (its source and target) or leaves it (None)."""
    while True:
        choice = _show(TopApp(watcher, theme=theme))
        if not choice:
            return None
        parsed = parse_target(choice)
        if parsed is None or parsed[0] != pid or parsed[1] is None:
            continue
        try:
            return open_session(parsed[1]), choice
        except ContextPipeError as exc:  # the session's socket went away between the list and the key
            warn(f"cannot open session {choice}: {exc}")
