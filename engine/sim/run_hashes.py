"""The hash ids and running token sums of a Block run, kept in step with it (`RunHashes`).

A `Window` (engine/sim/grown.py) is head + run[lo:k] + tail on a list of Blocks only ever appended to:
clear_tool_uses past its window sends the conversation from a start that moves on or back by a round or
two a call, each call a Window on one run. The key chain made each such call's hash ids and sums from
the last call's: the stretch the two share copied (~4,800 ids and sums), the Blocks before it (a window
that moved back takes in older rounds again: ~80 on a third of those calls) looked up one by one (a
Block, its hash and a dict entry scattered in memory: ~0.4 us each), and every call that moved to a new
start handed its ~4,800 hash ids to the intern table as a copy of its own (~19 KB a call kept for the
session: most of the table's 44.7 MB on a 6,000-turn what-if). Here the run's hash ids and sums are one
array each, parallel to the run and extended as it is, so a Window's ids are a slice of `ids`, its sums
`sums` moved by one difference, and the table keeps a run of them as a place in `ids`, not a copy.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from itertools import accumulate, islice
from operator import attrgetter
from typing import Any

from engine.sim.key_table import KeyTable
from engine.sim.spliced import Spliced

_TOKENS = attrgetter("tokens")
_SHA = attrgetter("sha")

# Runs whose RunHashes a key chain keeps (the newest used): a column's Windows are on one run, made anew
# only where a shifted call could not be one (then the next Windows are on the new one's).
RUNS_KEPT = 4


class RunHashes:
    """ids[i] is run[i]'s hash id (KeyTable.hashes) and sums[i] - sums[0] the tokens of run[:i], for i
    below len(ids) (extended by `upto`). `run` is only ever appended to, so both stay true while it lives;
    `ok` is False once a Block with a negative count was met (the caller then reads the call as it
    did without: its error, if any, is the one it always raised)."""

    __slots__ = ("run", "ids", "sums", "ok")

    def __init__(self, run: Sequence[Any]) -> None:
        self.run = run  # (held: the key it is found by is the run's id)
        self.ids: array[int] = array("i")
        self.sums: array[int] = array("q", [0])
        self.ok = True

    def seed(self, ids: array[int] | Spliced, sums: array[int] | Spliced, k: int) -> None:
        """Start from a call that sent run[:k] from its first position: its hash ids and raw sums (any
        constant apart from the run's own: only their differences are read), copied in C rather than
        read from each Block (a run made anew where a shifted call could not be a Window: ~4,800)."""
        if not self.ids and self.ok:
            self.ids = ids[:k]
            self.sums = sums[: k + 1]

    def upto(self, k: int, table: KeyTable) -> bool:
        """Extend ids and sums over run[:k] (reading only the Blocks not read before); whether they hold
        (no negative count met)."""
        n = len(self.ids)
        if self.ok and n < k:
            new = self.run[n:k]
            tokens = list(map(_TOKENS, new))
            if min(tokens) < 0:
                self.ok = False
                return False
            self.ids.extend(map(table.hashes.__getitem__, map(_SHA, new)))
            self.sums.extend(islice(accumulate(tokens, initial=self.sums[-1]), 1, None))
        return self.ok


def run_hashes(kept: dict[int, RunHashes], run: Sequence[Any]) -> RunHashes:
    """`run`'s RunHashes among `kept` (by the run's id), made when it has none; the RUNS_KEPT newest kept."""
    key = id(run)
    got = kept.get(key)
    if got is not None and got.run is run:
        if next(reversed(kept)) != key:
            kept[key] = kept.pop(key)  # (the newest used last: the oldest is the one let go)
        return got
    kept.pop(key, None)
    got = kept[key] = RunHashes(run)
    if len(kept) > RUNS_KEPT:
        del kept[next(iter(kept))]
    return got
