"""Watching every agent on this machine at once (`cp-inspect top`): the runtime directory is watched for
sockets appearing and leaving (watchfiles, with a slow rescan as a fallback), and each agent's probe
stream is read on its own daemon thread and folded into an `engine.fleet.AgentStats`.

A watcher is read-only like every probe client, and costs each agent one client slot."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from engine.fleet import AGENT_GONE, AgentRow, AgentStats
from engine.probe.client import AgentInfo, ProbeClient, SkippedSocket, list_agents
from engine.probe.runtime_dir import pid_alive, proc_stat, resolve_runtime_dir
from engine.recording.journal import trace_of, unpack_event

RESCAN_S = 2.0  # fallback rescan when no file event arrives (a filesystem without inotify)
KEEP_EXITED_S = 30.0  # an agent that ended stays on screen this long, marked exited
NO_SOCKET = "no socket"  # the state of a live agent whose probe socket file is gone (nothing can attach)
# The state of a followed agent whose process is stopped (SIGSTOP, Ctrl-Z, a debugger): nothing comes from
# it until it continues. Its reader keeps the connection; each scan looks at /proc again.
STOPPED = "stopped"


def _stopped(pid: int) -> bool:
    """Whether process `pid` is stopped (/proc's T, or t: stopped by a tracer)."""
    fields = proc_stat(pid)
    return bool(fields and fields[0] in (b"T", b"t"))


class FleetWatcher:
    def __init__(self, runtime_dir: Path | None = None, clock: Callable[[], float] = time.time) -> None:
        self.runtime_dir = runtime_dir
        self.clock = clock
        self._lock = threading.Lock()
        self._agents: dict[str, AgentStats] = {}
        self._ended: dict[str, float] = {}
        # Ended rows that said "its probe socket is gone" because their pid still answered, with what they
        # said before (the not-answering detail). A killed agent's socket closes a moment before its process
        # is gone (its files are closed while it exits; /proc says zombie only after): a scan that saw the
        # socket refuse in between said the socket was gone of an agent that was dying. Each later scan looks
        # at the pid again and says "agent exited" once it has.
        self._gone_alive: dict[str, str] = {}
        self._stop = threading.Event()
        self.error: str | None = None  # e.g. the runtime directory is not safely ours
        # The last scan's entries list_agents would not open (another user's socket, a symlink): top says
        # how many, as ps names them; without it a fleet of refused sockets read "no agents yet".
        self.skipped: tuple[SkippedSocket, ...] = ()

    # ---------------------------------------------------------------- lifecycle

    def start(self) -> FleetWatcher:
        threading.Thread(target=self._discover, name="contextpipe-top-discover", daemon=True).start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def snapshot(self) -> list[AgentRow]:
        """Every agent's figures now, as immutable rows (the reader threads keep folding meanwhile)."""
        now = self.clock()
        with self._lock:
            for target, ended in list(self._ended.items()):
                if now - ended > KEEP_EXITED_S:
                    self._agents.pop(target, None)
                    del self._ended[target]
                    self._gone_alive.pop(target, None)
            return [a.row(now) for a in self._agents.values()]

    # ---------------------------------------------------------------- discovery

    def _discover(self) -> None:
        """Find the runtime directory (it may not exist yet, or be mid-creation), then follow it.
        Every failure is shown in the view and retried: a watcher never gives up while it runs."""
        while not self._stop.is_set():
            try:
                directory = resolve_runtime_dir(self.runtime_dir)
            except Exception as exc:  # a planted or foreign directory, or one being created: say so, retry
                self.error = str(exc)
                directory = None
            if directory is not None:
                self.scan()
                self._watch(directory)
            else:
                self._stop.wait(RESCAN_S)

    def _watch(self, directory: Path) -> None:
        from watchfiles import watch

        try:
            # rust_timeout + yield_on_timeout: a rescan at least every RESCAN_S even without file events,
            # which also retries agents that did not answer the last time.
            for _ in watch(directory, stop_event=self._stop, rust_timeout=int(RESCAN_S * 1000),
                           yield_on_timeout=True, debounce=50, step=50):
                self.scan()
        except Exception:  # the directory vanished or inotify is unavailable: poll instead
            self._stop.wait(RESCAN_S)

    def scan(self) -> None:
        skipped: list[SkippedSocket] = []
        try:
            infos = list_agents(self.runtime_dir, timeout=1.0, skipped=skipped)
        except Exception as exc:
            self.error = str(exc)
            return
        self.error = None
        self.skipped = tuple(skipped)  # (one assignment: the app's thread reads it whole)
        listed = {info.target for info in infos}
        now = self.clock()
        with self._lock:
            # An agent that did not answer (busy starting, a lost connection) is tried again, and so is
            # an ended row's target when a socket serves it again (a new agent that got the dead one's
            # pid): it waited out KEEP_EXITED_S behind the old row.
            known = {t for t, a in self._agents.items() if a.state != "error" and t not in self._ended}
            for target, stats in self._agents.items():
                # A row that did not answer has no reader to see its agent go: one stopped, then killed
                # (or whose pid went to another process, or whose socket was removed) stayed on screen
                # for as long as top ran. list_agents no longer lists it: it has ended.
                if stats.state == "error" and target not in listed and target not in self._ended:
                    stats.state = "exited"
                    if pid_alive(stats.pid) is not False:
                        self._gone_alive[target] = stats.detail
                        stats.detail = f"its probe socket is gone (it was not answering: {stats.detail})"
                    else:
                        stats.detail = f"agent exited (it was not answering: {stats.detail})"
                    self._ended[target] = now
                elif target in self._gone_alive and target in self._ended and pid_alive(stats.pid) is False:
                    stats.detail = f"agent exited (it was not answering: {self._gone_alive.pop(target)})"
                # A live agent whose socket file was removed by hand (a cleanup of the runtime directory, a
                # mistaken rm) still streams to this watcher's open connection, so its row stayed "live",
                # yet nothing can attach to it any more: Enter failed with a toast. Said at once, with
                # what to do; a socket served again at its target makes it live again.
                elif stats.state == "live" and target not in self._ended and target not in listed:
                    stats.state, stats.detail = NO_SOCKET, self._no_socket_detail(target, skipped)
                elif stats.state == NO_SOCKET and target in listed:
                    stats.state, stats.detail = "live", ""
                # A followed agent stopped after it answered (Ctrl-Z, SIGSTOP; or stopped a moment after
                # a scan's hello, which it could still answer: kill() returns before every thread of the
                # process has stopped) stayed "live" for as long as it was stopped, its turns just not
                # coming. Said from /proc at each scan, and live again once it continues.
                elif stats.state == "live" and target not in self._ended and _stopped(stats.pid):
                    stats.state = STOPPED
                    stats.detail = (f"its process is stopped (SIGSTOP, Ctrl-Z or a debugger): nothing comes "
                                    f"until it continues (kill -CONT {stats.pid}, or fg in its shell)")
                elif stats.state == STOPPED and not _stopped(stats.pid):
                    stats.state, stats.detail = "live", ""
                # A proxy's conversation whose agent has exited: the proxy serves it on (its socket, its
                # recording), so it stayed "live" for as long as the proxy ran, beside agents that run.
                elif (stats.state == "live" and stats.client_pid is not None and target not in self._ended
                      and pid_alive(stats.client_pid) is False):
                    stats.state = AGENT_GONE
                    stats.detail = (f"its agent (pid {stats.client_pid}) has exited; the proxy keeps the "
                                    "conversation and its recording (Enter attaches)")
        for info in infos:
            if info.target not in known:
                self._follow(info)

    @staticmethod
    def _no_socket_detail(target: str, skipped: list[SkippedSocket]) -> str:
        refused = next((e.reason for e in skipped if e.target == target), None)
        if refused is not None:  # something else stands at its path now (a symlink, another user's file)
            return f"its probe socket cannot be used: {refused}"
        return ("its probe socket file was removed while it runs: top still follows it, but nothing new can "
                "attach (attach, Enter here); restart the agent to serve it again")

    def _follow(self, info: AgentInfo) -> None:
        stats = AgentStats(info.target, info.pid, info.session, info.label, info.model or "",
                           info.provider or "", tap_errors=info.tap_errors, client_pid=info.client_pid)
        if info.error:
            stats.state, stats.detail = "error", info.error
        with self._lock:
            self._agents[info.target] = stats
            self._ended.pop(info.target, None)  # a retried agent is not an ended one
            self._gone_alive.pop(info.target, None)
        if not info.error:
            threading.Thread(target=self._read, args=(info, stats), name=f"contextpipe-top-{info.target}",
                             daemon=True).start()

    # ---------------------------------------------------------------- one agent

    def _read(self, info: AgentInfo, stats: AgentStats) -> None:
        try:
            # Polling (engine.probe.poll): the agent's sends to a watcher never pay for waking it.
            client = ProbeClient.connect_path(info.socket_path, info.pid, timeout=3.0, poll=True)
        except Exception as exc:
            self._end(stats, "error", str(exc))
            return
        sent_at: dict[int, float] = {}  # request time by turn: tokens/min follows the agent's own clock
        with client:
            while not self._stop.is_set():
                try:
                    ev = client.recv(timeout=0.5)
                except Exception as exc:
                    self._end(stats, "exited", f"connection lost: {exc}")
                    return
                if ev is None:
                    if client.disconnected:
                        self._end(stats, "exited", "agent exited")
                        return
                    continue
                kind = ev.get("k")
                if kind == "request" and isinstance(ev.get("time"), int | float):
                    sent_at[int(ev.get("turn", -1))] = float(ev["time"])
                elif kind == "turn":
                    trace = trace_of(unpack_event(ev))
                    when = sent_at.pop(int(trace.get("turn", -1)), None) or self.clock()
                    with self._lock:
                        stats.take_trace(trace, when)

    def _end(self, stats: AgentStats, state: str, detail: str) -> None:
        with self._lock:
            stats.state, stats.detail = state, detail
            self._ended[stats.target] = self.clock()
