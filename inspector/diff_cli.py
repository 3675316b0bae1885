"""`cp-inspect diff BASELINE CANDIDATE [RECORDING...]`: two engine configurations over recorded sessions,
turn by turn, with cache breaks and cost; a CI gate with --fail-on. The logic lives in
engine/sim/session_diff.py and diff_report.py; this file only parses options and prints.

Exit status: 0 when every --fail-on gate passes, 1 when one fails, 2 for bad input.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from . import cli_diff, cli_forks


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
        typer.Argument(
            help="Recordings to run both on (optional when a side is itself a recording).", readable=False),
    ] = None,
    fail_on: Annotated[
        list[str] | None,
        typer.Option(
            "--fail-on",
            metavar="GATE",
            help="Exit 1 when: cache-break (any new cache break), cost:+N%, tokens:+N%.",
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
        Path | None, typer.Option(
            help="Price table JSON (default: $CONTEXTPIPE_PRICES or the bundled one).", readable=False)
    ] = None,
) -> None:
    """Diff two configurations over recordings: first differing block, tokens, cache reads/writes, cost.

    \b
    Examples:
      cp-inspect diff recorded gate.drop_rounds=off demo_sessions/scout-anthropic.cpsession
      cp-inspect diff main.cpsession branch.cpsession --fail-on cache-break --markdown
    """
    cli_diff.diff(baseline, candidate, recordings, fail_on, as_json, markdown, all_turns, prices)


def forks(
    parent: Annotated[Path, typer.Argument(
        help="The parent session's .cpsession recording.", readable=False)],
    children: Annotated[
        list[Path] | None,
        typer.Argument(
            help="Child recordings (default: the paths the parent's fork events name).", readable=False),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    prices: Annotated[
        Path | None, typer.Option(
            help="Price table JSON (default: $CONTEXTPIPE_PRICES or the bundled one).", readable=False)
    ] = None,
) -> None:
    """The fork tree: a parent, its sub-agents (and theirs), what each reads from the shared prefix, and
    the forked run priced against independent sub-agents on the same work.

    \b
    Example:
      cp-inspect forks parent.cpsession     (recorded with pipe.fork(..., record=PATH))
    """
    cli_forks.forks(parent, children, as_json, prices)
