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
            "--fail-on", help="Exit 1 when: cache-break (any new cache break), cost:+N%, tokens:+N%."
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
    """Diff two configurations over recordings: first differing block, tokens, cache reads/writes, cost."""
    from engine.errors import ContextPipeError
    from engine.sim.session_diff import diff_recordings, parse_side, to_markdown, to_text

    if as_json and markdown:
        fail("choose one of --json and --markdown", 2)
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
