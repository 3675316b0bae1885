"""The `cp-inspect` console script.

A plain `replay FILE [options]` (replay_argv.py) runs `replay` directly (replay_command.py), importing
neither typer nor the other commands: typer's dispatch of it built every command and coerced the
arguments through pydantic, and importing typer and the command modules cost a further 60-80 ms of
CPU before a long recording's first frame (BENCHMARKS.md, Start-up). A plain `simulate FILE...
[options]` (simulate_argv.py) likewise runs `simulate` directly (simulate_command.py, without typer).
Every other command line goes to typer (cli.py).
`inspector.cli:app` takes the same shortcuts, for console scripts installed before this entry point
existed.
"""
from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import NoReturn


def main() -> None:
    run_plain_command(sys.argv[1:])
    from .cli import app

    app()


def run_plain_command(argv: list[str]) -> None:
    """Run a plain `replay` or `simulate` command line directly and exit; return for anything else
    (typer's to read)."""
    from .replay_argv import plain_replay
    from .simulate_argv import plain_simulate

    plain = plain_replay(argv, os.environ)
    if plain is not None:
        from . import replay_command

        run_standalone(lambda: replay_command.replay(**plain))
    sim = plain_simulate(argv, os.environ)
    if sim is not None:
        # simulate_command imports neither typer nor the other commands, and nothing here builds
        # typer's command or coerces through pydantic (simulate_argv.py).
        from .simulate_command import simulate

        run_standalone(lambda: simulate(**sim))


def run_standalone(command: Callable[[], None]) -> NoReturn:
    """Run a command and exit as typer's standalone mode would after dispatching it: the command's
    typer.Exit (fail()) gives its code, Ctrl+C 130, an abort (or end of input) "Aborted!" and 1,
    success 0; anything else propagates with its traceback (pretty exceptions are off). Typer is
    imported only if the command ends with one of its exceptions."""
    try:
        command()
    except EOFError:
        print(file=sys.stderr)
        _aborted()
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as exc:
        import typer

        if isinstance(exc, typer.Exit):
            sys.exit(exc.exit_code)
        if isinstance(exc, typer.Abort):
            _aborted()
        raise
    sys.exit(0)


def _aborted() -> NoReturn:
    print("Aborted!", file=sys.stderr)
    sys.exit(1)
