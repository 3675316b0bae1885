"""A live source's placeholders and stand-ins, filled in place as what they stand for arrives.

A summarized turn (the lean stream) is held as a placeholder event whose trace is fetched when needed
(`_answer` fills it); the turns before the snapshot's tail are the timeline's stand-ins until the journal
before the tail brings their summaries (`_stand_ins`, `_history_turn`, `_history_mark`). See
inspector.sources.live.LiveSource.
"""

from __future__ import annotations

from typing import Any

from inspector.sources.live_state import LiveState
from inspector.timeline import summarize


class LivePlaceholders(LiveState):
    """Placeholders of summarized turns and stand-ins of the history before the tail (see LiveSource)."""

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

    def _filled(self, turn: int, summary: dict[str, Any]) -> None:
        """A stand-in's turn summarized (or whole): the timeline's dict takes its values, key by key (the
        app may be drawing it meanwhile: every key is there throughout)."""
        view = self._fold_views.pop(turn, None)
        if view is not None:
            view.update(summarize(summary))
        view = self._history.pop(turn, None)
        if view is not None:
            view.update(summarize(summary))

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
