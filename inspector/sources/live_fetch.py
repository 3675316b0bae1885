"""A live source reading the probe socket and asking the agent for what its stream left out: journal
ranges, summarized turns' traces, the history before the snapshot's tail, and in the background once
the agent is quiet. See inspector.sources.live.LiveSource (the threads that read the socket, `_io`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from engine.probe.elide import RANGE_MAX
from engine.probe.lean import FETCH_MAX
from engine.probe.readable import readable
from inspector.sources.live_frames import LiveFrames


class LiveFetch(LiveFrames):
    """Reading the socket and fetching from the agent (see LiveSource)."""

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
                if (
                    asked
                    and self._range_end is None
                    and self._jpos >= max(self._journal_size, self._streamed_end())
                ):
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
            self._take_answers(
                lambda: not any(t in self._missing for t in want), time.monotonic() + self.timeout
            )

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
