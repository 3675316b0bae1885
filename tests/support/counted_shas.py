"""Walking a call's block hashes through the cache simulator's key table (engine/sim/cachesim.py,
_extend_keys) and counting the hashes the walk copies: the measure of the key-run walk tests
(test_sim_key_runs_walk.py, test_sim_prefix_scan_work.py)."""

from __future__ import annotations

from array import array
from typing import Any

from engine.sim.cachesim import KeyTable, _extend_ids


class CountedShas(array):  # type: ignore[type-arg]
    """A call's block hashes (as walked: their ids, an array), counting the hashes its slices copy
    (`copied`)."""

    def __new__(cls, shas: array[int]) -> CountedShas:
        return super().__new__(cls, "i", shas)  # type: ignore[return-value]

    def __init__(self, shas: array[int]) -> None:
        self.copied = 0

    def __getitem__(self, i: Any) -> Any:
        got = super().__getitem__(i)
        if isinstance(i, slice):
            self.copied += len(got)
        return got


def walk_counted(shas: list[str], table: KeyTable) -> tuple[list[int], int]:
    """The prefix keys _extend_keys finds for `shas` from the root in `table`, and the hashes it copied."""
    counted = CountedShas(table.hash_ids(shas))
    got = _extend_ids([0], counted, table)
    return got, counted.copied
