"""Running a Textual app so that a crash ends the command with a failure, not success."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def run_app(app: Any, **kwargs: Any) -> Any:
    """Run `app` and return what it returned; exit with its return code when it ended in error.

    Textual catches an exception raised inside the app, restores the terminal, prints the traceback and
    returns from run() with return_code 1, so a command that only called run() exited 0 after a crash:
    a script or CI job saw success. SystemExit (not typer.Exit) so the plain replay path, which does not
    import typer, exits the same way."""
    result = app.run(**kwargs)
    code = app.return_code
    if code:
        raise SystemExit(code)
    return result


def run_inspector(
    source: Any,
    theme: str | None,
    start_turn: int | None = None,
    agent_ended: Callable[[], str | None] | None = None,
) -> None:
    """The inspector on `source`, run as run_app runs it; `agent_ended` as InspectorApp.agent_ended.
    The TUI commands' last step (cli._run_app, and attach's typer-free path, attach_command.run_live),
    after each has checked for a terminal in its own words. Imports nothing of the app until called."""
    from . import startup_gc

    startup_gc.hold()  # before the app is imported, until its first frame with data (startup_gc.py)
    try:
        from .app import InspectorApp

        inspector = InspectorApp(source, theme=theme, start_turn=start_turn)
        inspector.agent_ended = agent_ended
        run_app(inspector)
    finally:
        startup_gc.release(freeze=False)  # an app that failed before its first frame must not leave it off
