"""`cp-inspect diff BASELINE CANDIDATE [RECORDING...]`: two engine configurations over recorded sessions,
turn by turn, with cache breaks and cost; a CI gate with --fail-on. The logic lives in
engine/sim/session_diff.py; this file only parses options and prints.

Exit status: 0 when every --fail-on gate passes, 1 when one fails, 2 for bad input.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from .cli_common import fail


def diff(
    baseline: Annotated[
        str,
        typer.Argument(
            help="Baseline configuration: 'recorded', a .cpsession recording, a .toml/.json config, or "
            "key=value pairs (window=N,provider=P,gate.NAME=on|off,threshold.NAME=X)."
        ),
    ],
    candidate: Annotated[str, typer.Argument(help="Candidate configuration, in the same forms.")],
    recordings: Annotated[
        list[Path] | None,
        typer.Argument(help="Recordings to run both on (optional when a side is itself a recording)."),
    ] = None,
    fail_on: Annotated[
        list[str] | None,
        typer.Option(
            "--fail-on", metavar="GATE", help="Exit 1 when: cache-break (any new cache break), cost:+N%, tokens:+N%."
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON object (per-turn figures included).")
    ] = False,
    markdown: Annotated[
        bool, typer.Option("--markdown", help="Print a short report for a CI comment.")
    ] = False,
    all_turns: Annotated[bool, typer.Option("--all", help="Text: list identical turns too.")] = False,
    prices: Annotated[
        Path | None, typer.Option(help="Price table JSON (default: $CONTEXTPIPE_PRICES or the bundled one).")
    ] = None,
) -> None:
    """Diff two configurations over recordings: first differing block, tokens, cache reads/writes, cost.

    \b
    Examples:
      cp-inspect diff recorded gate.drop_rounds=off demo_sessions/scout-anthropic.cpsession
      cp-inspect diff main.cpsession branch.cpsession --fail-on cache-break --markdown
    """
    from engine.errors import ContextPipeError
    from engine.sim.session_diff import diff_recordings, parse_side, to_markdown, to_text

    if as_json and markdown:
        fail("choose one of --json and --markdown", 2)
    if all_turns and (as_json or markdown):  # ignored there: the JSON has every turn, the report none
        fail("--all lists identical turns in the text report: leave out --json / --markdown", 2)
    if prices is not None and not prices.exists():
        fail(f"no such price table: {prices}", 2)
    for p in recordings or []:
        if not p.exists():
            fail(f"no such recording: {p}", 2)
    try:
        base, cand = parse_side(baseline), parse_side(candidate)
        report = diff_recordings(base, cand, recordings or [], prices=prices)
        failures = report.failures(fail_on or [])
    except ContextPipeError as exc:
        fail(str(exc), 2)
    if as_json:
        out = report.to_json()
        out["failures"] = failures
        typer.echo(json.dumps(out, indent=2))
    elif markdown:
        typer.echo(to_markdown(report, failures))
    else:
        typer.echo(to_text(report, all_turns=all_turns))
        for f in failures:
            typer.secho(f"FAILED {f}", fg=typer.colors.RED, err=True)
    if failures:
        raise typer.Exit(1)


def forks(
    parent: Annotated[Path, typer.Argument(help="The parent session's .cpsession recording.")],
    children: Annotated[
        list[Path] | None,
        typer.Argument(help="Child recordings (default: the paths the parent's fork events name)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    prices: Annotated[
        Path | None, typer.Option(help="Price table JSON (default: $CONTEXTPIPE_PRICES or the bundled one).")
    ] = None,
) -> None:
    """The fork tree: a parent, its sub-agents, what each reads from the shared prefix, and the forked run
    priced against independent sub-agents on the same work."""
    from engine.errors import ContextPipeError
    from engine.sim.forks import fork_children, price_forks, tree_text
    from engine.sim.simulate import load_recording_events

    def load(p: Path) -> list[dict]:
        if not p.exists():
            fail(f"no such recording: {p}", 2)
        try:
            return load_recording_events(p)[0]
        except ContextPipeError as exc:
            fail(f"{p}: {exc}", 2)

    pev = load(parent)
    kids = list(children or [])
    if not kids:
        for f in fork_children(pev):
            rec = f.get("record")
            if not rec:
                continue
            cand = [Path(rec), parent.parent / Path(rec).name]
            found = next((c for c in cand if c.exists()), None)
            if found is None:
                typer.secho(f"warning: child recording {rec} not found", fg=typer.colors.YELLOW, err=True)
            else:
                kids.append(found)
    if not kids:
        fail(
            f"{parent} has no recorded forks (fork with pipe.fork(..., record=PATH), or name the children)", 2
        )
    try:
        report = price_forks((parent.name, pev), [(k.name, load(k)) for k in kids], prices=prices)
    except ContextPipeError as exc:
        fail(str(exc), 2)
    typer.echo(json.dumps(report, indent=2) if as_json else tree_text(report))
