"""The two real sources behind the app: a recording file and a live agent's probe socket.

Both keep the journal events they have seen and embed the engine (a Replayer) for what-if re-plans
and for showing section content; panels only ever see traces (dicts).
"""

from __future__ import annotations

import bisect
import json
import subprocess
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from engine.assembly import Section
from engine.pipeline import Built
from engine.probe.client import ProbeClient, ProbeError
from engine.recording.cpsession import RecordingReader, RecordingWriter
from engine.recording.frames import HEADER_SIZE, decode_header
from engine.recording.journal import trace_of, unpack_event
from engine.recording.replay import Overrides as EngineOverrides
from engine.recording.replay import Replayer
from engine.tokens import TokenCounter

from .source import Disconnected, Dropped, NewTurn, Overrides, SimulationCancelled, SourceEvent
from .timeline import summarize

_COUNTER: TokenCounter | None = None


def shared_counter() -> TokenCounter:
    """One token-count cache for every replay in this process: re-plans only tokenize new content."""
    global _COUNTER
    if _COUNTER is None:
        _COUNTER = TokenCounter()
    return _COUNTER


def to_engine(o: Overrides) -> EngineOverrides:
    return EngineOverrides(window=o.budget, thresholds=o.thresholds, gates=o.gates, provider=o.provider)


def section_text(section: Section) -> str:
    from engine.artifacts import Message, SpillReference, Text, Thinking, ToolCall, ToolResult, ToolSchema

    out: list[str] = []
    for it in section.items:
        if isinstance(it, Text):
            out.append(it.text)
        elif isinstance(it, SpillReference):
            out.append(it.render())
        elif isinstance(it, ToolSchema):
            out.append(
                json.dumps(
                    {"name": it.name, "description": it.description, "parameters": it.parameters()}, indent=2
                )
            )
        elif isinstance(it, Message):
            out.append(f"## {it.role}")
            for p in it.parts:
                if isinstance(p, ToolResult):
                    out.append(f"[tool result {p.call_id} ({p.form})]\n{p.content}")
                elif isinstance(p, ToolCall):
                    out.append(f"[tool call {p.id} {p.name}] {p.arguments}")
                elif isinstance(p, (Text, Thinking)):
                    out.append(p.text)
    return "\n\n".join(out)


class _Cancellable(list):  # type: ignore[type-arg]
    """The event list engine.sim.simulate walks (several times); every walk checks whether a newer
    what-if has replaced this one, so a cancelled simulation stops within one pass."""

    def __init__(self, events: list[dict[str, Any]], cancelled: Callable[[], bool]) -> None:
        super().__init__(events)
        self._cancelled = cancelled

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for i, ev in enumerate(super().__iter__()):
            if i % 64 == 0 and self._cancelled():
                raise SimulationCancelled()
            yield ev


class _ReplaySource:
    """Shared behaviour: journal events in memory, an embedded Replayer extended as events arrive, and a
    one-entry Built cache (content and request body of the turn on screen)."""

    kind = "replay"

    def __init__(self) -> None:
        self.header: dict[str, Any] = {}
        self.events: list[dict[str, Any]] = []
        self._replayer: Replayer | None = None
        self._replayer_len = 0
        self._cache: tuple[int, Built] | None = None
        self._lock = threading.RLock()

    def _load_events(self, upto_turn: int | None = None) -> None:
        """Make sure `events` holds the journal through turn `upto_turn` (None: all of it). A live
        source already has every event; FileSource reads its file lazily."""
        return None

    def replayer(self, upto_turn: int | None = None) -> Replayer:
        with self._lock:
            self._load_events(upto_turn)
            if self._replayer is None:
                self._replayer = Replayer(self.events, shared_counter())
            elif self._replayer_len != len(self.events):
                # Only the new events are added: the fold cursor and checkpoints stay valid.
                self._replayer.extend(self.events[self._replayer_len :])
            self._replayer_len = len(self.events)
            return self._replayer

    def _built(self, turn: int) -> Built:
        cached = self._cache
        if cached is not None and cached[0] == turn:
            return cached[1]
        built = self.replayer(turn).replan(turn)
        self._cache = (turn, built)
        return built

    def section_content(self, turn: int, section_id: str) -> str:
        built = self._built(turn)
        for s in built.asm:
            if s.id == section_id:
                return section_text(s)
        return f"(section {section_id} is not in turn {turn})"

    def request_body(self, turn: int) -> str:
        return json.dumps(self._built(turn).serialized.json(), indent=2, ensure_ascii=False)

    def replan(self, turn: int, overrides: Overrides) -> dict[str, Any]:
        return self.replayer(turn).replan(turn, to_engine(overrides)).trace

    def simulate(self, overrides: Overrides, cancelled: Callable[[], bool] | None = None) -> dict[str, Any]:
        """Session-wide what-if through engine.sim.simulate on the events seen so far."""
        from engine.sim.simulate import SimSettings, simulate_events

        with self._lock:
            self._load_events()
            events = _Cancellable(self.events, cancelled) if cancelled is not None else list(self.events)
        settings = SimSettings(
            provider=overrides.provider,
            window=overrides.budget,
            gates=overrides.gates,
            thresholds=overrides.thresholds,
        )
        report = simulate_events(
            events, settings, source=str(self.header.get("path", "live")), counter=shared_counter()
        )
        return report.to_json(per_turn=True)

    def save(self, path: str | Path) -> None:
        with self._lock:
            self._load_events()
            events = list(self.events)
        with RecordingWriter(
            path, {k: self.header.get(k) for k in ("model", "provider", "engine_version")}
        ) as w:
            for ev in events:
                w.append(ev)


def _light(ev: dict[str, Any]) -> dict[str, Any]:
    """The in-memory form of a recorded event for the replayer: text blobs decompressed (folding reads
    them), turn traces left packed (1-3 KB instead of ~13 KB decoded; the fold decodes only the few it
    needs)."""
    return ev if ev.get("k") == "turn" else unpack_event(ev)


class FileSource(_ReplaySource):
    """A `.cpsession` recording; with follow=True it tails a file another process is still writing.

    Memory stays small for a long recording: the app's timeline gets a compact summary per turn
    (`load_chunks`), the full trace of a turn is decoded from the recording's index when it is shown
    (`full_trace`, a small LRU), and the journal is read only as far as the latest turn whose content
    or re-plan was asked for (plus READ_AHEAD turns, so stepping forward does not read per step)."""

    TRACE_CACHE = 64
    READ_AHEAD = 256

    def __init__(self, path: str | Path, follow: bool = False) -> None:
        super().__init__()
        self.path = Path(path)
        self.reader = RecordingReader.open(self.path)
        self.header = {**self.reader.header, "path": str(self.path)}
        if self.reader.damage is not None:
            self.header["damage"] = self.reader.damage.message
        self.follow_file = follow
        self._read_pos = self.reader._start  # file offset up to which `events` holds the journal
        self._traces: OrderedDict[int, dict[str, Any]] = OrderedDict()  # LRU of decoded traces

    def _load_events(self, upto_turn: int | None = None) -> None:
        with self._lock:
            reader = self.reader
            stop = reader._end
            if upto_turn is not None and reader._turn_nums:
                slot = bisect.bisect_left(reader._turn_nums, upto_turn)
                slot = min(len(reader._turn_nums) - 1, slot + self.READ_AHEAD)
                pos = reader._turn_offs[slot]
                if pos < self._read_pos:
                    return
                stop = min(stop, pos + HEADER_SIZE + decode_header(reader._pread(pos, HEADER_SIZE), pos)[0])
            if stop > self._read_pos:
                self.events.extend(_light(ev) for _, _, ev in reader._frames(self._read_pos, stop))
                self._read_pos = stop

    def full_trace(self, turn: int) -> dict[str, Any]:
        """The whole trace of turn `turn`, decoded from the recording (cached for the last few turns)."""
        with self._lock:
            trace = self._traces.get(turn)
            if trace is not None:
                self._traces.move_to_end(turn)
                return trace
            return self._remember(turn, trace_of(self.reader.turn(turn)))

    def _remember(self, turn: int, trace: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            self._traces[turn] = trace
            if len(self._traces) > self.TRACE_CACHE:
                self._traces.popitem(last=False)
        return trace

    def load_initial(self) -> list[dict[str, Any]]:
        """Every turn's full trace (tests, tools; the app uses load_chunks)."""
        return [trace_of(self.reader.turn(t)) for t in self.reader.turn_numbers()]

    def load_chunks(self, first: int = 200, size: int = 2000) -> Iterator[list[dict[str, Any]]]:
        """Every turn's summary through the index (opening a long recording does not replay it), a small
        chunk first so the app can draw while the rest decodes."""
        numbers = self.reader.turn_numbers()
        at, n = 0, first
        while at < len(numbers):
            chunk = [summarize(trace_of(self.reader.turn(t))) for t in numbers[at : at + n]]
            at, n = at + n, size
            yield chunk

    def follow(self) -> Iterator[SourceEvent]:
        if not self.follow_file:
            return
        from watchfiles import watch

        for _changes in watch(self.path, debounce=50, step=50, yield_on_timeout=False):
            with self._lock:
                caught_up = self._read_pos >= self.reader._end
                new = self.reader.refresh()
                if caught_up:  # otherwise the lazy reader gets to them when it is asked
                    self.events.extend(_light(ev) for ev in new)
                    self._read_pos = self.reader._end
            for ev in new:
                if ev.get("k") == "turn":
                    yield NewTurn(summarize(self._remember(ev["turn"], trace_of(ev))))


class LiveSource(_ReplaySource):
    """A running agent's probe socket. Keeps every event received, so it can be saved after the agent exits."""

    kind = "live"

    def __init__(self, pid: int, timeout: float = 3.0) -> None:
        super().__init__()
        self.pid, self.timeout = pid, timeout
        self._initial: list[dict[str, Any]] = []
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
        self.client = ProbeClient.connect(self.pid, timeout=self.timeout)
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
            self._initial.append(ev["trace"])
            return ev["trace"]  # type: ignore[no-any-return]
        return None

    def load_initial(self) -> list[dict[str, Any]]:
        out, self._initial = self._initial, []
        return out

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
                continue
            if ev.get("k") == "dropped":
                # We were too slow and lost events: re-sync from a fresh snapshot so the journal we
                # replay from stays whole, then hand on the turns that arrived meanwhile.
                yield Dropped(int(ev.get("count", 0)))
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
