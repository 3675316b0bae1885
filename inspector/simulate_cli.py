"""`cp-inspect simulate`: a whole session re-run through the engine and the cache simulator, priced.

Mounted by inspector/cli.py when this module exists. The logic lives in engine/sim/simulate.py; this file
only parses options and prints.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from engine.sim.simulate import POLICY_NAMES, PolicyFigures, SimSettings, SimulationReport

from .cli_common import GateOpt, ThresholdOpt, fail, on_off, open_recording, parse_pairs


def simulate(
    file: Annotated[Path, typer.Argument(help="A .cpsession recording (imported or recorded by an agent).")],
    provider: Annotated[
        str | None,
        typer.Option(
            help="Provider policy: anthropic, openai, bedrock, prefix or deepseek (default: recorded)."
        ),
    ] = None,
    model: Annotated[
        str | None, typer.Option(help="Model to price and simulate (default: the recording's).")
    ] = None,
    window: Annotated[int | None, typer.Option(help="Context window in tokens (default: recorded).")] = None,
    gate: GateOpt = None,
    threshold: ThresholdOpt = None,
    prices: Annotated[
        Path | None, typer.Option(help="Price table JSON (default: $CONTEXTPIPE_PRICES or the bundled one).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    per_turn: Annotated[bool, typer.Option("--per-turn", help="With --json: add per-turn figures.")] = False,
) -> None:
    """Re-run a whole session under what-if settings vs every optimizer gate closed, and price both."""
    # Imported here, not at module top: cli.py imports this module while it is still loading.
    from engine.errors import ContextPipeError
    from engine.recording.cpsession import RecordingError
    from engine.recording.replay import ReplayError
    from engine.sim.simulate import simulate_events

    if prices is not None and not prices.exists():
        fail(f"no such price table: {prices}", 2)
    settings = SimSettings(
        provider=provider,
        model=model,
        window=window,
        gates=parse_pairs(gate, "gate", on_off) or None,
        thresholds=parse_pairs(threshold, "threshold", float) or None,
        prices=prices,
    )
    reader = open_recording(file)
    try:
        from engine.recording.journal import unpack_event

        events = [unpack_event(e) for e in reader.events()]
        report = simulate_events(events, settings, source=str(file))
    except (ReplayError, RecordingError) as exc:
        fail(str(exc))
    except ContextPipeError as exc:
        fail(str(exc), 2)
    if as_json:
        typer.echo(json.dumps(report.to_json(per_turn), indent=2))
        return
    typer.echo(render_text(report))


def _fmt_int(v: int | None) -> str:
    return "-" if v is None else f"{v:,}"


ROWS: tuple[tuple[str, Any], ...] = (
    ("prompt tokens", lambda p: _fmt_int(p.totals.input_tokens)),
    ("uncached tokens", lambda p: _fmt_int(p.totals.uncached)),
    ("cache read tokens", lambda p: _fmt_int(p.totals.cache_read)),
    ("cache write tokens", lambda p: _fmt_int(p.totals.cache_write)),
    ("cache hit rate", lambda p: f"{100 * p.cache_hit_rate:.1f}%"),
    ("output tokens", lambda p: _fmt_int(p.output_tokens)),
    ("cost (USD)", lambda p: f"${p.cost_usd:.4f}"),
    ("compactions", lambda p: _fmt_int(p.compactions)),
    ("cache breaks", lambda p: _fmt_int(p.cache_breaks)),
    ("priced as", lambda p: p.model),
    ("cache rules", lambda p: p.cache_rules),
)


def render_text(r: SimulationReport) -> str:
    cols = [n for n in POLICY_NAMES]
    pol: dict[str, PolicyFigures | None] = r.policies
    rec = r.recorded
    lines = [
        f"SIMULATE {r.source}",
        f"  {r.simulated_turns} of {r.turns} turns; model {r.model}; engine policy {r.engine_provider}; "
        f"cache rules {r.cache_rules}; window {r.window:,} (recorded {rec['window']:,}, "
        f"{rec['model']} via {rec['provider']})",
        "",
    ]
    label_w = max(len(label) for label, _ in ROWS) + 2
    cells = {c: [fn(pol[c]) if pol.get(c) is not None else "-" for _, fn in ROWS] for c in cols}
    widths = {c: max(len(c), *(len(x) for x in cells[c])) + 2 for c in cols}
    lines.append(" " * label_w + "".join(c.rjust(widths[c]) for c in cols))
    for i, (label, _) in enumerate(ROWS):
        lines.append(label.ljust(label_w) + "".join(cells[c][i].rjust(widths[c]) for c in cols))
    lines.append("")
    be = r.break_even_cached_price_ratio
    p, c = pol["pipeline"], pol["gates_closed"]
    if be is None and p is not None and c is not None:
        # No crossing in [0, 1]: the cost difference keeps one sign over every realistic cached price,
        # so the order at the table's own price is the order at all of them.
        if p.totals == c.totals:
            verdict = "the two policies sent the same requests"
        else:
            cheaper = "pipeline" if p.cost_usd <= c.cost_usd else "gates_closed"
            verdict = f"{cheaper} is cheaper at every cached price from 0 to 100% of the input price"
        lines.append(f"break-even cached-token price: none ({verdict})")
    elif be is not None and p is not None and c is not None:
        above = "pipeline" if p.totals.cache_read < c.totals.cache_read else "gates_closed"
        below = "gates_closed" if above == "pipeline" else "pipeline"
        lines.append(
            f"break-even cached-token price: {100 * be:.1f}% of the input price "
            f"({above} is cheaper above it, {below} below)"
        )
    for name in cols:
        fig = pol.get(name)
        if fig is not None and fig.cache_break_causes:
            causes = "; ".join(f"{k} x{v}" for k, v in fig.cache_break_causes.items())
            lines.append(f"cache breaks ({name}): {causes}")
    for n in r.notes:
        lines.append(f"note: {n}")
    lines.append(f"({1000 * r.elapsed_s:.0f} ms)")
    return "\n".join(lines)
