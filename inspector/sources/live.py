"""The two real sources behind the app: a recording file and a live agent's probe socket.

Both keep the journal events they have seen and embed the engine (a Replayer) for what-if re-plans
and for showing section content; panels only ever see traces (dicts).
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from typing import Any, cast

from engine.probe.client import ProbeClient, ProbeError
from engine.recording.journal import unpack_event
from engine.trace_schema import Trace
from inspector.sources import Disconnected, EventsLost, NewTurn, SourceEvent
from inspector.sources.replaying import ReplayingSource


class LiveSource(ReplayingSource):
    """A running agent's probe socket. Keeps every event received, so it can be saved after the agent exits."""

    kind = "live"

    def __init__(self, pid: int, timeout: float = 3.0, session: int | None = None) -> None:
        super().__init__()
        self.pid, self.timeout = pid, timeout
        self.session = session  # one of the conversations a proxy serves (`PID.SESSION` in `ps`)
        self._initial: list[dict[str, Any]] = []
        self._by_turn: dict[int, dict[str, Any]] = {}  # every trace received, for full_trace()
        self._seen_turns = -1  # the newest turn handed to the app, so a re-sync only adds newer ones
        self._connect()

    @classmethod
    def when_serving(cls, child: subprocess.Popen[bytes], wait_s: float = 15.0) -> LiveSource:
        """Attach to an agent process we just started, retrying until its probe socket is up.
        Raises ProbeError if the agent exits first or does not serve within `wait_s` seconds."""
        deadline = time.monotonic() + wait_s
        while True:
            try:
                return cls(child.pid, timeout=1.0)
            except ProbeError as exc:
                if child.poll() is not None:
                    raise ProbeError(
                        f"the agent (pid {child.pid}) exited with code {child.returncode}"
                    ) from exc
                if time.monotonic() > deadline:
                    raise ProbeError(
                        f"the agent (pid {child.pid}) did not start serving within {wait_s:g} s: {exc}"
                    ) from exc
                time.sleep(0.1)

    def _connect(self) -> None:
        """Connect and read the journal so far: the hello says how many snapshot events follow."""
        self.client = ProbeClient.connect(self.pid, timeout=self.timeout, session=self.session)
        self.header = {**dict(self.client.hello), "pid": self.pid}
        self.events = []
        self._replayer, self._replayer_len = None, 0  # the old fold may have gaps: rebuild from scratch
        for _ in range(int(self.client.hello.get("snapshot", 0))):
            ev = self.client.recv(timeout=self.timeout)
            if ev is None:
                break  # the agent exited mid-snapshot: keep what arrived; follow() reports the disconnect
            self._take(ev)

    def _take(self, ev: dict[str, Any]) -> dict[str, Any] | None:
        ev = unpack_event(ev)
        if ev.get("k") in ("hello", "pong", "dropped", "error"):
            return None
        self.events.append(ev)
        if ev.get("k") == "turn" and ev["turn"] > self._seen_turns:
            self._seen_turns = ev["turn"]
            self._by_turn[ev["turn"]] = ev["trace"]
            self._initial.append(ev["trace"])
            return ev["trace"]  # type: ignore[no-any-return]
        return None

    def load_initial(self) -> list[dict[str, Any]]:
        out, self._initial = self._initial, []
        return out

    def load_chunks(self) -> Iterator[list[dict[str, Any]]]:
        yield self.load_initial()

    def full_trace(self, turn: int) -> Trace:
        """A live timeline holds whole traces already; this serves callers that ask by turn."""
        return cast(Trace, self._by_turn[turn])  # decoded from the probe: the shape engine.trace built

    def follow(self) -> Iterator[SourceEvent]:
        while True:
            try:
                ev = self.client.recv(timeout=0.5)
            except Exception as exc:  # an error frame or a broken socket ends the stream, never the app
                yield Disconnected(f"connection lost: {exc}")
                return
            if ev is None:
                if self.client.disconnected:
                    yield Disconnected(f"agent pid {self.pid} disconnected")
                    return
                if _reader_cancelled():
                    # The app quit while the agent is idle: end here, since the reader only looks at its
                    # cancel flag between events and the process would wait for this thread at exit.
                    return
                continue
            if ev.get("k") == "dropped":
                # We were too slow and lost events: re-sync from a fresh snapshot so the journal we
                # replay from stays whole, then hand on the turns that arrived meanwhile.
                yield EventsLost(int(ev.get("count", 0)))
                self.client.close()
                try:
                    self._connect()
                except Exception as exc:
                    yield Disconnected(f"re-sync failed: {exc}")
                    return
                for missed in self.load_initial():
                    yield NewTurn(missed)
                continue
            trace = self._take(ev)
            if trace is not None:
                self._initial.clear()
                yield NewTurn(trace)


def _reader_cancelled() -> bool:
    """True when this runs in a Textual worker that has been cancelled (the app is quitting)."""
    try:
        from textual.worker import get_current_worker

        return get_current_worker().is_cancelled
    except Exception:  # not inside a worker (a test, `explain PID`): nobody to cancel us
        return False
