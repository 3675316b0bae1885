"""Running a Textual app so that a crash ends the command with a failure, not success."""

from __future__ import annotations

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
