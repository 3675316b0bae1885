"""The two real sources behind the app: a recording file and a live agent's probe socket.

Both keep the journal events they have seen and embed the engine (a Replayer) for what-if re-plans
and for showing section content; panels only ever see traces (dicts).
"""

from __future__ import annotations

import socket
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any, cast

from engine.probe.client import ProbeClient, ProbeError, ProtocolMismatch
from engine.probe.elide import RANGE_MAX
from engine.probe.lean import FETCH_MAX, FETCH_QUEUE
from engine.probe.readable import readable
from engine.recording.journal import unpack_event
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
from inspector.sources.live_fold import Folded, TraceFold
from inspector.sources.replaying import ReplayingSource
from inspector.timeline import summarize

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


class LiveSource(ReplayingSource):
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
    ) -> None:
        """`lean=False` asks for every turn whole (the stream before the lean one); `elide=False` (with
        lean) for every event (the lean stream before the elided one); `backfill_idle=None` fetches
        summarized traces and elided events only when they are needed. `fold=True` (with elide) asks for
        the fold stream (see _fold_new), so that the agent need not build its turns' traces for us
        (`cp-inspect attach` asks; from an agent that does not offer it, the elided stream)."""
        super().__init__()
        self.pid, self.timeout = pid, timeout
        self.backfill_idle = backfill_idle
        self.session = session  # one of the conversations a proxy serves (`PID.SESSION` in `ps`)
        self.lean = lean
        self.elide = lean and elide  # asked for; `_elided` says whether the agent sends it
        self._elided = False
        # The fold stream (engine.probe.elide.fold_out), asked for with `fold=True`; from an agent
        # from before it (it refuses protocol 2) the elided stream, as ever (`_fold_refused`).
        self.fold = self.elide and fold
        self._fold_refused = False
        self._folding = False  # the agent sends the fold stream
        self._tf: TraceFold | None = None  # our fold of `events` (see _fold_new)
        self._tf_at = 0  # events folded so far
        # Turns closed by a marker that the fold could not build yet (their request before what it has,
        # a mismatch): their timeline entry, filled when the agent's own trace (asked for) or the
        # fold's arrives.
        self._fold_views: dict[int, dict[str, Any]] = {}
        # Markers of turns the agent sent in a range answer or its snapshot unbuilt (`turn_deferred`, the
        # fold stream's: see engine.probe.elide.for_fold), by turn, until our fold closes them: each
        # is then the turn event, with the fold's trace (or a placeholder for the agent's, asked for).
        self._marks: dict[int, dict[str, Any]] = {}
        self._jpos = 0  # journal position where `events` ends (elided stream)
        self._ahead: dict[int, dict[str, Any]] = {}  # position -> event received beyond _jpos, in order
        self._ahead_turns: dict[int, int] = {}  # turn -> position of its event in _ahead
        self._range_end: int | None = None  # the end of the journal range asked for, until answered
        # The connection a range request could not be sent on (the agent closed its end): not asked
        # again. The follow loop, not reading meanwhile, would otherwise send one each idle pass.
        self._unsent_on: Any = None
        self._early: dict[int, dict[str, Any]] = {}  # journal frames handled before the one before them
        self._journal_size = 0  # the agent's journal length, as its last range answer said
        # The journal's length has been asked for since the last live event (an agent that sends no
        # batch only to say where its journal has reached: see _backfill).
        self._told = False
        # From an agent that says in our ring when it holds events back (engine.probe.ring, "Held
        # events"), the journal's end is asked for only then, once it has journaled nothing for
        # backfill_idle: the count of held events asked for last.
        self._held_asked = 0
        self._held_seen, self._held_since = 0, 0.0  # the count seen last, and since when
        self.fetched_events = 0  # journal events fetched (diagnostics, tests)
        # Guards the stream's state (`events` growing, `_ahead`, `_jpos`, the range asked for) for the
        # reader and a fetcher. Held only briefly, never while waiting on the socket: `_lock` is held by
        # a fold or a save while it waits for a fetch, and the reader must be able to take the answer.
        self._state = threading.RLock()
        self._initial: list[dict[str, Any]] = []
        self._by_turn: dict[int, dict[str, Any]] = {}  # every whole trace received, for full_trace()
        self._seen_turns = -1  # the newest turn handed to the app, so a re-sync only adds newer ones
        self._io = threading.Lock()  # held while reading the socket
        self._inbox: deque[tuple[dict[str, Any], int | None]] = deque()  # frames a fetcher read for follow()
        self._wake_r, self._wake_w = socket.socketpair()  # a fetcher's wake-up for follow()'s wait
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._missing: dict[int, dict[str, Any]] = {}  # summarized turn -> its placeholder event
        self._summaries: dict[int, dict[str, Any]] = {}  # and its summary (also once fetched)
        self._asked: set[int] = set()  # fetched, not answered yet
        self._unavailable: set[int] = set()  # the agent answered that it has no such turn
        self.fetched = 0  # traces fetched (diagnostics, tests)
        # The turns whose trace our fold rebuilt (fold stream; diagnostics, tests). A set: a held turn's
        # marker can come both in a range answer (the backfill after idle) and on the stream, and both
        # paths close it with the same fold result (_mark_folded, then _folded_turn): one turn, not two.
        self._folded: set[int] = set()
        self.asked_traces = 0  # turns whose trace the fold stream had us ask the agent for (`trace N`)
        self._shown: int | None = None  # the turn full_trace was last asked for (None: not yet)
        # Attached to the snapshot's tail (see _connect): the journal before `_history_at` is fetched
        # by range at once, and `_history` holds, by turn, the timeline's stand-in for each turn in it
        # until its summary arrives (the dict the timeline holds, filled in place).
        self._history_at = 0
        self._history: dict[int, dict[str, Any]] = {}
        # The stand-ins in timeline order, and how many of them the journal's turns have filled: the
        # k-th turn of the journal before the tail fills the k-th stand-in, whatever its number (the
        # numbers given them are a guess: turns numbered without gaps up to the newest).
        self._history_views: list[dict[str, Any]] = []
        self._history_next = 0
        self._history_first = 0  # the timeline position of the first stand-in
        self._history_after = -1  # turns numbered up to this were in the timeline before the stand-ins
        self._handed = 0  # turns handed to the app (load_initial, NewTurn): the timeline's length
        self._history_told = True  # the app was told the history is complete (HistoryFilled)
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
                self._replayer, self._replayer_len = None, 0  # the old fold may have gaps: rebuild from scratch
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
                    tail=tail,
                    fold=fold,
                )
            except ProtocolMismatch:
                if not fold:
                    raise
                self._fold_refused, fold = True, False

    @property
    def folded_turns(self) -> int:
        """How many turns our fold rebuilt (each once, whichever way its marker came)."""
        return len(self._folded)

    def _fold_new(self) -> dict[int, Folded]:
        """Fold the events that joined `events` since the last call (under `_state`) into our own replay
        Pipeline (inspector.sources.live_fold), and hand back the turns they closed. On the fold stream
        the agent builds no trace (engine.probe.elide.fold_out): a turn's is rebuilt here from the
        journal, checked against the request's hash. A turn the fold could not build (a mismatch, a
        request from before what it folded) and that waits in `_fold_views` is asked of the agent
        (`trace N`); one the fold builds later (the history before the tail arrived) is filled then."""
        done: dict[int, Folded] = {}
        if not self._folding:
            return done
        if self._tf is None:
            self._tf = TraceFold(self._counter())
        tf, evs = self._tf, self.events
        while self._tf_at < len(evs):
            ev = evs[self._tf_at]
            self._tf_at += 1
            try:
                r = tf.feed(ev)
            except Exception:
                # A journal our engine cannot fold (another engine version's): every turn from here is
                # the agent's own trace, asked for.
                self._folding = False
                break
            if r is not None:
                done[r.turn] = r
                mark = self._marks.pop(r.turn, None)
                if mark is not None:
                    self._mark_folded(mark, r)
                if r.turn in self._fold_views and r.turn in self._missing:
                    # A marker's turn the fold could not build when it came (the history before it
                    # had not arrived): whole now, whether or not the agent's answer comes first.
                    # (A turn of the history the agent built, summarized, stays the agent's to fetch.)
                    if r.trace is not None:
                        self._answer({"k": "trace", "turn": r.turn, "trace": r.trace})
                    elif r.turn not in self._asked and self.client.request_trace(r.turn):
                        # Rebuilt to another hash (see _folded_turn): the agent's own, asked for now.
                        self._asked.add(r.turn)
                        self.asked_traces += 1
        return done

    def _mark_folded(self, obj: dict[str, Any], r: Folded) -> None:
        """A marker from a range answer (or the snapshot) closed by our fold: it becomes the turn event,
        with the trace rebuilt, filling the history's stand-in for it; or, the fold having rebuilt
        another request (or none), a placeholder for the agent's own trace, asked for."""
        turn = r.turn
        if r.trace is not None:
            obj.clear()
            obj.update({"k": "turn", "turn": turn, "trace": r.trace})
            self._by_turn[turn] = r.trace
            self._fill_placeholder(turn, r.trace)
            self._filled(turn, r.trace)
            self._folded.add(turn)
            return
        if turn in self._by_turn:  # (the agent sent it whole meanwhile)
            obj.clear()
            obj.update({"k": "turn", "turn": turn, "trace": self._by_turn[turn]})
            return
        view = self._history.get(turn) or self._summaries.get(turn) or _stand_in(turn)
        obj.clear()
        obj.update({"k": "turn", "turn": turn, "summary": view})
        self._missing[turn] = obj
        self._summaries[turn] = view
        if turn not in self._asked and self.client.request_trace(turn):
            self._asked.add(turn)
            self.asked_traces += 1

    def _folded_turn(self, obj: dict[str, Any], turn: int) -> dict[str, Any]:
        """A fold stream's marker of `turn` (`obj`, where the journal has it): the turn's trace, rebuilt
        (the marker becomes the `turn` event the agent would have journaled), or, if the fold cannot
        build it, the agent's own asked for (`trace N`: the marker becomes a placeholder filled by the
        answer, and the timeline's entry a stand-in filled with it). The timeline's form of the turn."""
        r = self._fold_new().get(turn)
        if obj.get("k") == "turn" and isinstance(obj.get("trace"), dict):
            return obj["trace"]  # (a range answer's marker, `obj` itself, closed by that fold: _mark_folded)
        trace = r.trace if r is not None else None
        known = self._by_turn.get(turn)
        if trace is None and known is not None:
            trace = known
        if trace is not None:
            obj.clear()
            obj.update({"k": "turn", "turn": turn, "trace": trace})
            self._by_turn[turn] = trace
            self._fill_placeholder(turn, trace)
            if r is not None and r.trace is not None:
                self._folded.add(turn)
            return trace
        view = _stand_in(turn)
        obj.clear()
        obj.update({"k": "turn", "turn": turn, "summary": view})
        self._missing[turn] = obj
        self._summaries[turn] = view
        self._fold_views[turn] = view
        if r is None and not self._history_told:
            # The history before the snapshot's tail is still arriving: the fold builds this turn once
            # it has (see _fold_new), so the agent is not asked for it meanwhile. Asking for every turn
            # that closed during a fill had the probe build and send a trace a turn (the work the fold
            # stream spares the agent), a queue of them it answered far slower than a busy agent's turns
            # came, within the CPU budget that the fill itself then lacked (bench_probe_fill --fold:
            # the fill of a 1,500-turn history never ended). A stand-in stepped onto is fetched as ever.
            return view
        if turn not in self._asked and self.client.request_trace(turn):
            self._asked.add(turn)
            self.asked_traces += 1
        return view

    def _stand_ins(self, turns: int) -> None:
        """The timeline's turns before the snapshot's tail, as stand-ins filled in place when their
        summaries arrive (the journal fetched by range, see follow): the agent's `turns` turns are
        numbered up to the newest one received. The first frame draws them with the newest turn;
        stepping onto one fetches its trace as for any summarized turn."""
        newest = self._seen_turns
        if turns <= 1 or newest < 0:
            return  # nothing before the tail
        # Numbered as if no turn number were skipped: the journal's own numbers replace these as its
        # turns arrive, in order (_history_turn). A session whose numbers skip (events lost, a numbering
        # that restarts) had its stand-ins filled by number, the wrong turns or none.
        views = []
        for t in range(newest - turns + 1, newest):
            view = _stand_in(t)
            views.append(view)
            self._history[t] = view
            self._summaries[t] = view
            self._missing[t] = {"k": "turn", "turn": t, "summary": view}
        self._initial[:0] = views
        # (After a drop during the first fill, those still waiting come first: see _connect.)
        self._history_views = [*self._history_views, *views] if not self._history_told else views
        self._history_told = False

    def _history_turn(self, turn: int, summary: dict[str, Any]) -> None:
        """The next turn of the journal before the tail arrived (its summary, or its trace): it fills
        the next stand-in, which takes its number (the stand-in's own, a guess, is let go)."""
        k = self._history_next
        if k >= len(self._history_views):
            return  # more turns than the hello counted: the timeline has no place for them
        self._history_next = k + 1
        view = self._history_views[k]
        guess = view["turn"]
        if self._history.get(guess) is view:
            del self._history[guess]
        held = self._missing.get(guess)
        if guess != turn:
            if held is not None and held.get("summary") is view:
                del self._missing[guess]  # the guess's placeholder, never fetched: nothing else holds it
            if self._summaries.get(guess) is view:
                del self._summaries[guess]
            # Asked for under the guess (stepped onto), the agent may have had no such turn: not a turn
            # of its journal that a save would miss.
            self._unavailable.discard(guess)
        view.clear()  # (a fetch under the guessed number may have filled it with another turn)
        view.update(summarize(summary))

    def _history_mark(self, turn: int) -> None:
        """The next turn of the journal before the tail arrived as its marker (its trace not built by
        the agent): it takes the next stand-in, which our fold fills (see _mark_folded)."""
        k = self._history_next
        if k >= len(self._history_views):
            return
        self._history_next = k + 1
        view = self._history_views[k]
        guess = view["turn"]
        if guess != turn:
            if self._history.get(guess) is view:
                del self._history[guess]
            held = self._missing.get(guess)
            if held is not None and held.get("summary") is view:
                del self._missing[guess]
            if self._summaries.get(guess) is view:
                del self._summaries[guess]
            self._unavailable.discard(guess)
            view["turn"] = turn
        self._history[turn] = view

    def history_progress(self) -> tuple[int, int, int] | None:
        """(stand-ins filled, stand-ins, the first one's timeline position) while the history before
        the tail is arriving, else None."""
        if self._history_told:
            return None
        return self._history_next, len(self._history_views), self._history_first

    def _filled(self, turn: int, summary: dict[str, Any]) -> None:
        """A stand-in's turn summarized (or whole): the timeline's dict takes its values, key by key (the
        app may be drawing it meanwhile: every key is there throughout)."""
        view = self._fold_views.pop(turn, None)
        if view is not None:
            view.update(summarize(summary))
        view = self._history.pop(turn, None)
        if view is not None:
            view.update(summarize(summary))

    def _take(self, ev: dict[str, Any], at: int | None = None) -> dict[str, Any] | None:
        """Keep one frame of the stream (`at`: its journal position, on the elided stream); the
        timeline's form of a new turn, if it is one."""
        kind = ev.get("k")
        if kind == "trace":
            self._answer(ev)
            return None
        if kind == "error" and "code" in ev:
            return None  # a request of ours the agent refused (fatal errors end the stream in recv)
        if kind == "journal":
            self._extend(ev)
            return None
        if at is not None and self._elided:
            with self._state:
                return self._take_ahead(ev, at)
        if kind in ("hello", "pong", "dropped"):
            return None
        self._jpos += 1  # (before the agent read our hello, the stream was the journal itself)
        if kind == "turn_deferred" and self._folding:
            # A whole snapshot's turn the agent did not build (engine.probe.elide.for_fold): our fold,
            # which has the journal from its start, builds it.
            turn = ev.get("turn")
            if type(turn) is not int:
                return None
            obj: dict[str, Any] = {"k": "turn_deferred", "turn": turn}
            self.events.append(obj)
            return self._new_turn(obj, turn)
        if kind == "turn_summary":
            turn, summary = ev.get("turn"), ev.get("summary")
            if type(turn) is not int or not isinstance(summary, dict) or turn <= self._seen_turns:
                return None
            self._seen_turns = turn
            placeholder: dict[str, Any] = {"k": "turn", "turn": turn, "summary": summary}
            self.events.append(placeholder)
            self._missing[turn] = placeholder
            self._summaries[turn] = summary
            out = summarize(summary)
            self._initial.append(out)
            return out
        ev = unpack_event(ev)
        self.events.append(ev)
        if kind == "turn" and ev["turn"] > self._seen_turns:
            self._seen_turns = ev["turn"]
            self._by_turn[ev["turn"]] = ev["trace"]
            self._initial.append(ev["trace"])
            return ev["trace"]  # type: ignore[no-any-return]
        return None

    def _answer(self, ev: dict[str, Any]) -> None:
        """A fetched trace: it goes into its placeholder, which is then the event the agent journaled."""
        turn, trace = ev.get("turn"), ev.get("trace")
        if type(turn) is not int:
            return
        self._asked.discard(turn)
        placeholder = self._missing.pop(turn, None)
        if placeholder is None:
            return
        if not isinstance(trace, dict):
            self._unavailable.add(turn)
            return
        placeholder["trace"] = trace
        del placeholder["summary"]  # now {"k", "turn", "trace"}: the journal's event, key for key
        self._by_turn[turn] = trace
        self._filled(turn, trace)
        self.fetched += 1

    def _fill_placeholder(self, turn: int, trace: dict[str, Any]) -> None:
        """A summarized turn's whole trace arrived live (the newest of a later send): fill its
        placeholder, made when the journal was fetched past it."""
        placeholder = self._missing.pop(turn, None)
        if placeholder is not None:
            placeholder["trace"] = trace
            placeholder.pop("summary", None)

    def _take_ahead(self, ev: dict[str, Any], at: int) -> dict[str, Any] | None:
        """An elided stream's event at journal position `at`: the timeline gets a new turn at once; the
        event joins `events` when the journal there is (now, if nothing before it was left out)."""
        kind = ev.get("k")
        out: dict[str, Any] | None = None
        obj: dict[str, Any]
        if kind == "turn_summary":
            turn, summary = ev.get("turn"), ev.get("summary")
            if type(turn) is not int or not isinstance(summary, dict):
                return None
            self._summaries[turn] = summary
            known = self._missing.get(turn)
            if known is None and turn in self._by_turn:
                obj = {"k": "turn", "turn": turn, "trace": self._by_turn[turn]}
            else:
                obj = known if known is not None else {"k": "turn", "turn": turn, "summary": summary}
                self._missing[turn] = obj
            if turn > self._seen_turns:
                self._seen_turns = turn
                out = summarize(summary)
        elif kind == "turn_deferred":  # the fold stream's: the turn closed here, its trace not built
            turn = ev.get("turn")
            if type(turn) is not int:
                return None
            obj = {"k": "turn_deferred", "turn": turn}
        else:
            obj = unpack_event(ev)
            if kind == "turn" and type(obj.get("turn")) is int and isinstance(obj.get("trace"), dict):
                turn = obj["turn"]
                self._by_turn[turn] = obj["trace"]
                self._fill_placeholder(turn, obj["trace"])
                if turn > self._seen_turns:
                    self._seen_turns = turn
                    out = obj["trace"]
        if kind != "turn_deferred" and out is not None:
            self._initial.append(out)
        if at < self._jpos:
            if kind == "turn_deferred":  # the journal fetched got here first (as the turn's summary)
                obj = next((e for e in self.events[at : at + 1] if e.get("turn") == obj["turn"]), obj)
                return self._new_turn(obj, obj["turn"])
            return out  # the journal fetched got here first: the event is in `events` already
        if at == self._jpos and not self._ahead:
            self.events.append(obj)  # nothing left out before it
            self._jpos += 1
        else:
            self._ahead[at] = obj
            if obj.get("k") in ("turn", "turn_deferred"):
                self._ahead_turns[obj["turn"]] = at
            if self._folding:
                self._drain_ahead()
        if kind == "turn_deferred":
            return self._new_turn(obj, obj["turn"])
        return out

    def _drain_ahead(self) -> None:
        """The fold stream leaves nothing out: what waits in `_ahead` from `_jpos` on is the journal
        itself, so it joins `events` as soon as the journal before it is there (the elided stream's
        waits for a range, which has the events it left out), and the fold reaches the newest turn."""
        ahead = self._ahead
        while self._jpos in ahead:
            obj = ahead.pop(self._jpos)
            self.events.append(obj)
            if obj.get("k") in ("turn", "turn_deferred"):
                self._ahead_turns.pop(obj["turn"], None)
            self._jpos += 1

    def _new_turn(self, obj: dict[str, Any], turn: int) -> dict[str, Any] | None:
        """A fold stream's turn closed at `obj` (see _folded_turn): the timeline's new entry, if newer."""
        if obj.get("k") == "turn" and isinstance(obj.get("trace"), dict):
            shown = obj["trace"]  # (the history's journal had it whole)
        else:
            shown = self._folded_turn(obj, turn)
        if turn <= self._seen_turns:
            return None
        self._seen_turns = turn
        self._initial.append(shown)
        return shown

    def _extend(self, frame: dict[str, Any]) -> None:
        """A range of the agent's journal (the answer to fetch_journal): appended to `events` from
        `_jpos` on, each event the one received live at that position if there was one (the same
        placeholder, so a trace fetch fills it) or a new placeholder for a summarized turn. A frame
        that starts past `_jpos` waits in `_early` for the one before it: two threads read the socket
        (follow() and a fetcher), each takes one frame under `_io` and handles it after letting `_io`
        go, so the later frame of a range may be handled first. It was dropped, the range never
        completed, and no other was asked for: the history's fill stopped for good (attached at
        50,000 turns, stepping back during the fill stopped it at 6,054 turns)."""
        at = frame.get("at")
        with self._state:
            if type(at) is int and at > self._jpos and isinstance(frame.get("events"), list):
                self._early[at] = frame
                return
            self._extend_at(frame)
            while self._early:
                # The frames that waited for this one, in order (one that overlaps is cut to fit).
                ready = [a for a in self._early if a <= self._jpos]
                if not ready:
                    break
                for a in sorted(ready):
                    self._extend_at(self._early.pop(a))
            if self._folding:
                self._drain_ahead()
                self._fold_new()

    def _extend_at(self, frame: dict[str, Any]) -> None:
        """_extend's part for a frame that starts at or before `_jpos` (under `_state`)."""
        at, evs, size = frame.get("at"), frame.get("events"), frame.get("size")
        if type(size) is int:
            self._journal_size = max(self._journal_size, size)
        if type(at) is not int or not isinstance(evs, list) or type(size) is not int:
            self._range_end = None  # refused (malformed, or too many asked): nothing more comes
            return
        for e in evs[max(0, self._jpos - at) :] if at <= self._jpos else ():
            p = self._jpos
            obj = self._ahead.pop(p, None)
            if obj is None and isinstance(e, dict):
                obj = self._from_journal(e, p < self._history_at)
            if obj is not None:
                self.events.append(obj)
                if obj.get("k") == "turn":
                    self._ahead_turns.pop(obj["turn"], None)
            self._jpos += 1
            self.fetched_events += 1
        end = self._range_end
        if end is not None and (self._jpos >= end or self._jpos >= size):
            self._range_end = None

    def _from_journal(self, e: dict[str, Any], history: bool = False) -> dict[str, Any] | None:
        """The in-memory form of one fetched journal event (None: the agent could not send it);
        `history`: from the journal before the snapshot's tail, whose turns fill the stand-ins."""
        kind = e.get("k")
        if kind == "omitted":
            return None
        if kind == "turn_deferred":  # the fold stream's (see _marks): our fold builds its trace
            turn = e.get("turn")
            if type(turn) is not int:
                return None
            if turn in self._by_turn:
                return {"k": "turn", "turn": turn, "trace": self._by_turn[turn]}
            if history and self._history_views and turn > self._history_after:
                self._history_mark(turn)
            mark = self._marks[turn] = {"k": "turn_deferred", "turn": turn}
            return mark
        if kind != "turn_summary":
            ev = unpack_event(e)
            if (
                history
                and kind == "turn"
                and type(ev.get("turn")) is int
                and isinstance(ev.get("trace"), dict)
                and ev["turn"] > self._history_after
            ):
                self._history_turn(ev["turn"], ev["trace"])  # (an agent that sends it whole)
            return ev
        turn, summary = e.get("turn"), e.get("summary")
        if type(turn) is not int or not isinstance(summary, dict):
            return None
        if history and self._history_views and turn > self._history_after:
            self._history_turn(turn, summary)  # the next stand-in is this turn now
        if turn in self._by_turn:
            return {"k": "turn", "turn": turn, "trace": self._by_turn[turn]}
        placeholder = self._missing.get(turn)
        if placeholder is None:  # not received live yet: its summary comes, and is drawn, with it
            placeholder = self._missing[turn] = {"k": "turn", "turn": turn, "summary": summary}
        else:  # received as a summary, or a stand-in's (numbered right): the summary it is
            placeholder["summary"] = summary
        self._summaries[turn] = summary
        return placeholder

    def _ask_range(self, stop: int | None) -> str | None:
        """Ask for the journal from `_jpos` to `stop` (None: its end), RANGE_MAX at most: "asked", or
        "busy" if a range is being answered already, "unsent" if the agent is gone (the request could
        not be sent), or None when there is nothing to ask (or no way)."""
        with self._state:
            if self._range_end is not None:
                return "busy"
            lo = self._jpos
            hi = lo + RANGE_MAX if stop is None else min(stop, lo + RANGE_MAX)
            if hi <= lo or self.client.disconnected:
                return None
            if self._unsent_on is self.client:
                return "unsent"
            self._range_end = hi
        if not self.client.fetch_journal(lo, hi):
            with self._state:
                self._range_end = None  # not sent: no answer is coming
                self._unsent_on = self.client
            return "unsent"
        return "asked"

    def _fetch_journal(self, stop: int | None) -> None:
        """Fetch the journal from `_jpos` to `stop` (None: to its end as the agent has it now), taking
        the answers while follow() is not reading, until it is here or `timeout` passes."""
        deadline = time.monotonic() + self.timeout
        asked = False
        while not self.client.disconnected and time.monotonic() < deadline:
            at = self._jpos
            with self._state:
                if stop is not None and self._jpos >= stop:
                    return
                # Our own answer says how long the journal is: past that there is nothing to ask for.
                if asked and self._range_end is None and self._jpos >= max(self._journal_size, self._streamed_end()):
                    return
            status = self._ask_range(stop)
            if status == "unsent":
                # The agent closed its end, having sent what we had not fetched on its way out (see
                # engine.probe.loop._settle_on_close): read on to the end of the stream for it.
                self._take_answers(lambda: False, deadline)
                return
            if status is None:
                return
            asked = asked or status == "asked"
            self._take_answers(lambda: self._range_end is None, deadline)
            if self._jpos > at:  # (follow() may have taken the answer) progress: the agent is answering
                deadline = time.monotonic() + self.timeout

    # ---------------------------------------------------------------- reading the socket

    def _read(self, timeout: float) -> tuple[dict[str, Any] | None, int | None]:
        """The next frame from the socket and its journal position (elided stream), waiting at most
        `timeout` without holding `_io` (a fetcher may read meanwhile). Raises what ProbeClient.recv
        raises."""
        with self._io:
            if self._inbox:  # a fetcher read these first: they come before anything still unread
                return self._inbox.popleft()
            ev, at = self.client.recv_at(0)
        if ev is None and not self.client.disconnected:
            poll = self.client.poll
            try:
                if poll is not None:
                    # On a timer of our own (and a fetcher's wake-up), not on the agent's socket: its
                    # sends then never pay for waking us (engine.probe.poll).
                    readable([self._wake_r.fileno()], min(timeout, poll.idle()))
                else:
                    readable([self.client.fileno(), self._wake_r.fileno()], timeout)
            except (OSError, ValueError):
                pass  # the socket closed meanwhile: recv below says so
            self._drain_wake()
            with self._io:
                if self._inbox:
                    return self._inbox.popleft()
                ev, at = self.client.recv_at(0)
        return ev, at

    def _drain_wake(self) -> None:
        try:
            while self._wake_r.recv(4096):
                pass
        except OSError:
            pass

    def _fetch(self, turns: list[int], wait: bool = True) -> None:
        """Ask the agent for the traces of those of `turns` still summarized, and (wait=True) take the
        answers, reading the socket while follow() is not, until they are all in or `timeout` passes."""
        want = [t for t in turns if t in self._missing]  # (dict reads: follow() may be adding turns)
        ask = [t for t in want if t not in self._asked]
        if not want or self.client.disconnected:
            return
        for i in range(0, len(ask), FETCH_MAX):
            part = ask[i : i + FETCH_MAX]
            if not self.client.fetch(part):
                break  # the agent is gone: what it sent before is still read (and then the end)
            self._asked.update(part)
        if wait:
            self._take_answers(lambda: not any(t in self._missing for t in want), time.monotonic() + self.timeout)

    def _take_answers(self, done: Callable[[], bool], deadline: float) -> None:
        """Read the socket while follow() is not, taking fetch answers (traces, journal ranges) and
        queueing the stream's events for follow(), until `done()` or the deadline, which each answer
        moves on by `timeout` (a save of a long session takes many; only silence is a failure)."""
        while not done() and not self.client.disconnected:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            if not self._io.acquire(timeout=min(left, 0.05)):
                continue  # follow() is reading: it takes the answers itself
            try:
                # An answer asked for now, sent once by the agent's I/O thread: read off the socket if it
                # is there, and waited for below with `_io` let go. Held through each 50 ms wait and taken
                # again at once, it kept follow() from the live frames for as long as a fetch lasted (the
                # fold of the newest turn of a 40,000-turn session fetching the journal before it while
                # the history filled: the view stopped following the agent for tens of seconds).
                ev, at = self.client.recv_at(0, on_socket=True)
                kind = ev.get("k") if ev is not None else None
                if ev is not None and kind not in ("trace", "journal"):
                    # The stream's next event, for follow(), queued before `_io` is let go: follow()
                    # looks in the queue before it reads, so events keep their order (a newer turn
                    # taken first would leave the older one out of the timeline).
                    self._inbox.append((ev, at))
            except Exception:
                ev, kind = None, None  # follow() sees the broken stream and reports it
            finally:
                self._io.release()
            if ev is None:
                if not self.client.disconnected:
                    try:
                        readable([self.client.fileno()], min(left, 0.05))
                    except (OSError, ValueError):
                        pass  # the socket closed meanwhile: the next read says so
                continue
            if kind in ("trace", "journal"):
                deadline = max(deadline, time.monotonic() + self.timeout)
            if kind == "trace":
                self._answer(ev)
            elif kind == "journal":
                self._extend(ev)
            else:
                try:
                    self._wake_w.send(b"\0")
                except OSError:
                    pass

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
            if upto_turn - _FOLD_BEHIND <= t < upto_turn or (t < upto_turn and (t + 1) % CHECKPOINT_EVERY == 0)
        ]
        self._fetch(need)

    def _journal_stop(self, turn: int) -> int | None:
        """Where the journal must reach for a fold of `turn` (its events, and those after its turn event
        up to the next turn's: its usage, say): None if `events` has it already. A turn of the history
        before the snapshot's tail that has not arrived yet (a stand-in stepped onto during the fill):
        the tail, as its place in the journal is not known before then (the fold read the journal
        held so far, and failed: "turn N is not in this journal")."""
        with self._state:
            at = self._ahead_turns.get(turn)
            if at is None:
                if not self._history_told and turn in self._history and self._jpos < self._history_at:
                    return self._history_at
                return None
            after = self._ahead_turns.get(turn + 1)
            return at + 1 if after is None else after

    def _streamed_end(self) -> int:
        """How long the agent's journal is, as far as we were told (the stream's batches say how far it
        has streamed; a range answer, its length then)."""
        with self._state:
            last = next(reversed(self._ahead), -1)  # positions arrive in order
            return max(self.client.journal_end, self._journal_size, last + 1)

    def _backfill(self) -> None:
        """While the agent is quiet: fetch the journal it left out of the stream (range after range, to
        the end it has streamed), then the traces it summarized, FETCH_MAX a request."""
        if (
            self._elided
            and self._range_end is None
            and (self._jpos < self._streamed_end() or not self._told or self._held_news())
        ):
            # An agent that leaves out the batches that only say where its journal has reached (quiet)
            # has journaled past what it told us: the range asked for is answered with its length.
            if self._ask_range(None) == "asked" or not self.client.quiet:
                self._told = True
        if self._missing and not self._asked:
            self._fetch(list(self._missing)[:FETCH_MAX], wait=False)

    def _held_news(self) -> bool:
        """Whether the agent holds back events it journaled after its last frame, has journaled nothing
        for backfill_idle since, and we have not asked for them (engine.probe.ring, "Held events"):
        marks them asked for. An agent whose next turn closes within backfill_idle sends them with it
        (nothing to ask: the ask would wake its I/O thread, ~350 us of its CPU); one that runs a long
        tool shows its reply after backfill_idle. False from an agent that does not say (it is asked
        once every quiet period instead: `_told`)."""
        held = self._note_held()
        if not held or held == self._held_asked:
            return False
        if self.backfill_idle is not None and time.monotonic() - self._held_since < self.backfill_idle:
            return False
        self._held_asked = held
        return True

    def _note_held(self) -> int | None:
        """The agent's count of events held back (see _held_news), noting when it last changed: at each
        look while the stream is idle, so that quiet is counted from the newest event it journaled."""
        held = self.client.held()
        if held and held != self._held_seen:  # it journals on: quiet from now
            self._held_seen, self._held_since = held, time.monotonic()
        return held

    def _fetch_history(self) -> bool:
        """Ask for the next range of the journal before the snapshot's tail (see _connect), whether
        the agent is busy or not; True once it is all here (the app is told, see follow)."""
        if self._jpos >= self._history_at or self.client.disconnected:
            return True
        if self._range_end is None:
            self._ask_range(self._history_at)
        return False

    def follow(self) -> Iterator[SourceEvent]:
        quiet_since = time.monotonic()
        told: tuple[int, int, int] | None = None  # the history's progress last said, and when
        told_at = 0.0
        while True:
            progress = self.history_progress()
            if progress is not None and progress != told and (told is None or time.monotonic() - told_at >= PROGRESS_EVERY):
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


def _stand_in(turn: int) -> dict[str, Any]:
    """A turn of the timeline whose summary has not arrived: every key `summarize` gives, nothing in it."""
    return {
        "turn": turn,
        "final_tokens": 0,
        "error": None,
        "tier": "",
        "cache_break": None,
        "alerts": [],
        "pressure": {"predictive": 0.0},
        "usage": None,
        "actions": [],
    }
