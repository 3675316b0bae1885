"""A live source's turns on the fold stream (engine.probe.elide.fold_out): the agent builds no trace, and
the inspector's own fold of its journal (inspector.sources.live_fold) rebuilds each turn's; a turn the fold
cannot build is asked of the agent. See inspector.sources.live.LiveSource.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from inspector.sources.live_fold import Folded, TraceFold
from inspector.sources.live_placeholders import LivePlaceholders, _stand_in

if TYPE_CHECKING:
    from engine.pipeline_request import Built


class LiveFoldStream(LivePlaceholders):
    """The fold stream's turns, rebuilt by our fold of the journal (see LiveSource)."""

    def index_builds(self, on_build: Callable[[int, Built], None] | None) -> None:
        """Hand each request our fold builds from now on to `on_build` (None: no longer). Live content
        search (`/`) takes them (inspector.content_search.JournalStream.add) instead of building every
        turn that arrives a second time in a pipeline of its own. Under `_state`: a fold under way
        finishes the events it took with the callback it had."""
        with self._state:
            self.on_build = on_build
            if self._tf is not None:
                self._tf.on_build = on_build

    def fold_received(self) -> None:
        """Fold every event received so far now, each request's build handed to `on_build`: a recording
        follower's search after its fall-back (RecordingFollower.reach_live). The agent that records
        builds its turns' traces for its file, so the fold stream sends them whole and nothing asked
        this fold to run: the turns after the fall-back were each read through a re-plan instead."""
        with self._state:
            self._fold_new()

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
            self._tf = TraceFold(self._counter(), self.on_build)
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
