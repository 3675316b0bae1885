"""The `cp-inspect` console script.

A plain `replay FILE [options]` (replay_argv.py) runs `replay` directly (replay_command.py), importing
neither typer nor the other commands: typer's dispatch of it built every command and coerced the
arguments through pydantic, and importing typer and the command modules cost a further 60-80 ms of
CPU before a long recording's first frame (BENCHMARKS.md, Start-up). A plain `simulate FILE...
[options]` (simulate_argv.py) likewise runs `simulate` directly (simulate_command.py, without typer), and
a plain `attach PID [--theme NAME]` runs `attach` (attach_command.py), and plain `explain`, `verify`,
`salvage`, `ps`, `ctx get`, `ctx add`, `ctx expand`, `ctx import`, `diff`, `forks`, `report` and `eval` lines
run those commands (cli_argv.py).
Every other command line goes to typer (cli.py).
`inspector.cli:app` takes the same shortcuts, for console scripts installed before this entry point
existed.
"""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Callable
from typing import NoReturn


def main() -> None:
    hold_closed_stdout()
    # `inspect` (which `dataclasses` imports) only once something reads it (lazy_inspect.py): ~5 ms.
    from . import lazy_inspect

    lazy_inspect.defer()
    # The engine's dataclasses' methods from the compiled table earlier runs left (dataclass_code.py):
    # ~60 ms less of every command's start-up; the table is saved on the way out.
    from . import dataclass_code

    dataclass_code.install()
    try:
        run_plain_command(sys.argv[1:])
    except SystemExit as exc:
        dataclass_code.save()
        if exc.code in (0, None) and _ran == ["simulate"]:
            exit_without_teardown()
        raise
    from .cli import app

    try:
        app()
    finally:
        dataclass_code.save()


# The plain command run_plain_command ran, if any (main leaves a plain simulate's process early).
_ran: list[str] = []


def run_plain_command(argv: list[str]) -> None:
    """Run a plain `replay`, `attach`, `simulate` or headless (cli_argv.py) command line
    directly and exit; return for anything else (typer's to read)."""
    from .replay_argv import plain_replay
    from .simulate_argv import plain_simulate

    plain = plain_replay(argv, os.environ)
    if plain is not None:
        from . import replay_command

        _ran[:] = ["replay"]
        run_standalone(lambda: replay_command.replay(**plain))
    from .attach_command import plain_attach

    live = plain_attach(argv, os.environ)
    if live is not None:
        from . import attach_command

        _ran[:] = ["attach"]
        run_standalone(lambda: attach_command.attach(*live))
    sim = plain_simulate(argv, os.environ)
    if sim is not None:
        # The cyclic collector off for good: the process ends with this command (run_standalone exits).
        # simulate holds it off while it runs (collector_held) and turned it back on at the end, and the
        # first allocation after that set off a collection that scanned everything the simulate had made
        # (~7 ms CPU on a 930-turn session, on the way out). collector_held leaves off what it found off.
        import gc

        gc.disable()
        # simulate_command imports neither typer nor the other commands, and nothing here builds
        # typer's command or coerces through pydantic (simulate_argv.py).
        from .simulate_command import simulate

        _ran[:] = ["simulate"]
        run_standalone(lambda: simulate(**sim))
    from .cli_argv import plain_command

    headless = plain_command(argv, os.environ)
    if headless is not None:
        _ran[:] = [argv[0]]
        run_standalone(headless)


def exit_without_teardown() -> None:
    """End a command that succeeded and printed everything now, without the interpreter's teardown,
    when nothing is registered to run at exit and no other thread runs: a simulate holds a whole
    session's events, requests and figures, and freeing them object by object on the way out cost
    ~6-10 ms CPU of a 150-500 ms command (BENCHMARKS.md, "Session-wide what-if and cost"). Returns
    (the caller exits as usual) when output cannot be flushed or something else is registered."""
    import atexit
    import threading

    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:  # a closed pipe, say: the usual exit reports it as it always has
        return
    ncallbacks = getattr(atexit, "_ncallbacks", None)  # CPython's count of atexit callbacks
    if ncallbacks is None or ncallbacks() or threading.active_count() != 1:
        return
    os._exit(0)


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
    except BrokenPipeError:
        # The reader went away (`simulate ... --json | head`): as click does for typer's commands, quietly,
        # with stdout pointed at nothing so the interpreter's own flush at exit does not raise again.
        _quiet_stdout()
        sys.exit(1)
    except OSError as exc:
        output_failed(exc)
        raise
    except Exception as exc:
        import typer

        if isinstance(exc, typer.Exit):
            sys.exit(exc.exit_code)
        if isinstance(exc, typer.Abort):
            _aborted()
        raise
    sys.exit(0)


# What a write to a file or device can fail with and reading never does: raised out of a command, it is
# the output that could not be written (every file a command writes itself is said by the command).
_WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO, errno.EROFS})


def output_failed(exc: OSError) -> None:
    """For `exc` from writing the output (`simulate --json > FILE` on a full disk, or over quota): one
    line saying so and exit 1, not a traceback; returns for any other error."""
    if exc.errno == errno.EBADF and _stdout_was_closed:
        _quiet_stdout()
        print(
            "cp-inspect: cannot write the output: standard output is closed (`1<&-`); "
            "redirect it instead (> FILE, or > /dev/null to discard it)",
            file=sys.stderr,
        )
        sys.exit(1)
    if exc.errno not in _WRITE_ERRNOS:
        return
    try:
        where = os.readlink("/proc/self/fd/1")
    except OSError:
        where = "stdout"
    _quiet_stdout()  # what is left in its buffer would fail again at exit
    print(
        f"cp-inspect: cannot write the output to {where}: {exc.strerror or exc}; what it holds is incomplete "
        "(free some space, or write it elsewhere)",
        file=sys.stderr,
    )
    sys.exit(1)


# Set by hold_closed_stdout: fd 1 was closed when the program started.
_stdout_was_closed: list[bool] = []


def hold_closed_stdout() -> None:
    """`cp-inspect ... 1<&-`: with fd 1 closed at start Python sets sys.stdout to None, and print and
    typer.echo then write nothing without a word: a command "succeeded" (exit 0) having said nothing.
    Hold fd 1 with /dev/null opened read-only (so no file the command opens becomes fd 1 and receives
    its output, and a child still cannot write there) and make sys.stdout a stream straight over it:
    the first line written fails with EBADF, which output_failed reports. A command that writes
    nothing to stdout still succeeds, as `true 1<&-` does; the TUI draws on stderr and is unaffected."""
    if sys.stdout is not None or _fd_open(1):
        return
    import io

    fd = os.open(os.devnull, os.O_RDONLY)
    if fd != 1:
        os.dup2(fd, 1)
        os.close(fd)
    # Unbuffered (raw, write_through): the write itself fails, not a flush at exit that could only warn.
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8", write_through=True)
    _stdout_was_closed[:] = [True]


def _fd_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def _quiet_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


def _aborted() -> NoReturn:
    print("Aborted!", file=sys.stderr)
    sys.exit(1)
