"""`cp-inspect demo`: the scripted demo agent (inspector/demo_agent.py) started with its probe and
recording on, and the inspector attached to it (or, with --no-tui, the agent run headless and
attachable with ps/attach). Registered in cli.py.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from engine.errors import ContextPipeError

from .cli_common import ThemeOpt, _check_new_recording, _run_app, fail, need_terminal, warn
from .proxy_cli import agent_ended
from .token_arg import number_option


def demo(
    no_tui: Annotated[
        bool,
        typer.Option(
            "--no-tui", help="Run the demo agent headless (printing each turn), attachable with ps/attach."
        ),
    ] = False,
    turns: Annotated[
        int,
        typer.Option(
            parser=number_option("--turns", "a number of turns, e.g. 30"),
            help="Stop the demo agent after this many turns.",
        ),
    ] = 40,
    record: Annotated[
        Path | None, typer.Option(help="Keep the recording here (a new file).", readable=False)
    ] = None,
    delay: Annotated[
        float,
        typer.Option(
            parser=number_option("--delay", "seconds, e.g. 0.5", float),
            help="Seconds between the agent's turns.",
        ),
    ] = 1.5,
    theme: ThemeOpt = None,
) -> None:
    """Start the scripted demo agent (probe + recording on) and attach the inspector to it.

    \b
    Examples:
      cp-inspect demo
      cp-inspect demo --no-tui --turns 30 --delay 0 --record demo.cpsession
    """
    import subprocess
    import tempfile

    if turns < 1:
        fail(f"--turns must be at least 1 (got {turns})", 2)
    if not 0 <= delay <= 3600:  # a huge one overflowed the agent's sleep: a traceback from the child
        fail(f"--delay must be between 0 and 3600 seconds (got {delay:g})", 2)
    if record is not None:
        _check_new_recording(record, "demo.cpsession")
    if not no_tui:  # before the agent is started
        need_terminal("demo", "or `cp-inspect demo --no-tui` to run the agent headless")
        # The inspector attaches through the probe: a runtime directory it may not use (another user's, or
        # one others may write) ran the whole agent without one, then said "the agent (pid N) exited with
        # code 0" over the agent's own warning.
        from engine.probe.runtime_dir import ProbeError, ensure_runtime_dir

        try:
            ensure_runtime_dir()
        except ProbeError as exc:
            fail(str(exc))
    rec = record or Path(tempfile.mkdtemp(prefix="cp-demo-")) / "demo.cpsession"
    cmd = [
        sys.executable,
        "-m",
        "inspector.demo_agent",
        "--turns",
        str(turns),
        "--record",
        str(rec),
        "--delay",
        str(delay),
        "--serve",
        "--parent-pid",
        str(os.getpid()),
    ]
    env = {**os.environ, "CONTEXTPIPE_SERVE": "1"}
    if no_tui:
        # The agent says how to attach itself, once it serves and before its first turn's line.
        child = subprocess.Popen(cmd + ["--print", "--announce"], env=env)
        try:
            code = child.wait()
        except KeyboardInterrupt:
            # Ctrl-C reached the agent too (the terminal's process group) or only us: either way the
            # run was interrupted, exit 130 as every command does (it was the agent's -2 or 143).
            child.terminate()
            child.wait(10)
            code = 130
        typer.echo(_kept(rec))
        raise typer.Exit(code)
    # The agent's stderr goes to a file, not a pipe: a pipe nobody reads while the TUI runs would fill
    # up and block the agent.
    log = rec.with_suffix(".log")
    with log.open("wb") as err_file:
        child = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=err_file)
    from inspector.sources.live_recording import open_when_serving

    try:
        # The agent records: its turns are read from that file (it sends nothing a turn for us), as
        # `attach` reads them; anything the file cannot be trusted for, the stream as before.
        src, why = open_when_serving(child)
    except ContextPipeError as exc:
        if child.poll() is None:
            child.kill()
        err = log.read_text(errors="replace") if log.exists() else ""
        fail(f"{exc}\n{err[-400:]}")
    if why is not None:
        warn(why)  # (and on screen: the app says it on mount)
    src.header["recording"] = str(rec)
    try:
        _run_app(src, theme, agent_ended=lambda: agent_ended(child, log))
    finally:
        if child.poll() is None:
            child.terminate()
            child.wait(5)
    typer.echo(_kept(rec))


def _kept(rec: Path) -> str:
    """The demo's last line: where its recording is, or that it was removed while the demo ran (the
    agent wrote on through its open descriptor; "recording kept at PATH" named a file that was gone)."""
    if not rec.exists():
        return f"the recording {rec} was removed while the demo ran: nothing is kept"
    return f"recording kept at {rec} (replay it with: cp-inspect replay {rec})"
