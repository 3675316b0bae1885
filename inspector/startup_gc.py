"""The cyclic garbage collector held off while the TUI starts, until its first frame with data; and what
the app froze let go again when it exits.

Start-up allocates a few hundred thousand objects that live as long as the app (Textual's, rich's and
the panels' modules and classes, the parsed CSS, the widget tree, the first turns) and next to no
garbage. With the collector on, that growth alone sets off full collections that rescan everything
allocated so far, again and again: a sizeable share of the CPU to the first frame (BENCHMARKS.md,
Start-up). `hold()` turns the collector off before the app is imported; `release()` (the app, once
that frame is drawn) freezes what start-up allocated, so later collections never rescan it, and
turns the collector back on. Reference counting frees everything that is not in a cycle meanwhile.

`freeze_app()` is the app's way to freeze (start-up here, a long recording's summaries and the first fold
in the app): gc.freeze() moves every object tracked at that moment into the permanent generation, the
app itself and its source among them, where no collection ever reaches them. `thaw()`, when the app
exits, gives them back to the collector, so an app that ran inside a process that goes on (`cp-inspect
top`, which shows a new inspector for each attach; the test suite; a program that embeds the app) is
collected once it is gone, with whatever of it is in a cycle. A command that runs one app and ends with
it (`hold()` was called: replay, attach, run) keeps them frozen to the end: thawed, they would only
be scanned by the interpreter's last collection on the way out (~0.2 s CPU for 10^6 objects).
"""

from __future__ import annotations

import gc

_held = False
_ends_with_app = False  # hold() was called: the process ends when its one app does
# None: the app has not frozen anything yet. Otherwise what the permanent generation held before the
# app first froze: anything there is someone else's (an embedding program's), and thawing would free it
# too, so only an app that froze into an empty one thaws.
_before: int | None = None


def hold() -> None:
    """Turn the collector off for start-up (a no-op if it is off already: then it is not ours)."""
    global _held, _ends_with_app
    _ends_with_app = True
    if gc.isenabled():
        gc.disable()
        _held = True


def release(freeze: bool = True) -> None:
    """Turn the collector back on, first freezing what start-up allocated (`freeze=False` when start-up
    failed: nothing of it is kept). A no-op unless `hold()` turned it off, so an app built without it,
    as in the tests, never touches the collector here."""
    global _held, _ends_with_app
    if not freeze:  # the command's app has exited, or never started: a later app is not that one
        _ends_with_app = False
    if _held:
        _held = False
        if freeze:
            freeze_app()
        gc.enable()


def freeze_app() -> None:
    """gc.freeze(), remembered so that thaw() can undo it."""
    global _before
    if _before is None:
        _before = gc.get_freeze_count()
    gc.freeze()


def thaw() -> None:
    """The app exits: what it froze goes back to the collector (see the module's doc for when not)."""
    global _before, _ends_with_app
    before, _before = _before, None
    if before == 0 and not _ends_with_app:
        gc.unfreeze()
    _ends_with_app = False
