"""The length of the common prefix of two sequences, found by slice comparisons in C.

Its own module because the engine's hot paths (the serializer's section runs, simulate's cache
simulator) need only this function of engine/request_diff.py, whose import (three dataclasses and a
regex, ~2.6 ms CPU) every process that imports the engine paid for it; request_diff re-exports it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def common_prefix_len(a: Sequence[Any], b: Sequence[Any]) -> int:
    """Length of the common prefix of two sequences (bytes, lists of block hashes): a binary search on
    slice equality, which runs in C, instead of a Python loop over every element."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n  # binary search on equal prefixes: O(log n) slice compares in C
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo
