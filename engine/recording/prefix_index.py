"""A compact map from 64-bit keys to 64-bit values: the index of texts a session moved to disk.

A dict of ints costs ~110 bytes an entry (a key object, a value object, a slot), which on a long session
is most of what is left in memory once the texts themselves are on disk. This table keeps keys and values
in two flat arrays (open addressing, linear probing, at most half full): 16-32 bytes an entry. Lookups
are a few Python operations; they happen when a text is journaled (is it already known?), not per turn
of work over the history.

Keys 0 and 1 mark empty and deleted slots, so `put` refuses them (the caller keeps such a text in memory:
one in 2^63).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator

EMPTY, DELETED = 0, 1
_MIN = 64


class PrefixIndex:
    def __init__(self) -> None:
        self._keys = array("Q", bytes(8 * _MIN))
        self._vals = array("Q", bytes(8 * _MIN))
        self._used = 0  # live entries
        self._filled = 0  # live + deleted slots (what probing walks over)

    def __len__(self) -> int:
        return self._used

    def _slot(self, key: int) -> int:
        """The slot holding `key`, or -1."""
        keys, mask = self._keys, len(self._keys) - 1
        i = key & mask
        while True:
            k = keys[i]
            if k == key:
                return i
            if k == EMPTY:
                return -1
            i = (i + 1) & mask

    def get(self, key: int) -> int | None:
        if key <= DELETED:
            return None
        i = self._slot(key)
        return self._vals[i] if i >= 0 else None

    def __contains__(self, key: int) -> bool:
        return self.get(key) is not None

    def put(self, key: int, value: int) -> bool:
        """Add or replace; False for the two reserved keys (not stored)."""
        if key <= DELETED:
            return False
        i = self._slot(key)
        if i >= 0:
            self._vals[i] = value
            return True
        if 2 * (self._filled + 1) > len(self._keys):
            self._resize()
        keys, mask = self._keys, len(self._keys) - 1
        i = key & mask
        while keys[i] > DELETED:
            i = (i + 1) & mask
        if keys[i] == EMPTY:
            self._filled += 1
        keys[i] = key
        self._vals[i] = value
        self._used += 1
        return True

    def pop(self, key: int) -> int | None:
        if key <= DELETED:
            return None
        i = self._slot(key)
        if i < 0:
            return None
        self._keys[i] = DELETED
        self._used -= 1
        return self._vals[i]

    def _resize(self) -> None:
        """Rehash into a table at most a quarter full (deleted slots are dropped)."""
        size = _MIN
        while size < 4 * (self._used + 1):
            size *= 2
        old = list(self.items())
        self._keys = array("Q", bytes(8 * size))
        self._vals = array("Q", bytes(8 * size))
        self._used = self._filled = 0
        for k, v in old:
            self.put(k, v)

    def items(self) -> Iterator[tuple[int, int]]:
        keys, vals = self._keys, self._vals
        return ((keys[i], vals[i]) for i in range(len(keys)) if keys[i] > DELETED)

    def values(self) -> Iterator[int]:
        return (v for _, v in self.items())
