"""The process bench_startup.py times for `replay`: `cp-inspect replay FILE` as the console script runs it.

    python benchmarks/startup_child.py FILE SPAWNED_AT [MODULE:FUNCTION]      (PYTHONPATH: the tree to time)

It does what the console script does (import the entry point, as the timed tree's pyproject.toml names it,
set argv, call it: the program reads its own command line, typer or not), with only App.run replaced by a
headless run at 120x40. It prints
its CPU since process start (time.process_time: interpreter start-up, every import and every thread
included) and the wall time since SPAWNED_AT, read as the first complete screen (the current turn, and the
footer's keys laid out) is written (App._display, where Textual hands a screen update to the terminal),
then exits without the app's teardown. (Until the thirty-fourth session it read them in an after-refresh
callback registered once the screen was complete: a frame or more later, by when the work the app defers
to after its first frame had started and was counted.) Kept apart from bench_startup.py so the child
imports nothing the command would not (argparse, statistics).
"""

from __future__ import annotations

import sys
import time
from typing import Any


def complete(app: Any) -> bool:
    """The first screen as it stays: the current turn, and the footer's keys laid out (the footer
    composes them when the bindings settle: a frame may come before it does). bench_tui.py (b) reads its
    first frame by the same test."""
    from textual.widgets._footer import FooterKey

    keys = app.query(FooterKey)
    return bool(app.index >= 0 and len(keys) > 0 and all(k.region.width > 0 for k in keys))


def main() -> None:
    path, spawned_at = sys.argv[1], float(sys.argv[2])
    import asyncio
    import importlib
    import json
    import os

    # The console script's entry point (MODULE:FUNCTION) as the timed tree's pyproject.toml names it.
    module_name, _, attr = (sys.argv[3] if len(sys.argv) > 3 else "inspector.cli:app").partition(":")

    async def first_frame(app: Any) -> None:
        drawn: asyncio.Future[dict[str, float]] = asyncio.get_running_loop().create_future()
        display = app._display  # where a screen update goes to the terminal (headless: nowhere)

        def displayed(screen: Any, update: Any) -> None:
            display(screen, update)
            # Read as the first complete screen is written, in the same call: the app starts the work it
            # deferred to after its first frame (the rest of the load on the reader thread, the hidden
            # What-if controls) right after that frame, and a read in a later callback counted some of it.
            if update is not None and not drawn.done() and complete(app):
                drawn.set_result({"cpu_ms": time.process_time() * 1000,
                                  "wall_ms": (time.time() - spawned_at) * 1000})

        app._display = displayed
        async with app.run_test(size=(120, 40)):
            res = await drawn
            res["later_cpu_ms"] = time.process_time() * 1000  # (this task resumed: for comparison)
            print(json.dumps(res), flush=True)
            os._exit(0)  # the first frame is what is measured; skip the app's teardown

    class Headless:
        def __init__(self, app: Any) -> None:
            self.app = app

        def run(self) -> None:  # what the command calls: App.run, here headless at 120x40
            asyncio.run(first_frame(self.app))

    import inspector

    try:
        import inspector.replay_command as builder  # replay_app's module since the typer-free entry point
        # An older tree has no such module, but an editable install's finder may supply the installed
        # checkout's: then that is not the code being timed.
        if os.path.dirname(builder.__file__) != os.path.dirname(inspector.__file__):
            raise ImportError(builder.__file__)
    except ImportError:  # older code (a base for a before/after figure): replay_app was in inspector.cli
        import inspector.cli as builder
    if hasattr(builder, "replay_app"):
        built = builder.replay_app
        builder.replay_app = lambda *a, **k: Headless(built(*a, **k))
    else:  # code from before replay_app: `replay` ran _run_app then
        def run_app(source: Any, theme: str | None, start_turn: int | None = None) -> None:
            from inspector.app import InspectorApp

            Headless(InspectorApp(source, theme=theme, start_turn=start_turn)).run()

        builder._run_app = run_app
    # replay refuses to start without a terminal on stdin (its key loop would spin); the headless run
    # reads no keys, and the parent gives the child no terminal.
    sys.stdin.isatty = lambda: True  # type: ignore[method-assign]
    sys.argv = ["cp-inspect", "replay", path]
    getattr(importlib.import_module(module_name), attr)()  # as the console script calls it
    raise SystemExit("replay returned without drawing a frame")


if __name__ == "__main__":
    main()
