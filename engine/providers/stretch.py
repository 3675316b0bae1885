"""A sliding window's stretch: where a section's items reuse the end of an earlier run of its items.

A trimmed history's turn (simulate's gates-closed column) sends a few new items, then a stretch that
ends an earlier run (the same objects), then a few new ones: head + old[a:] + tail, head and tail of at
most SLICE_MIN items. Both layouts that reuse such a run by slices, the provider serializer's
(`Serializer._shifted`, engine/providers/base.py) and simulate's Blocks (engine/sim/block_layout.py),
find the stretch here, so the two cannot disagree on which turns are shifted; each keeps its own checks
of the run (tokenizer, markers, item hashes).
"""

from __future__ import annotations

from collections.abc import Sequence

# Items left after the reused prefix above which the rest is looked for in the previous run as slices;
# also the most items a sliding window's head or tail may have.
SLICE_MIN = 8


def find_stretch(items: Sequence[object], old: Sequence[object]) -> tuple[int, int, int] | None:
    """(h, e, a) with items[h:e] == old[a:] (the same objects), e - h > SLICE_MIN, head items[:h] and
    tail items[e:] of at most SLICE_MIN items; the smallest h (it reuses the most). None when `items`
    is not shaped like that (or `old` has SLICE_MIN items or fewer)."""
    n = len(items)
    k = len(old)
    if k <= SLICE_MIN:
        return None
    tip = old[-1]
    # e: where the stretch ends in these items (the run's last item is items[e - 1]), found by identity.
    e = next((n - t for t in range(min(SLICE_MIN, n - 1) + 1) if items[n - 1 - t] is tip), 0)
    if e <= SLICE_MIN:
        return None
    # h: where it starts (items[h] is old[a], a = k - e + h); the smallest h reuses the most.
    h = next((h for h in range(SLICE_MIN + 1) if 0 <= k - e + h < k and items[h] is old[k - e + h]), -1)
    if h < 0 or e - h <= SLICE_MIN:
        return None
    a = k - e + h
    if items[h:e] != old[a:]:  # identity first, in C
        return None
    return h, e, a
