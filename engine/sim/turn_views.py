"""The peers' per-turn views of one simulate (engine.sim.policies.TurnView), held as runs of messages.

Every turn's view holds the whole uncompacted conversation so far: held as a tuple per turn, a session
of n turns held ~n^2/2 message references (a 3,000-turn what-if: 69 MB of its peak). A turn's
conversation is the last one's with messages appended (the same objects), so the views share one list
of messages and each keeps its length; a conversation that is not such an extension (a message made
again) starts a run of its own. The views are made again, one at a time, for each pass over them (each
peer's): the same values, in the same order.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import repeat
from operator import is_
from typing import TYPE_CHECKING, Any

from engine.artifacts import Message
from engine.sim.conversation import Conversation

if TYPE_CHECKING:
    from engine.assembly import Measure
    from engine.providers.base import Block
    from engine.sim.policies.base import HistoryBlocks, TurnView


class TurnViews:
    def __init__(self) -> None:
        self._runs: list[list[Message]] = []
        # Per turn: (turn, system, run, messages in it, window, ceiling, markers, measure, history).
        self._rows: list[tuple[int, tuple[Block, ...], int, int, int, int, bool, Measure, HistoryBlocks]] = []
        # The log the last run is backed by and how far: the run's first _backed messages are the log's
        # own [0, _backed), the very objects (add_items with `own`); (None, 0): none.
        self._log: object | None = None
        self._backed = 0

    def add(
        self,
        turn: int,
        system: tuple[Block, ...],
        msgs: tuple[Message, ...],
        window: int,
        ceiling: int,
        markers: bool,
        measure: Measure,
        history: HistoryBlocks,
    ) -> None:
        """The view TurnView(turn, system, msgs, window, ceiling, markers, measure, history), held."""
        runs = self._runs
        run = runs[-1] if runs else None
        # The run's messages are msgs' first ones, the same objects (map stops at the shorter: the run).
        if run is not None and len(msgs) >= len(run) and all(map(is_, msgs, run)):
            run += msgs[len(run) :]  # (its backed prefix stays: the run only grew)
        else:
            runs.append(list(msgs))
            self._log, self._backed = None, 0
        self._rows.append(
            (turn, system, len(runs) - 1, len(msgs), window, ceiling, markers, measure, history)
        )

    def add_items(
        self,
        turn: int,
        system: tuple[Block, ...],
        items: Sequence[Any],
        window: int,
        ceiling: int,
        markers: bool,
        measure: Measure,
        history: HistoryBlocks,
        log: object | None = None,
        own: int = -1,
    ) -> None:
        """add() of the messages among a history's `items`, in order. Items that start with the last
        run (the same objects) are messages there already (a run holds only messages): only the items
        after it are checked, not the whole conversation every turn (the build pass checked every item of
        it, then the run's identity again).

        `own` >= 0: items[:own] are `log`'s own messages [0, own), the very objects, and the log only ever
        appends (the build pass's whole-conversation build says so: blocks._log_own). Whether the items
        start with the last run is then known without comparing the two: the run's part backed by the
        same log (its first _backed messages, those of an earlier turn's items) are the log's, so the
        items'; only the run's messages past it (a turn's pending message, closed into a new object) are
        compared. A turn costs what it appended, not an identity scan of the whole conversation (3,000
        turns: 0.13 s of the build pass, ~4x the 1,500 turns')."""
        runs = self._runs
        run = runs[-1] if runs else None
        if run is not None:
            k = len(run)
            b = self._backed
            if own >= 0 and log is not None and log is self._log and b <= own and len(items) >= k:
                # run[:b] is log[:b] is items[:b] (b <= own); the rest of the run compared.
                same = all(map(is_, items[b:k], run[b:k]))
            else:
                same = len(items) >= k and all(map(is_, items, run))
            if same:
                tail = items[k:]
                if all(map(isinstance, tail, repeat(Message))):
                    run += tail
                    if own >= 0 and log is not None:  # run[:len(items)] is items now: backed to own
                        self._log, self._backed = log, own
                    self._rows.append(
                        (turn, system, len(runs) - 1, len(items), window, ceiling, markers, measure, history)
                    )
                    return
        whole = all(map(isinstance, items, repeat(Message)))
        msgs = tuple(items) if whole else tuple(i for i in items if isinstance(i, Message))
        self.add(turn, system, msgs, window, ceiling, markers, measure, history)
        if whole and own >= 0 and log is not None:  # the last run starts with msgs, which is items
            self._log, self._backed = log, own

    def __len__(self) -> int:
        return len(self._rows)

    def __iter__(self) -> Iterator[TurnView]:
        from engine.sim.policies.base import TurnView

        runs = self._runs
        # The last view's run and conversation: a run only grows (add appends to it), so a later view of
        # the same run is the last one's messages and those appended since, said so to the views'
        # HistoryBlocks (the peers then know it extends the last turn's without comparing the two).
        last_r = -1
        last: Conversation | None = None
        for turn, system, r, n, window, ceiling, markers, measure, history in self._rows:
            if last is not None and r == last_r and n >= len(last):
                if n > len(last):
                    msgs = Conversation(runs[r], n)
                    history.note_extends(msgs, last)
                else:
                    msgs = last
            else:
                msgs = Conversation(runs[r], n)
            last_r, last = r, msgs
            yield TurnView(turn, system, msgs, window, ceiling, markers, measure, history)
