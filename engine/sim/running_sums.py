"""A replayed conversation's running token sums and round starts, extended by what was appended.

Simulate's carried builds (closed_cut's gates-closed cut, wave1_lane's wave-1 column) find the rules'
choices from these sums instead of a tuple of the whole conversation. Between builds a replayed
conversation only grows, so a scan goes on from the messages it already summed; it starts over when
that is not certain: another conversation or Measure, a swapped tokenizer, a history that did not just
grow, or an agent's edit (HistoryLog.edits, Pipeline.edit_text: a message before the newest replaced).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence

from engine.artifacts import Message
from engine.assembly import Measure


class RunningSums:
    """cum[i]: tokens of the first i messages (as Measure.item counts them); starts: where each
    assistant message is (a round starts there). A subclass extends both in place, in its own scan of
    the appended messages (it may read more of each message in the same pass)."""

    def __init__(self) -> None:
        self._history: Sequence[Message] | None = None  # the conversation the sums are of
        self._measure: Measure | None = None
        self._tokenizer = ""
        self._last: Message | None = None  # its newest message when last extended (an append-only check)
        self._edits = 0  # the edits the history had then
        self.cum: list[int] = [0]
        self.starts: list[int] = []

    def _resume(self, history: Sequence[Message], m: Measure) -> int:
        """Where the scan of `history` goes on from: the messages already summed, when `history` is the
        one last seen plus appended messages; else 0, with the sums emptied and `_start_over` called."""
        n = len(self.cum) - 1
        name = m.counter.tokenizer.name
        edits = getattr(history, "edits", 0)
        if (
            history is not self._history
            or m is not self._measure
            or name != self._tokenizer
            or len(history) < n
            or (n and history[n - 1] is not self._last)
            or edits != self._edits
        ):
            self._history, self._measure, self._tokenizer, self._edits = history, m, name, edits
            self.cum, self.starts = [0], []
            self._start_over()
            return 0
        return n

    def _start_over(self) -> None:
        """Drop what a subclass carried beside the sums (it was of the conversation they were of)."""

    def oldest_rounds(self, lo: int, hi: int, need: int) -> tuple[int, int]:
        """history_ops.oldest_to_drop's choice among the rounds lo..hi-1 (round j runs from starts[j] to
        starts[j + 1]) for `need` tokens, by bisection over the sums: (i, tokens), rounds lo..i-1 dropped
        (i == hi: all of them, still short of `need`) and the tokens they held."""
        starts, cum = self.starts, self.cum
        top = cum[starts[hi]]
        droppable = top - cum[starts[lo]]
        # The oldest round that can stay: the first whose start's running sum reaches top - room.
        i = bisect_left(starts, top - (droppable - need), lo, hi, key=cum.__getitem__)
        return i, droppable - (top - cum[starts[i]] if i < hi else 0)
