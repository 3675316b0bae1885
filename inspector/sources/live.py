"""A live agent's probe socket as the app's source (`LiveSource`): the journal events it has seen, kept
so the session can be saved after the agent exits, with the engine embedded (ReplayingSource: a
Replayer) for what-if re-plans and section content; panels only ever see traces (dicts).

LiveSource is built in layers, a module each, each class on the one before: live_state (what it keeps),
live_placeholders (summarized turns and the history's stand-ins, filled in place), live_fold_stream
(the fold stream's turns), live_frames (taking frames and journal ranges), live_fetch (reading the
socket, asking the agent), and here connecting, the Source interface and follow().
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, cast

from engine.probe.client import ProbeClient, ProbeError, ProtocolMismatch
from engine.probe.lean import FETCH_QUEUE
from engine.trace_schema import Trace
from engine.wording import counted
from inspector.sources import (
    Chunk,
    Disconnected,
    EventsLost,
    HistoryFilled,
    HistoryProgress,
    NewTurn,
    SourceEvent,
)
from inspector.sources.live_fetch import LiveFetch

if TYPE_CHECKING:
    from engine.pipeline_request import Built
    from inspector.content_search import JournalStream

# Turns the replayer's fold reads the trace of, besides the one before each checkpoint: the few before
# the turn asked for (a re-plan reads the previous turn's trace; why-missed re-plans the one before).
_FOLD_BEHIND = 2
# Summarized turns fetched along with the one asked for when the person steps back (they come to them
# next). Not while the view follows the live tail: it asks for ever newer turns and would never show
# those (fetching them was most of the traces a following inspector had the agent send).
FETCH_BEHIND = 8
# After this long without an event, the traces the lean stream summarized are fetched in the
# background (FETCH_MAX a request), so they are here when asked for and after the agent exits.
BACKFILL_IDLE = 1.0
# How often follow() says how far a long history has come (HistoryProgress) while it arrives.
PROGRESS_EVERY = 0.5


class LiveSource(LiveFetch):
    """A running agent's probe socket. Keeps every event received, so it can be saved after the agent exits.

    It asks for the lean stream (engine.probe.lean): while turns come faster than the agent's probe
    sends them, only the newest of each send arrives whole and the others as summaries, which is all the
    timeline reads. A summarized turn is held as a placeholder event (`{"k": "turn", "turn": N,
    "summary": {...}}`) whose trace is fetched from the agent when something needs it: the turn shown
    (`full_trace`), the traces a re-plan folds from (`_load_events`), a save or a session-wide view (all
    of them), and, in the background, whenever the agent has been quiet for BACKFILL_IDLE. A fetched
    trace goes into the placeholder itself, which becomes the event the agent journaled.

    From an agent that can (engine.probe.elide) it also asks for the elided stream: the live events that
    only a fold of the engine's state reads (request, usage, messages, parts, blobs) are not sent, and
    `events` is then the agent's journal up to a position (`_jpos`): the snapshot, extended by fetching
    the journal by position when a fold, a save or a session-wide view needs more (`_load_events`),
    and in the background once the agent is quiet. What arrives live beyond that position (turns,
    rarer kinds) waits in `_ahead`, by position, until the journal reaches it; the timeline is drawn
    from it at once.

    The socket is read by `follow()` (the app's reader thread) and, while it waits for a fetch, by the
    thread that asked: one at a time (`_io`); frames a fetcher reads that are not its answer are queued
    for follow(). follow() never waits on the socket: it sleeps on a timer of its own (and a fetcher's
    wake-up) and then reads what is there (engine.probe.poll), so the agent's sends are plain copies
    that wake nobody (on a shared VM a send that wakes a sleeping reader costs the agent tens of us of
    its CPU clock); a turn reaches it within ~16 ms while turns come, 100 ms once the agent is quiet.
    A fetcher, waiting for an answer it asked for, and the snapshot after the hello wait on the socket.
    Once the snapshot is in, the agent writes the live frames into a shared-memory ring it hands this
    client (engine.probe.ring) instead of sending them: a turn costs the agent no system call, and each
    look reads the ring before the socket (which keeps the answers to fetches).

    The agent does not tell it where its journal has reached by batches that hold nothing else (`quiet`,
    engine.probe.elide): once the agent is quiet, the background fetch asks for the journal past what it
    has, and the answer says how long it is.

    On the elided stream it attaches to the snapshot's tail (engine.probe.handshake._start): the agent
    sends the journal from its newest turn on, and the first frame shows that turn with every turn
    before it as a stand-in (`_stand_ins`); follow() then fetches the journal before it by range at
    once, busy agent or not, fills each stand-in in place with its turn's summary as it arrives (in
    journal order: the k-th turn before the tail fills the k-th stand-in and gives it its number, so
    numbers that skip or start again come out right), says how far it has come every PROGRESS_EVERY
    (HistoryProgress: the status line shows it), and yields HistoryFilled when they all are. (The
    whole snapshot of a 5,000-turn session took the agent ~30 s to send at its CPU budget, and nothing
    was drawn until it was in.) A re-sync after lost events takes the same way what it lacks: the tail,
    stand-ins for the turns lost, and the journal between what it holds and the tail (see _connect)."""

    kind = "live"
    # What each turn sent, indexed as the fold builds it (`open_live` sets it: content_search.arrival_index).
    search_index: JournalStream | None = None

    def __init__(
        self,
        pid: int,
        timeout: float = 3.0,
        session: int | None = None,
        *,
        lean: bool = True,
        elide: bool = True,
        backfill_idle: float | None = BACKFILL_IDLE,
        fold: bool = False,
        follow_recording: bool = False,
        on_build: Callable[[int, Built], None] | None = None,
    ) -> None:
        """`lean=False` asks for every turn whole (the stream before the lean one); `elide=False` (with
        lean) for every event (the lean stream before the elided one); `backfill_idle=None` fetches
        summarized traces and elided events only when they are needed. `fold=True` (with elide) asks for
        the fold stream (see _fold_new), so that the agent need not build its turns' traces for us
        (`cp-inspect attach` asks; from an agent that does not offer it, the elided stream); `on_build`
        is then handed each request our fold builds (inspector/sources/live_fold.py: `find PID`).
        `follow_recording=True` asks to read a recording agent's turns from its recording instead
        (engine.probe.handshake, "Following the recording"): if the agent agrees, `client.following` says
        so and nothing is read here (inspector/sources/live_recording.py takes it from there); if not,
        this is the source it would have been without it."""
        super().__init__(
            pid, timeout, session, lean=lean, elide=elide, backfill_idle=backfill_idle, fold=fold
        )
        self.on_build = on_build
        self.follow_recording = follow_recording
        # Attach for the whole snapshot, not its tail: a recording follower that falls back here goes on
        # from the first turn it had not shown, which a tail's stand-ins would not number yet.
        self.whole_snapshot = False
        try:
            self._connect()
        except BaseException:
            # No source to close: the wake-up pair goes now (when_serving retries ten times a second,
            # and each failed attempt left two sockets to the collector), and a client whose snapshot failed.
            client = getattr(self, "client", None)
            if client is not None:
                client.close()
            self._wake_r.close()
            self._wake_w.close()
            raise

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

    def close(self) -> None:
        """Close the probe socket, its shared-memory ring and the wake-up pair. Taken under `_io`, as every
        read of the socket is, so a fetcher or a reader still running as the app exits finds the client
        closed (and disconnected), never a descriptor number another file has taken since. What was
        received stays: a save after this writes it (and fetches nothing more)."""
        with self._io:
            self.client.close()
            self._wake_r.close()
            self._wake_w.close()

    @property
    def target(self) -> str:
        """PID, or PID.SESSION for one conversation of several, as `cp-inspect ps` lists it."""
        return str(self.pid) if self.session is None else f"{self.pid}.{self.session}"

    def _connect(self, resync: bool = False) -> None:
        """Connect and read the journal so far: the hello says how many snapshot events follow.
        `resync`: after events were lost (see follow): on the elided stream, what is held of the
        journal stays (and a history fill under way resumes from where it had reached) (it only grows) and only what is missing is asked for: the
        snapshot's tail, with a stand-in for each turn lost, and the journal between by range."""
        # Before: the whole snapshot again (at 20,000 turns, ~120,000 events at the agent's CPU budget).
        # A drop while the first history fill is under way resumes it too (`filling`): the stand-ins
        # not yet filled stay, and the journal is fetched on from where it had reached; it began again
        # from nothing, and the app's timeline, which keeps what it was handed, got every turn twice.
        filling = resync and self._elided and not self._history_told
        keep = resync and self._elided
        with self._io:
            # The snapshot's tail only (from the newest turn on): the first frame shows that turn at
            # once, and the journal before it comes by range meanwhile (engine.probe.handshake._start).
            self.client = self._attach(tail=self.elide and (self._seen_turns < 0 or keep))
            self.header = {**dict(self.client.hello), "pid": self.pid}
            if self.session is not None:
                # The conversation of a process that serves several (a proxy's, a served fork's): what
                # the status line and the save's default name say, as `ps` lists it.
                self.header["session"] = self.session
            at = self.client.snapshot_at
            size = int(self.client.hello.get("snapshot", 0))
            self._inbox.clear()
            self._early = {}  # (frames of the old connection's ranges)
            self._asked, self._range_end = set(), None  # (asked on the old connection: never answered)
            self._told = not self.client.quiet
            keep = keep and self.client.elide and at > 0 and at >= self._jpos
            keep = keep and self.client.fold == self._folding  # (the other stream's journal: from scratch)
            self._folding = self.client.fold
            if not keep:
                self._tf, self._tf_at, self._fold_views, self._marks = None, 0, {}, {}
                self.events = []
                # The old fold may have gaps: rebuild from scratch.
                self._replayer, self._replayer_len = None, 0
                self._missing, self._unavailable = {}, set()
                self._elided = self.client.elide
                self._jpos, self._ahead, self._ahead_turns = 0, {}, {}
                self._journal_size = 0
            if keep and filling:
                # The stand-ins still waiting keep their turns' places: the journal fetched on from
                # `_jpos` fills them in order, then (past the turns received live, which wait in
                # `_ahead` and are skipped) the stand-ins for the turns lost, added below.
                self._history_at = at
            else:
                # The turns the timeline has (up to the newest handed to it): those of the journal
                # fetched before the tail that are newer fill its stand-ins (all of them, on a first
                # attach).
                self._history_after = self._seen_turns if keep else -1
                self._history, self._history_at, self._history_told = {}, at, True
                self._history_views, self._history_next, self._history_first = [], 0, self._handed
            for i in range(size):
                # Asked for (the hello's snapshot), sent once: read as fast as it comes.
                ev = self.client.recv(timeout=self.timeout, on_socket=True)
                if ev is None:
                    break  # the agent exited mid-snapshot: keep what arrived; follow() reports the disconnect
                self._take(ev, at + i if at else None)
            if at:
                self._journal_size = max(self._journal_size, at + size)
                turns = int(self.client.hello.get("turns", 0))
                if keep:  # the turns lost: those the agent has beyond what the timeline has and the tail
                    turns -= self._handed + len(self._initial) - 1
                self._stand_ins(turns)

    def _attach(self, tail: bool) -> ProbeClient:
        """Connect, asking for the fold stream if we may; an agent from before it refuses protocol 2,
        and is attached to again without it (as every client before it)."""
        fold = self.fold and not self._fold_refused
        while True:
            try:
                return ProbeClient.connect(
                    self.pid,
                    timeout=self.timeout,
                    session=self.session,
                    lean=self.lean,
                    elide=self.elide,
                    poll=True,
                    tail=tail and not self.whole_snapshot,
                    fold=fold,
                    follow=self.follow_recording,
                )
            except ProtocolMismatch:
                if not fold:
                    raise
                self._fold_refused, fold = True, False

    # ---------------------------------------------------------------- the Source interface

    def load_initial(self) -> list[dict[str, Any]]:
        out, self._initial = self._initial, []
        self._handed += len(out)
        return out

    def load_chunks(self) -> Iterator[Chunk]:
        yield Chunk(self.load_initial())

    def full_trace(self, turn: int) -> Trace:
        """The turn's whole trace: received, or fetched now from the agent. Stepping back (a turn older
        than the one asked for before, or than the newest received if none was), the FETCH_BEHIND
        summarized turns before it come along, so the next steps do not ask one by one; following the
        live tail (each turn newer than the last), only the turn itself is fetched."""
        trace = self._by_turn.get(turn)
        shown, self._shown = self._shown, turn
        if trace is None and turn in self._missing:
            back = turn < (self._seen_turns if shown is None else shown)
            older = [t for t in list(self._missing) if t < turn][-FETCH_BEHIND:] if back else []
            self._fetch([turn, *reversed(older)])
            trace = self._by_turn.get(turn)
        if trace is None and turn in self._summaries:
            return self._placeholder_trace(turn)
        if trace is None:
            raise KeyError(f"turn {turn} has not been received from the agent")
        return cast(Trace, trace)  # decoded from the probe: the shape engine.trace built

    def _placeholder_trace(self, turn: int) -> Trace:
        """What is shown of a summarized turn whose trace could not be had (the agent exited first, or
        did not answer within `timeout`): the nearest whole trace's shape (window, thresholds,
        reserves: what the panels draw against) with this turn's summary over it, no sections or
        steps, and an error saying so."""
        near = min(self._by_turn, key=lambda t: abs(t - turn), default=None)
        trace: dict[str, Any] = dict(self._by_turn[near]) if near is not None else {}
        # A summary carries a compaction record only for a turn that compacted: the nearest turn's
        # must not stand in for this one's (the key stays, empty, as the panels read it with .get).
        if "compaction" in trace:
            trace["compaction"] = None
        trace.update(self._summaries[turn])
        trace.update(
            {
                "turn": turn,
                "sections": [],
                "steps": [],
                "skipped": [],
                "markers": [],
                "latch_flips": [],
                "spill_failures": [],
                "cacheable_prefix_tokens": 0,
                "request_sha256": "",
                "prefix_sha256": "",
                "error": self._summaries[turn].get("error")
                or (
                    f"turn {turn}'s trace was not received from the agent (only its summary: it was sent "
                    "while turns came back to back, and the agent did not answer when it was asked for)"
                ),
            }
        )
        return cast(Trace, trace)

    def shadow_summary(self) -> dict[str, Any] | None:
        """The session-wide shadow totals without fetching anything: of a turn they read only its
        `final_tokens`, which a summary holds. (The TUI asks for them as turns arrive; fetching every
        summarized trace for them was nearly all the traces a following inspector had the agent send.)"""
        from engine.shadow import shadow_summary

        with self._lock:
            with self._state:  # (on the elided stream, what arrived beyond the journal fetched counts too)
                seen = len(self.events) + len(self._ahead) * (1 << 32)
                held = [*self.events, *self._ahead.values()]
            if self._shadow is not None and self._shadow[0] == seen:
                return self._shadow[1]
            events = []
            used = set()
            for e in held:
                summary = e.get("summary") if e.get("k") == "turn" else None  # a placeholder, not fetched
                events.append(e if summary is None else {"k": "turn", "turn": e["turn"], "trace": summary})
                if e.get("k") == "usage":
                    used.add(e.get("turn"))
            # The elided stream leaves `usage` events out until the journal is fetched; a turn's trace
            # (or summary) holds the same usage (engine.pipeline.record_usage), which is what they read.
            for e in list(events):
                if e.get("k") == "turn" and e.get("turn") not in used and (e["trace"] or {}).get("usage"):
                    events.append({"k": "usage", "turn": e["turn"], "usage": e["trace"]["usage"]})
            result = shadow_summary(events)
            self._shadow = (seen, result)
            return result

    def _load_events(self, upto_turn: int | None = None) -> None:
        """Every event is here already; what a lean stream summarized is fetched before it is read: the
        traces a fold up to `upto_turn` takes (the turns just before it and before each checkpoint), or
        all of them (None: a save, a session-wide what-if or shadow summary). On the elided stream the
        journal itself is fetched first, through the turn after `upto_turn` or to its end."""
        if self._elided:
            stop = None if upto_turn is None else self._journal_stop(upto_turn)
            if upto_turn is None or stop is not None:
                self._fetch_journal(stop)
        if upto_turn is None and self._elided:
            short = self._streamed_end() - self._jpos
            if short > 0:
                raise ProbeError(
                    f"{counted(short, 'event')} of the agent's journal {'was' if short == 1 else 'were'} not "
                    f"received (it exited before {'it was' if short == 1 else 'they were'} fetched); "
                    "`cp-inspect attach PID --record FILE` keeps every event as it comes"
                )
        if not self._missing:
            return
        if upto_turn is None:
            # FETCH_QUEUE at a time: the agent answers a client's turns beyond that "not available".
            for _ in range(1 + len(self._missing) // FETCH_QUEUE):
                self._fetch(list(self._missing)[:FETCH_QUEUE])
            missing = [*self._missing, *sorted(self._unavailable)]
            if missing:
                # One turn read "1 turns' traces were not received".
                raise ProbeError(
                    f"turn {missing[0]}'s trace was not received from the agent: it sent its summary while "
                    "busy and exited before it was fetched"
                    if len(missing) == 1
                    else f"{len(missing)} turns' traces were not received from the agent (e.g. turn "
                    f"{missing[0]}): it sent their summaries while busy and exited before they were fetched"
                )
            return
        from engine.recording.replay import CHECKPOINT_EVERY

        need = [
            t
            for t in list(self._missing)
            if upto_turn - _FOLD_BEHIND <= t < upto_turn
            or (t < upto_turn and (t + 1) % CHECKPOINT_EVERY == 0)
        ]
        self._fetch(need)

    def follow(self) -> Iterator[SourceEvent]:
        quiet_since = time.monotonic()
        told: tuple[int, int, int] | None = None  # the history's progress last said, and when
        told_at = 0.0
        while True:
            progress = self.history_progress()
            if (
                progress is not None
                and progress != told
                and (told is None or time.monotonic() - told_at >= PROGRESS_EVERY)
            ):
                told, told_at = progress, time.monotonic()
                yield HistoryProgress(*progress)
            if not self._history_told and self._fetch_history():
                self._history_told = True
                self._history.clear()  # (those the agent did not send stay as they are)
                yield HistoryFilled()
            try:
                ev, at = self._read(0.05 if not self._history_told else 0.5)
            except Exception as exc:  # an error frame or a broken socket ends the stream, never the app
                yield Disconnected(f"connection lost: {exc}")
                return
            if ev is None:
                if self.client.disconnected:
                    yield Disconnected(f"agent pid {self.target} disconnected")
                    return
                if _reader_cancelled():
                    # The app quit while the agent is idle: end here, since the reader only looks at its
                    # cancel flag between events and the process would wait for this thread at exit.
                    return
                self._note_held()
                idle = self.backfill_idle
                if idle is not None and time.monotonic() - quiet_since >= idle:
                    # The agent is quiet: fetch what the stream left out or summarized while it was busy.
                    self._backfill()
                continue
            if ev.get("k") in ("journal", "trace"):  # answers to fetches, not the agent's activity
                self._take(ev)
                idle = self.backfill_idle
                if idle is not None and time.monotonic() - quiet_since >= idle:
                    self._backfill()  # the next range (or traces) at once
                continue
            quiet_since = time.monotonic()
            # The agent journals on: ask how far once it is quiet, unless it says when it holds events back.
            self._told = not self.client.quiet or self.client.held() is not None
            if ev.get("k") == "dropped":
                # We were too slow and lost events: re-sync (the journal we replay from must stay whole),
                # then hand on the turns that arrived meanwhile (or stand-ins for them, filled as the
                # journal they are in arrives).
                yield EventsLost(int(ev.get("count", 0)))
                self.client.close()
                try:
                    self._connect(resync=True)
                except Exception as exc:
                    yield Disconnected(f"re-sync failed: {exc}")
                    return
                for missed in self.load_initial():
                    yield NewTurn(missed)
                continue
            trace = self._take(ev, at)
            if trace is not None:
                self._initial.clear()
                self._handed += 1
                yield NewTurn(trace)


def _reader_cancelled() -> bool:
    """True when this runs in a Textual worker that has been cancelled (the app is quitting)."""
    try:
        from textual.worker import get_current_worker

        return get_current_worker().is_cancelled
    except Exception:  # not inside a worker (a test, `explain PID`): nobody to cancel us
        return False
