"""What `cp-inspect ps` does, importable without typer: a plain `ps [--json]` (cli_argv.py) runs it
without typer's dispatch, ~80% of the command's CPU when no agent runs (a script polling for agents
paid it every time). The typer command `ps` (cli.py) calls ps() here."""

from __future__ import annotations

import json

from engine.errors import ContextPipeError

from .cli_output import echo
from .recording_open import fail


def ps(as_json: bool = False) -> None:
    """`cp-inspect ps`'s work (its help is the typer command's docstring)."""
    from engine.probe.client import SkippedSocket, list_agents

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
        echo(f"ps: skipped {s.target}: {s.reason}", err=True)
    if as_json:
        echo(json.dumps([a.to_json() for a in agents], indent=2))
        return
    if not agents:
        more = f" that you can attach to ({len(skipped)} skipped, see above)" if skipped else ""
        echo(f"no live agents{more} (an agent serves with Pipeline(..., serve=True) or CONTEXTPIPE_SERVE=1, "
                   "or runs under `cp-inspect run -- CMD`)")
        return
    echo(f"{'PID':>9}  {'MODEL':<22}{'PROVIDER':<11}{'TURNS':>6}  COMMAND")
    for a in agents:
        errs = f"  [{a.tap_errors} tap errors]" if a.tap_errors else ""
        if a.error:  # alive, but it did not answer (stopped, busy): its figures are unknown, not "None"
            errs += f"  [not answering: {a.error}]"

        def shown(v: object) -> str:
            return "-" if v is None else str(v)

        echo(
            f"{a.target:>9}  {shown(a.model):<22}{shown(a.provider):<11}{shown(a.turns):>6}  {a.command[:60]}{errs}"
        )
