"""What `cp-inspect ps` does, importable without typer: a plain `ps [--json]` (cli_argv.py) runs it
without typer's dispatch, ~80% of the command's CPU when no agent runs (a script polling for agents
paid it every time). The typer command `ps` (cli.py) calls ps() here."""

from __future__ import annotations

import json

from engine.errors import ContextPipeError

from .cli_output import echo
from .recording_open import fail, warn


def ps(as_json: bool = False) -> None:
    """`cp-inspect ps`'s work (its help is the typer command's docstring)."""
    from engine.probe.client import SkippedSocket, list_agents, other_users_agents

    skipped: list[SkippedSocket] = []
    try:
        agents = list_agents(skipped=skipped)
    except ContextPipeError as exc:
        # The runtime directory refused (another user's, or group/other bits: `chmod 755` on it): a
        # traceback ended `ps` where `attach` and `top` say what is wrong and how to fix it.
        fail(str(exc))
    # On stderr, so that --json and the table stay what a script parses; a refused socket made ps say
    # only "no live agents" where `attach PID` explained it.
    for s in skipped:
        warn(f"skipped {s.target}: {s.reason}")
    # Other users' agents are in their own private runtime directories, and their probes serve only
    # them: ps said "no live agents" while one ran under another login on the same machine.
    hidden = other_users_agents()
    if hidden:
        warn(hidden_line(hidden))
    if as_json:
        echo(json.dumps([a.to_json() for a in agents], indent=2))
        return
    if not agents:
        more = f" that you can attach to ({len(skipped)} skipped, see above)" if skipped else ""
        echo(
            f"no live agents{more} (an agent serves with Pipeline(..., serve=True) or CONTEXTPIPE_SERVE=1, "
            "or runs under `cp-inspect run -- CMD`)"
        )
        return
    from .cli_table import terminal_columns

    width = terminal_columns()

    def shown(v: object) -> str:
        return "-" if v is None else str(v)

    # Each column as wide as its longest value (the header at least): a model longer than the old fixed
    # 22 ("claude-sonnet-4-5-20250929") ran into its provider ("...20250929anthropic").
    model_w = max([len("MODEL"), *(len(shown(a.model)) for a in agents)]) + 2
    provider_w = max([len("PROVIDER"), *(len(shown(a.provider)) for a in agents)]) + 2
    echo(f"{'PID':>9}  {'MODEL':<{model_w}}{'PROVIDER':<{provider_w}}{'TURNS':>6}  COMMAND")
    for a in agents:
        errs = f"  [{a.tap_errors} tap errors]" if a.tap_errors else ""
        if a.error:  # alive, but it did not answer (stopped, busy): its figures are unknown, not "None"
            errs += f"  [not answering: {a.error}]"
        head = f"{a.target:>9}  {shown(a.model):<{model_w}}{shown(a.provider):<{provider_w}}{shown(a.turns):>6}  "
        # A proxy's conversation: the process that made its calls and its opening, not the proxy's command.
        echo(f"{head}{command_in(a.label, None if width is None else width - len(head) - len(errs))}{errs}")


def hidden_line(hidden: dict[int, int]) -> str:
    """What ps says of other users' agents it cannot list (`other_users_agents`: count by uid)."""
    from engine.access import _login, user_name

    n = sum(hidden.values())
    users = sorted(hidden, key=lambda uid: (-hidden[uid], uid))
    whose = ", ".join(f"{'an unnamed user' if uid < 0 else user_name(uid)}: {hidden[uid]}" for uid in users)
    login = next((_login(uid) for uid in users if uid >= 0), None)
    how = f" (sudo -u {login} cp-inspect ps)" if login else ""
    return (
        f"{n} agent{'s' if n != 1 else ''} of other users not shown ({whose}): a probe serves only its own "
        f"user; run cp-inspect as that user{how}"
    )


# The least of a command kept when the terminal is narrow: below it the command is left whole (the
# terminal wraps the line) rather than cut to a stub that names nothing.
COMMAND_MIN = 16


def command_in(command: str, room: int | None) -> str:
    """`command` as ps's COMMAND column shows it in `room` cells: whole when it fits or when the output is
    not a terminal (`room` None: a script reads it, and `ps --json` has it too), else cut at the end with
    an ellipsis. It was cut at 60 characters whatever the width, with no mark: at 120 columns a run's
    agent ("python -m my_agent --config configs/long-name.yaml --task ...") lost its task with half the
    line empty, and the cut read as the whole command."""
    if room is None or len(command) <= room or room < COMMAND_MIN:
        return command
    return command[: room - 1] + "…"
