"""Running a Textual app so that a crash ends the command with a failure, not success."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_running: Any = None  # the app run_app is running, for exit_running_app (a signal handler's)


def run_app(app: Any, **kwargs: Any) -> Any:
    """Run `app` and return what it returned; exit with its return code when it ended in error.

    Textual catches an exception raised inside the app, restores the terminal, prints the traceback and
    returns from run() with return_code 1, so a command that only called run() exited 0 after a crash:
    a script or CI job saw success. SystemExit (not typer.Exit) so the plain replay path, which does not
    import typer, exits the same way."""
    global _running
    _running = app
    try:
        result = app.run(**kwargs)
    finally:
        _running = None
    code = app.return_code
    if code:
        raise SystemExit(code)
    return result


def exit_running_app(return_code: int) -> bool:
    """For a signal handler: ask the app run_app is running to exit with `return_code` as `q` does, from
    its own event loop; False when no app's loop runs in this thread (not started yet, or ended): the
    handler raises SystemExit then, which unwinds whatever runs.

    A SystemExit raised by a handler inside the loop goes off at whatever bytecode the main thread is at:
    asyncio then cancels every task at once and the app's widgets went while the messages already
    posted were still handled (a NoMatches traceback on the screen on the way out: 5 of 18 SIGTERMs to
    `attach --record` on one loaded core), and now and then no exit came (1 of 18: still running 30 s
    after the signal). loop.call_soon_threadsafe is what asyncio's own signal handling
    uses: safe from a handler, the exit then runs between callbacks."""
    import asyncio

    app = _running
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return False
    if app is None:
        return False
    loop.call_soon_threadsafe(lambda: app.exit(return_code=return_code))
    return True


def run_inspector(
    source: Any,
    theme: str | None,
    start_turn: int | None = None,
    agent_ended: Callable[[], str | None] | None = None,
    save_on_quit: str | None = None,
) -> None:
    """The inspector on `source`, run as run_app runs it; `agent_ended` and `save_on_quit` as
    InspectorApp's.
    The TUI commands' last step (cli._run_app, and attach's typer-free path, attach_command.run_live),
    after each has checked for a terminal in its own words. Imports nothing of the app until called."""
    from . import startup_gc

    startup_gc.hold()  # before the app is imported, until its first frame with data (startup_gc.py)
    try:
        from .app import InspectorApp

        inspector = InspectorApp(source, theme=theme, start_turn=start_turn)
        inspector.agent_ended = agent_ended
        inspector.save_on_quit = save_on_quit
        run_app(inspector)
    finally:
        startup_gc.release(freeze=False)  # an app that failed before its first frame must not leave it off
