"""The suite's own heap kept out of the collector's full collections (gc.freeze), out of the app's way.

The suite's process holds ~1.1-1.6M tracked objects after collection (every module the tests import,
their classes, the parsed test modules), and each full collection rescans all of them: ~0.5-0.8 s of CPU,
~125 of them in a run (BENCHMARKS.md, the suite). Frozen once collection is over, they are never scanned
again; what the tests allocate is collected as before.

The app freezes too (inspector/startup_gc.py: freeze_app, then thaw when it exits), and thaws only what it
froze into an empty permanent generation: an embedding program's freeze is not its to undo. So the suite
steps aside first: just before the app's first freeze in a test the suite's freeze is undone (the app
then freezes and thaws exactly as in a process that froze nothing, and a test that checks the thaw sees
it), and the suite freezes again, after a full collection so that no garbage is frozen, only at the first
test of a file after a whole file that ran no app (runs of app files pay nothing). The collector is also
held off while the test modules are imported (their ~27 full collections freed next to nothing): one
collection at the end of collection frees what they made."""

from __future__ import annotations

import gc
from collections.abc import Callable
from pathlib import Path

_ours = False  # the permanent generation holds the suite's freeze (and nothing else)
_held = False  # the collector is off for collection (and was on before it)
_file: Path | None = None  # the file of the test running
_app_files: set[Path] = set()  # files in which an app froze


def collection_starts() -> None:
    global _held
    if gc.isenabled() and not _held:
        gc.disable()
        _held = True


def collection_ends() -> None:
    global _held
    if _held:
        gc.enable()
        _held = False
    _freeze()


def _freeze() -> None:
    global _ours
    if gc.isenabled() and gc.get_freeze_count() == 0:
        gc.collect()
        gc.freeze()
        _ours = True


def step_aside() -> None:
    """Undo the suite's freeze (before an app's own): the app's freeze and thaw then see an empty
    permanent generation, as in a process that froze nothing."""
    global _ours
    if _file is not None:
        _app_files.add(_file)
    if _ours:
        _ours = False
        if gc.get_freeze_count():
            gc.unfreeze()


def before_test(path: Path) -> None:
    """At a file's first test, after a whole file that ran no app: freeze again."""
    global _file
    if path == _file:
        return
    previous, _file = _file, path
    if previous is not None and previous not in _app_files and not _ours:
        _freeze()


def install() -> None:
    """Route the app's freeze through `step_aside` first (the app's own function runs unchanged)."""
    from inspector import startup_gc

    app_freeze: Callable[[], None] = startup_gc.freeze_app
    if getattr(app_freeze, "suite_steps_aside", False):
        return

    def freeze_app() -> None:
        step_aside()
        app_freeze()

    freeze_app.suite_steps_aside = True  # type: ignore[attr-defined]
    startup_gc.freeze_app = freeze_app  # type: ignore[assignment]
