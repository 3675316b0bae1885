"""A replay's folds of its conversation's call ids at other providers, kept across the copies it builds on.

A what-if at another provider than the session's sends each call under the id that provider would have
given it (engine/providers/call_ids.py AtProvider), a fold over the whole conversation. The pipeline
keeps that fold on itself, but a replay builds each re-plan on a fresh copy of its folded state, so every
what-if folded the conversation again from its first message, reading the part behind the compaction cut
back from disk: ~0.5 s a re-plan at 12,000 turns (24,000 messages), against ~5 ms at the session's own
provider. `ProviderIds` keeps, per target, the fold that has gone furthest and a copy every `EVERY`
messages of it: a re-plan further on folds only the messages since the last one asked for, one further
back starts from the nearest copy before it. The folds are of one conversation (a replay's states are all
prefixes of its journal's), so any of them serves any turn at or past it.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from engine.artifacts import Message
from engine.providers.call_ids import AtProvider, IdRule
from engine.recording.history_log import HistoryLog, call_pairs

# Messages between two kept copies of a fold: a re-plan further back than the furthest one asked for
# folds at most this many (a few ms), and the copies hold a few sets of ids each.
EVERY = 2048


def _calls(history: Sequence[Message], a: int, b: int) -> list[tuple[tuple[str, str], ...]]:
    """What AtProvider.extend takes of messages [a, b), as Pipeline._ids_at gives it; a replay's log
    has the calls of the part on disk in memory (no text read back)."""
    if isinstance(history, HistoryLog):
        return history.calls(a, b)
    return [call_pairs(m) for m in history[a:b]]


class ProviderIds:
    """Folds of one conversation's call ids, per target provider rule."""

    def __init__(self, every: int = EVERY) -> None:
        if every < 1:
            raise ValueError(f"every must be >= 1 message, got {every}")
        self.every = every
        self.folded_messages = 0  # messages read to fold (tests and benchmarks: a fold is not repeated)
        self._heads: dict[str, AtProvider] = {}  # the furthest fold per rule
        self._marks: dict[str, list[AtProvider]] = {}  # its copies at every `every` messages, in order
        self._lock = threading.Lock()  # the app's workers re-plan from more than one thread

    def at(self, rule: IdRule, history: Sequence[Message], own: Sequence[tuple[int, str, str]]) -> AtProvider:
        """A fold at `rule` over every message of `history` (`own`: the session's renamed calls, as
        Pipeline._renamed), the caller's own to extend."""
        n = len(history)
        with self._lock:
            head = self._heads.get(rule.name)
            marks = self._marks.setdefault(rule.name, [])
            if head is None:
                head = self._heads[rule.name] = AtProvider(rule)
            if head.folded <= n:
                self._extend(head, history, own, n, marks)
                return head.clone()
            back = [m for m in marks if m.folded <= n]
            at = back[-1].clone() if back else AtProvider(rule)
            self._extend(at, history, own, n, None)
            return at

    def _extend(
        self,
        at: AtProvider,
        history: Sequence[Message],
        own: Sequence[tuple[int, str, str]],
        n: int,
        marks: list[AtProvider] | None,
    ) -> None:
        while at.folded < n:
            stop = n if marks is None else min(n, (at.folded // self.every + 1) * self.every)
            calls = _calls(history, at.folded, stop)
            self.folded_messages += len(calls)
            at.extend(calls, own)
            if marks is not None and stop % self.every == 0:
                marks.append(at.clone())
