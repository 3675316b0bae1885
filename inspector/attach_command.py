"""What `cp-inspect attach PID` does, importable without typer.

The console script (entry.py) runs a plain `attach PID [--theme NAME]` from here without importing typer
or the other commands' modules: typer's dispatch (every command built, pydantic imported to coerce the
arguments) was ~140 ms of the ~0.95 s CPU before the first frame of an attach to a 30,000-turn agent,
and importing inspector.cli ~50 ms more. Anything else (`--record`, help, an unknown or repeated
option, a second argument, shell completion) returns None from plain_attach and goes through typer as
before, so its answers stay typer's own; the typer command `attach` without --record calls attach()
here, so both check, connect and run the same way.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from .agent_end import ended_said, wait_status_code
from .option_check import check_theme
from .recording_open import fail, not_a_pid, warn_plain
from .replay_argv import scan_plain, shell_completing

if TYPE_CHECKING:
    from .sources import Source


def plain_attach(argv: Sequence[str], environ: Mapping[str, str]) -> tuple[str, str | None] | None:
    """`attach`'s arguments (PID, theme) for a plain `attach PID [--theme NAME]`, as typer would pass
    them, or None when typer must read the command line (see the module's docstring)."""
    if not argv or argv[0] != "attach" or shell_completing(environ):
        return None
    scanned = scan_plain(argv[1:], (), ("--theme",))
    if scanned is None:
        return None  # --record, --help, an unknown option, a repeated one
    args, options = scanned
    if len(args) != 1:
        return None  # no PID or a second argument: typer's usage error
    pid, theme = args[0], dict(options).get("--theme")
    return pid, theme


def attach(pid: str, theme: str | None = None) -> None:
    """Attach to a running agent's probe socket and watch it live (no recording)."""
    from engine.errors import ContextPipeError
    from engine.probe.runtime_dir import parse_target

    target = parse_target(pid)
    if target is None:
        fail(not_a_pid(pid), 2)
    check_theme(theme)  # (the plain path: typer's callback does it on the other)
    from inspector.sources.live_recording import open_live

    try:
        # A recording agent's turns read from its recording (the agent sends nothing a turn for us),
        # else the fold stream: the agent need not build its turns' traces for us (we rebuild them).
        src, why = open_live(target[0], session=target[1], fold=True)
    except ContextPipeError as exc:
        fail(str(exc))
    if why is not None:
        warn_plain(why)  # (without importing typer on this path: see recording_open's docstring)
    run_live(src, theme, process_ended(*target))


def process_ended(pid: int, session: int | None = None) -> Callable[[], str | None]:
    """How an attached agent ended, as InspectorApp.agent_ended asks it after a disconnect: status.EXITED
    once process `pid` is gone (or a zombie its parent has not reaped), status.SESSION_ENDED for a
    `session` of it (PID.N: the process was the proxy or the parent agent serving it), None while it runs
    (its probe closed, or the connection was lost: "Agent disconnected" stays). `attach` is not the
    agent's parent, so the status it exited with is known only while its parent has not reaped it (a
    zombie's exit code, in /proc): then it is said as `cp-inspect run` and `demo` say their agent's."""

    def ended() -> str | None:
        import os

        status = None
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            pass
        except PermissionError:
            return None  # alive, another user's
        else:
            try:
                with open(f"/proc/{pid}/stat", "rb") as f:
                    fields = f.read().rsplit(b")", 1)[-1].split()
            except OSError:
                fields = []
            if fields[:1] != [b"Z"]:
                return None
            status = _exit_status(fields)
        from .status import EXITED, FINISHED, SESSION_ENDED  # (the inspector's: textual is loaded by then)

        if session is not None:
            return SESSION_ENDED
        return EXITED if status is None else FINISHED if status == 0 else ended_said(wait_status_code(status))

    return ended


# /proc/PID/stat's exit_code (field 52, Linux 3.5 on), counted from the state (field 3).
_EXIT_CODE_FIELD = 52 - 3


def _exit_status(fields: list[bytes]) -> int | None:
    """A zombie's exit status from its /proc/PID/stat fields after the name (waitpid's form: the code in
    the high byte, or the signal in the low 7 bits), or None where the kernel does not say it."""
    try:
        return int(fields[_EXIT_CODE_FIELD])
    except (IndexError, ValueError):
        return None


def run_live(source: Source, theme: str | None, agent_ended: Callable[[], str | None] | None = None) -> None:
    """Run the inspector on a live source (cli._run_app, without typer); `agent_ended` as
    InspectorApp.agent_ended."""
    if not sys.stdin.isatty():
        # (cli_common.need_terminal's words; it imports typer.)
        fail(
            "the inspector is an interactive terminal UI and stdin is not a terminal: run it in one "
            "(or `cp-inspect explain` for text)",
            2,
        )
    from .app_exit import run_inspector

    run_inspector(source, theme, agent_ended=agent_ended)
