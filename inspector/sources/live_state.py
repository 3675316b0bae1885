"""What a live source (inspector.sources.live.LiveSource) keeps of an agent's stream: the events received,
where the agent's journal has reached, what was asked for and not answered yet, the placeholders of
summarized turns and the stand-ins of the history before the snapshot's tail.

Set up in one place, so that each part of the live source reads the same attributes: live_placeholders
(filling placeholders and stand-ins), live_fold_stream (the fold stream's turns), live_frames (taking the
stream's frames and journal ranges), live_fetch (reading the socket and asking the agent), live (connecting,
the Source interface, follow). Each class builds on the one before it in that order.
"""

from __future__ import annotations

import socket
import threading
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from engine.probe.client import ProbeClient
from inspector.sources.live_fold import TraceFold
from inspector.sources.replaying import ReplayingSource

if TYPE_CHECKING:
    from engine.pipeline_request import Built


class LiveState(ReplayingSource):
    """A live source's attributes (see inspector.sources.live.LiveSource for how they are used)."""

    client: ProbeClient  # connected by LiveSource._connect (again after a re-sync)

    def __init__(
        self,
        pid: int,
        timeout: float,
        session: int | None,
        *,
        lean: bool,
        elide: bool,
        backfill_idle: float | None,
        fold: bool,
    ) -> None:
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
        self.on_build: Callable[[int, Built], None] | None = None  # handed our fold's builds (LiveSource)
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
