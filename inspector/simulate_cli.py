"""`cp-inspect simulate`: a whole session re-run through the engine and the cache simulator, priced.

Mounted by inspector/cli.py. The logic lives in engine/sim/simulate.py; this file holds the typer
command (its options and help) and hands the values to simulate_command.py, which reads, simulates and
prints without importing typer (the console script calls it directly for a plain command line).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from . import simulate_command
from .cli_common import GateOpt, ThresholdOpt


def simulate(
    files: Annotated[
        list[Path],
        typer.Argument(
            help="One or more .cpsession recordings (imported or recorded by an agent).", readable=False),
    ],
    provider: Annotated[
        str | None,
        typer.Option(
            help="Provider policy: anthropic, openai, bedrock, prefix or deepseek (default: recorded)."
        ),
    ] = None,
    model: Annotated[
        str | None, typer.Option(help="Model to price and simulate (default: the recording's).")
    ] = None,
    window: Annotated[str | None, typer.Option(
        metavar="<tokens>", help="Context window in tokens: 32000, 32k, 1.5M (default: recorded).")] = None,
    gate: GateOpt = None,
    threshold: ThresholdOpt = None,
    prices: Annotated[
        Path | None, typer.Option(
            help="Price table JSON (default: $CONTEXTPIPE_PRICES or the bundled one).", readable=False)
    ] = None,
    policies: Annotated[
        str | None,
        typer.Option(
            help="Compare context policies side by side: 'all' or a comma list of paper, sliding_window, "
            "clear_tool_uses, server_compaction, threshold_compaction, wave1, cost_aware."
        ),
    ] = None,
    policy: Annotated[
        str | None,
        typer.Option(
            help="Engine policy for the pipeline column: cost_aware (default), wave1, or "
            "'cost_aware:target=0.25,trigger=1.0,horizon=1.0,early=on,revision=3'."
        ),
    ] = None,
    no_calibrate: Annotated[
        bool, typer.Option("--no-calibrate", help="Do not scale token counts by the recorded usage ratio.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    per_turn: Annotated[bool, typer.Option("--per-turn", help="With --json: add per-turn figures.")] = False,
) -> None:
    """Re-run whole sessions under what-if settings vs every optimizer gate closed (or vs peer policies
    with --policies), and price them; says which prices and cache rules it applied.

    \b
    Examples:
      cp-inspect simulate demo_sessions/scout-anthropic.cpsession --window 8000
      cp-inspect simulate demo_sessions/scout-anthropic.cpsession --policies all
    """
    simulate_command.simulate(files, provider, model, window, gate, threshold, prices, policies, policy,
                              no_calibrate, as_json, per_turn)  # fmt: skip


