"""The simulator's prefix keys: `Key`, a prefix's identity as an int, and `KeyTable`, the intern table that
hands keys out in runs (the key chain that walks a call's blocks through it is in engine/sim/cachesim.py)."""

from __future__ import annotations

from array import array
from collections import defaultdict
from collections.abc import Iterable, Sequence
from itertools import count

# A prefix's identity: an int handed out by an intern table (see `_extend_keys`). 0 is the empty prefix.
Key = int


class KeyTable:
    """The intern table of prefix keys (see `_extend_keys`). One per simulator: keys from two tables are
    unrelated numbers.

    Keys are handed out in runs: a call's prefixes from the first one not met before are new, and so is
    every longer one (a key gets an extension only after it was handed out), so they get consecutive
    numbers at once, and the run keeps the block hashes that lead from one to the next. A prefix's key
    is then found either in `ids`, (key of the prefix one block shorter, the block's hash) for the first
    key of each run, or as the next key in the run of the shorter prefix when the block's hash is the
    run's next one. A sliding window meets ~80k new prefixes in a long session: entering each in a dict
    cost ~0.2 us, the run a slice.

    A block hash is walked as a small int (`hashes`: each distinct hash numbered as first met), and a
    run's and a call's hashes are arrays of them: a window that moved (clear_tool_uses past its window)
    copies ~4,800 hashes a call, several times (its run, the call's carried hashes, an earlier line's),
    and as lists of the blocks' own str objects each copy and free touched ~4,800 scattered reference
    counts (~50 us cold); an array is one memcpy, at half the memory of a list's pointers.

    A run's ids are a place in an array: runs[r][offs[r] : offs[r] + lens[r]]. Mostly an array of the
    run's own (offset 0); a run met as a stretch of a Block run's ids (engine/sim/run_hashes.py, only
    ever appended to) is that stretch, not a copy of it (clear_tool_uses past its window: ~4,800 ids,
    ~19 KB, a call that moves to a new start)."""

    def __init__(self) -> None:
        self.ids: dict[tuple[Key, int], Key] = {}  # (prefix, next block's hash id) -> first key of a run
        self.starts: list[Key] = []  # each run's first key, ascending (runs are handed out in order)
        # Each run's block hash ids: key starts[r] + i ends with the block whose hash id is
        # runs[r][offs[r] + i], for i below lens[r].
        self.runs: list[Sequence[int]] = []
        self.offs: list[int] = []
        self.lens: list[int] = []
        self.next: Key = 1  # the next key to hand out
        # Block hash -> its id (numbered from 1 as first met; only equality of ids is ever read).
        self.hashes: defaultdict[str, int] = defaultdict(count(1).__next__)

    def __len__(self) -> int:
        """How many keys were handed out."""
        return self.next - 1

    def run(self, r: int) -> Sequence[int]:
        """Run r's block hash ids (a copy)."""
        o = self.offs[r]
        return self.runs[r][o : o + self.lens[r]]

    def hash_ids(self, shas: Iterable[str]) -> array[int]:
        """The ids of `shas`, in order (a new hash gets the next id: in C, the dict's default)."""
        return array("i", map(self.hashes.__getitem__, shas))
