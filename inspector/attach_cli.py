"""`cp-inspect attach PID [--record FILE]`: the inspector on a running agent's probe. A plain attach is
attach_command.py's (the typer-free path); with --record everything received is saved on exit, SIGTERM
and SIGHUP included (`_save_on_termination`), and a save that fails is said in one line. Registered in
cli.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from engine.errors import ContextPipeError
from engine.wording import counted

from .cli_common import ThemeOpt, _check_new_recording, _run_app, fail
from .recording_open import not_a_pid


def attach(
    pid: Annotated[
        str,
        typer.Argument(
            help="The agent's process id, or PID.SESSION for a proxy's session (see `cp-inspect ps`)."
        ),
    ],
    record: Annotated[
        Path | None, typer.Option(help="Also save everything received to this file on exit.", readable=False)
    ] = None,
    theme: ThemeOpt = None,
) -> None:
    """Attach to a running agent's probe socket and watch it live.

    \b
    Example:
      cp-inspect attach PID --record live.cpsession     (PID from `cp-inspect ps`)
    """
    from engine.probe.runtime_dir import parse_target
    from inspector.sources.live import LiveSource

    from . import attach_command

    if record is None:
        # What the console script runs without typer for a plain command line (attach_command.py).
        attach_command.attach(pid, theme)
        return
    target = parse_target(pid)
    if target is None:
        fail(not_a_pid(pid), 2)
    if record is not None:
        # The save happens when the inspector exits: a path it cannot be written to lost the whole
        # session's capture then (a RecordingError traceback, "already exists: use RecordingWriter.resume()").
        _check_new_recording(record, "session.cpsession")
    try:
        # A recording needs every turn whole: the lean stream's summarized turns are fetched later,
        # and an agent that exits before that would leave the saved recording short.
        src = LiveSource(target[0], session=target[1], lean=record is None)
    except ContextPipeError as exc:
        fail(str(exc))
    previous = _save_on_termination() if record is not None else {}
    try:
        _run_app(src, theme, agent_ended=attach_command.process_ended(*target),
                 save_on_quit=str(record) if record is not None else None)
    finally:
        try:
            if record is not None:
                _save_received(src, record)
        finally:
            _restore_handlers(previous)


def _save_received(src: Any, record: Path) -> None:
    """attach --record's save on exit. A disk that fills (or a directory removed) while the session ran
    made the save a RecordingError traceback after the inspector had closed; now one line, exit 1, and
    what the file holds (the writer stops at the failure and keeps every complete turn before it)."""
    try:
        src.save(record)
    except (ContextPipeError, OSError) as exc:
        # A RecordingError names the file and says what it keeps; an OSError (its directory removed) may not.
        why = str(exc) if isinstance(exc, ContextPipeError) else f"{record}: {exc.strerror or exc}"
        check = f" (`cp-inspect verify {record}` shows what it holds)" if record.is_file() else ""
        fail(f"could not save the attached session: {why}{check}")
    typer.echo(f"saved {counted(len(src.events), 'event')} to {record}")


def _save_on_termination() -> dict[int, Any]:
    """SIGTERM (`kill`, a supervisor stopping it) and SIGHUP (the terminal window closed) end the process
    without running `finally` blocks, so `attach --record` saved nothing. While the app runs they end it
    as `q` does, from its event loop, with status 128 + the signal (app_exit.exit_running_app: a
    SystemExit raised inside the loop crashed the app's shutdown or was lost); before it starts or after
    it ends they raise SystemExit, which unwinds to the save. Returns the handlers it replaced, for
    `_restore_handlers` once the save is done: a caller that runs attach in its own process (a test's
    CliRunner) kept a SIGTERM that raised SystemExit after it."""
    import signal

    from .app_exit import exit_running_app

    def stop(signum: int, _frame: object) -> None:
        if not exit_running_app(128 + signum):
            raise SystemExit(128 + signum)

    return {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGHUP)}


def _restore_handlers(previous: dict[int, Any]) -> None:
    import signal

    for sig, handler in previous.items():
        signal.signal(sig, handler)
