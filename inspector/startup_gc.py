"""The cyclic garbage collector held off while the TUI starts, until its first frame with data.

Start-up allocates a few hundred thousand objects that live as long as the app (Textual's, rich's and
the panels' modules and classes, the parsed CSS, the widget tree, the first turns) and next to no
garbage. With the collector on, that growth alone sets off full collections that rescan everything
allocated so far, again and again: a sizeable share of the CPU to the first frame (BENCHMARKS.md,
Start-up). `hold()` turns the collector off before the app is imported; `release()` (the app, once
that frame is drawn) freezes what start-up allocated, so later collections never rescan it, and
turns the collector back on. Reference counting frees everything that is not in a cycle meanwhile.
"""

from __future__ import annotations

import gc

_held = False


def hold() -> None:
    """Turn the collector off for start-up (a no-op if it is off already: then it is not ours)."""
    global _held
    if gc.isenabled():
        gc.disable()
        _held = True


def release(freeze: bool = True) -> None:
    """Turn the collector back on, first freezing what start-up allocated (`freeze=False` when start-up
    failed: nothing of it is kept). A no-op unless `hold()` turned it off, so an app built without it,
    as in the tests, never touches the collector here."""
    global _held
    if _held:
        _held = False
        if freeze:
            gc.freeze()
        gc.enable()
