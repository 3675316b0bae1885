"""The collector's first-generation threshold while the inspector shows a session.

A step allocates some thousands of short-lived container objects (Strips, Segments, Styles, dicts of a
frame), nearly all freed by reference counting as soon as the frame is written. With CPython's default
threshold (700 allocations net) that still set off one or two generation-0 collections in every step,
and a generation-1 collection every few steps: ~0.75 ms of a quiet step, ~2 ms under load
(benchmarks/BENCHMARKS.md, stepping). At 10,000 a collection comes every several steps, each scanning
about what survives (a frame's garbage is mostly gone by then), so the same objects are scanned less
often (what start-up allocated is frozen by the app, so a full collection does not rescan it either).

`raise_threshold` is called by the app when it shows a turn (a no-op after the first), `restore` when
it unmounts, so an app run inside another program (the tests) leaves the collector as it found it."""

from __future__ import annotations

import gc

YOUNG = 10_000

_saved: tuple[int, int, int] | None = None


def raise_threshold() -> None:
    global _saved
    if _saved is None:
        _saved = gc.get_threshold()
        young, *older = _saved
        if young:  # 0: the collector's automatic runs are off; not ours to turn on
            gc.set_threshold(max(young, YOUNG), *older)


def restore() -> None:
    global _saved
    if _saved is not None:
        gc.set_threshold(*_saved)
        _saved = None
