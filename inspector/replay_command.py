"""What `cp-inspect replay` does, importable without typer.

The console script (entry.py) runs a plain `replay FILE [--turn N] [--follow] [--theme NAME]` from here
without importing typer or the other commands' modules; the typer command `replay` in cli.py calls the
same function, so both open, check and run a recording the same way.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from . import startup_gc
from .option_check import check_theme
from .recording_open import fail, open_recording
from .token_arg import parse_turn

if TYPE_CHECKING:
    from .app import InspectorApp


def replay_app(file: Path, turn: int | str | None = None, follow: bool = False,
               theme: str | None = None) -> InspectorApp:
    """The app `replay` runs, built as it builds it (benchmarks/bench_startup.py times this path). The
    collector is held off from here to the app's first frame with data (startup_gc.py): the caller
    runs the app, or calls `startup_gc.release()` itself."""
    check_theme(theme)  # an option's error, said before the file's (as typer's callback says it)
    startup_gc.hold()  # before the recording reader and the app are imported
    try:
        from inspector.app import InspectorApp
        from inspector.sources.file import FileSource

        r = open_recording(file)
        if not follow and not r.turn_numbers():
            # The app would wait on "loading…" for a first turn that a finished file never gets.
            fail(
                f"{file} holds no completed turn (its agent stopped, or is still running, before the first "
                f"one was recorded): nothing to replay; `cp-inspect replay --follow {file}` waits for turns"
            )
        if turn is not None:
            numbers = r.turn_numbers()
            if not numbers:
                fail(f"{file} has no completed turns yet", 2)
            if isinstance(turn, str):  # not an integer (replay() read the ones that are)
                fail(f"--turn: turn numbers are integers, got {turn!r} ({file} has turns {numbers[0]}.."
                     f"{numbers[-1]}; -1 is the last)", 2)
            n = turn if turn >= 0 else numbers[-1] + 1 + turn
            if n not in numbers:
                fail(f"turn {turn} is not in {file} (it has turns {numbers[0]}..{numbers[-1]})", 2)
            turn = n
        return InspectorApp(FileSource(file, follow=follow, reader=r), theme=theme, start_turn=turn)
    except BaseException:  # a bad file or turn (typer.Exit) in a process that goes on, as under CliRunner
        startup_gc.release(freeze=False)
        raise


def replay(file: Path, turn: int | str | None = None, follow: bool = False, theme: str | None = None) -> None:
    """Step through a recorded session turn by turn. `turn` as typed (typer hands it over as text, so
    that `--turn abc` is one line naming the file's turns, said by replay_app) or already read."""
    if isinstance(turn, str):
        try:
            turn = parse_turn(turn)
        except ValueError:
            pass  # kept as text: replay_app says what was wrong once it knows the file's turns
    try:
        from .app_exit import run_app

        app = replay_app(file, turn, follow, theme)  # a bad file or turn is said first, terminal or not
        if not sys.stdin.isatty():
            # Textual reads keys from stdin: with a pipe or /dev/null there (a CI job, `< /dev/null`) its
            # input loop saw end of input over and over, ~80% of a core with nothing shown and no end.
            # (cli_common.need_terminal says the same for attach, demo and top; it imports typer.)
            fail(
                "replay is an interactive terminal UI and stdin is not a terminal: run it in one "
                f"(or `cp-inspect explain {file}` for text, `cp-inspect verify {file}` to check it)",
                2,
            )
        run_app(app)
    finally:
        startup_gc.release(freeze=False)  # an app that failed before its first frame must not leave it off
