"""Where a request's cached prefix ends (its last cache marker; with automatic prefix caching, all but its
newest Block), found for each request of a column from the last request's markers, not by reading
every Block of every request.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import compress
from operator import attrgetter

from engine.providers.base import Block

_MARKER = attrgetter("marker")


def _prefix_count(blocks: Sequence[Block], automatic: bool) -> int:
    # Mirrors pipeline._prefix_blocks: the cached prefix ends at the last marker; with automatic
    # prefix caching (no markers) everything but the newest block is the prefix the next call reuses.
    if not any(map(_MARKER, blocks)):  # in C: a long request has hundreds of blocks and few markers
        return max(0, len(blocks) - 1) if automatic else 0
    flags = list(map(_MARKER, blocks))
    return len(flags) - flags[::-1].index(True)


# _prefix_count of each request of a sequence without reading every Block of every request (the scan
# above was ~5% of a long session's cache simulation): a request's markers are the previous request's
# markers within the Blocks the two share (equal Blocks, equal markers) and those among its new Blocks.
def _marks_after(prev_marks: list[int], common: int, new: Sequence[Block]) -> list[int]:
    """The marked positions of a request whose first `common` Blocks equal the previous request's (whose
    marked positions are `prev_marks`) and whose other Blocks are `new`."""
    kept = prev_marks if not prev_marks or prev_marks[-1] < common else [i for i in prev_marks if i < common]
    if not any(map(_MARKER, new)):
        return kept
    return kept + list(compress(range(common, common + len(new)), map(_MARKER, new)))


def _marks_shifted(
    prev_marks: list[int], common: int, head: Sequence[Block], tail: Sequence[Block], a: int, m: int
) -> list[int]:
    """_marks_after(prev_marks, common, new) when new = head + the previous request's Blocks [a, a + m)
    + tail (equal Blocks: the same markers, known from prev_marks), without reading the stretch's
    markers (nor making `new`: a shifted request's ~4,800 Blocks copied to read the few around them)."""
    kept = prev_marks if not prev_marks or prev_marks[-1] < common else [i for i in prev_marks if i < common]
    at = common + len(head)  # where the stretch starts in this request
    out = kept + list(compress(range(common, at), map(_MARKER, head)))
    out += [x - a + at for x in prev_marks if a <= x < a + m]
    out += compress(range(at + m, at + m + len(tail)), map(_MARKER, tail))
    return out


def _prefix_from_marks(marks: list[int], length: int, automatic: bool) -> int:
    """_prefix_count of a request of `length` Blocks marked at `marks` (ascending)."""
    if not marks:
        return max(0, length - 1) if automatic else 0
    return marks[-1] + 1
