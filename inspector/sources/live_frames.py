"""A live source taking the frames of an agent's stream: live events, fetched traces, and ranges of its
journal, each kept where the journal has it (the elided stream's events beyond the journal fetched wait
in `_ahead`). See inspector.sources.live.LiveSource.
"""

from __future__ import annotations

from typing import Any

from engine.recording.journal import unpack_event
from inspector.sources.live_fold_stream import LiveFoldStream
from inspector.timeline import summarize


class LiveFrames(LiveFoldStream):
    """Keeping each frame the agent sends (see LiveSource)."""

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
