"""Rows and rendering for `cp-inspect report`: one row per session from its simulation report."""

from __future__ import annotations

import os
from html import escape
from pathlib import Path
from typing import Any

from engine.sim.break_causes import causes_said
from engine.sim.simulate import SimulationReport
from engine.wording import counted
from panels.middle_cut import middle_cut
from panels.token_counts import tok


def session_row(path: Path, rep: SimulationReport, stood_in: bool = False) -> dict[str, Any]:
    """What was paid (the provider's usage when recorded, else the requests as sent, simulated) and what
    the engine's policy would have paid for the same session.

    The engine's figure is simulated; what was paid may be the provider's own bill. Set side by side as
    they are, the simulator's own error (a DeepSeek build that kept more of its cache than the expected
    value, hits from before the recording) would read as the engine's saving or loss: a session the
    engine would have sent byte for byte as the agent did could show "saves -10%". So the saving is the
    engine's simulated cost over the same simulator's cost of the requests as sent, applied to what was
    paid; both simulated figures are kept in the JSON."""
    pol = rep.policies
    paid = pol.get("actual") or pol.get("as_sent")
    sent = pol.get("as_sent")
    engine = pol.get("pipeline")
    assert paid is not None and engine is not None
    causes = dict((sent.cache_break_causes if sent is not None else None) or {})
    if paid is not sent and sent is not None and sent.cost_usd > 0:
        engine_cost = paid.cost_usd * engine.cost_usd / sent.cost_usd
    else:  # what was paid is the simulated as-sent column itself: the two are like for like already
        engine_cost = engine.cost_usd
    return {
        "session": str(path),
        "model": rep.model,
        "priced_as": rep.prices.get("model"),
        "model_stood_in": stood_in,  # `report --model` priced it: its own model has no price
        "calls": rep.turns,
        "basis": paid.name,  # "actual": the provider's own usage; "as_sent": simulated from the requests
        "prompt_tokens": paid.totals.input_tokens,
        "cache_read_tokens": paid.totals.cache_read,
        "cache_write_tokens": paid.totals.cache_write,
        "output_tokens": paid.output_tokens,
        "cache_hit_rate": round(paid.totals.hit_rate, 4),
        "cost_usd": round(paid.cost_usd, 6),
        "cache_breaks": sum(causes.values()),
        "cache_break_causes": causes,
        "engine_cost_usd": round(engine_cost, 6),
        "engine_saving_usd": round(paid.cost_usd - engine_cost, 6),
        # The two simulated figures the saving is the ratio of (the same cache simulator and prices).
        "engine_simulated_cost_usd": round(engine.cost_usd, 6),
        "as_sent_simulated_cost_usd": round(sent.cost_usd, 6) if sent is not None else None,
        # Failed attempts sent again (rate limits, overloads): unbilled, in no figure above, but a run that
        # met them is not the clean one its row alone reads as.
        "retried_attempts": rep.retried_attempts,
    }


def idle_row(path: Path, header: dict[str, Any]) -> dict[str, Any]:
    """A session that made no model call (an agent that stopped before its first request): a row of
    zeros, the same keys as session_row's. It was skipped as if it were unreadable ("nothing to
    simulate"), one warning per idle agent and missing from the fleet's session count."""
    return {
        "session": str(path), "model": str(header.get("model") or ""), "priced_as": None,
        "model_stood_in": False, "calls": 0, "basis": "none", "prompt_tokens": 0, "cache_read_tokens": 0,
        "cache_write_tokens": 0, "output_tokens": 0, "cache_hit_rate": 0.0, "cost_usd": 0.0,
        "cache_breaks": 0, "cache_break_causes": {}, "engine_cost_usd": 0.0, "engine_saving_usd": 0.0,
        "engine_simulated_cost_usd": 0.0, "as_sent_simulated_cost_usd": 0.0, "retried_attempts": 0,
    }


def totals_row(rows: list[dict[str, Any]]) -> dict[str, Any]:
    total: dict[str, Any] = {k: sum(r[k] for r in rows) for k in (
        "calls", "prompt_tokens", "cache_read_tokens", "cache_write_tokens", "output_tokens", "cache_breaks",
        "retried_attempts")}
    for k in ("cost_usd", "engine_cost_usd", "engine_saving_usd"):
        total[k] = round(sum(r[k] for r in rows), 6)
    total["cache_hit_rate"] = round(total["cache_read_tokens"] / total["prompt_tokens"], 4) if total["prompt_tokens"] else 0.0
    causes: dict[str, int] = {}
    for r in rows:
        for cause, n in r["cache_break_causes"].items():
            causes[cause] = causes.get(cause, 0) + n
    total["cache_break_causes"] = dict(sorted(causes.items(), key=lambda kv: -kv[1]))
    total["sessions"] = len(rows)
    return total


def _share(part: float, whole: float) -> float:
    """part / whole, 0 when there is no whole; under 0.05% is 0 (so the table never reads "-0.0%")."""
    share = part / whole if whole else 0.0
    return 0.0 if abs(share) < 0.0005 else share


def session_names(rows: list[dict[str, Any]], width: int = 33) -> list[str]:
    """A name per row that tells the sessions apart: the file name, or, when two share one (a fleet whose
    agents each write session.cpsession in their own directory), the path below the directories they
    all share, cut from the left so its distinguishing end stays. The bare file names made such rows
    indistinguishable in the table and the chart."""
    paths = [Path(r["session"]) for r in rows]
    names = [p.name for p in paths]
    if len(set(names)) == len(names):
        # Cut in the middle, its .cpsession first: cut at the end, names that differ at their end (an
        # imported run's task, deepseek_reasoner_dev__marshmallow-code__marshmallow-1343 and -1359; a
        # proxy session's model) read alike ("deepseek_reasoner_dev__marshma..." on both rows).
        cut = [middle_cut(n.removesuffix(".cpsession") if len(n) > width else n, width, "...") for n in names]
        if len(set(cut)) == len(cut):
            return cut
    absolute = [str(p.resolve()) for p in paths]
    common = os.path.commonpath(absolute) if len(absolute) > 1 else str(Path(absolute[0]).parent)
    out = []
    for a in absolute:
        rel = os.path.relpath(a, common)
        out.append(rel if len(rel) <= width else "..." + rel[-(width - 3):])
    return out


# The SESSION column's width at most (names cut to one less) and at least, when the terminal is narrow.
NAME_COLUMN, NAME_COLUMN_MIN = 34, 17


def render_table(rows: list[dict[str, Any]], total: dict[str, Any], room: int | None = None) -> str:
    """The table, its causes and notes at `room` columns (None: a pipe's, every row whole on one line):
    the session names give room first (down to NAME_COLUMN_MIN, cut in the middle), then the columns
    that still do not fit go to a second table (inspector/cli_table.py)."""
    from .cli_table import Column, fitted, wrapped

    figures = (("CALLS", 6), ("PROMPT", 9), ("HIT", 7), ("BREAKS", 7), ("COST $", 10), ("ENGINE $", 10), ("SAVES", 8))
    name_w = NAME_COLUMN
    if room is not None:
        name_w = max(NAME_COLUMN_MIN, min(NAME_COLUMN, room - sum(w for _, w in figures)))
    names = session_names(rows, name_w - 1)
    cells: list[list[str]] = []
    for r in rows:
        saves = _share(r["engine_saving_usd"], r["cost_usd"])
        basis = "*" if r["basis"] == "as_sent" else ""
        cells.append([f"{r['calls']}", tok(r["prompt_tokens"]), f"{r['cache_hit_rate']:.1%}", f"{r['cache_breaks']}",
                      f"{r['cost_usd']:>9.4f}{basis:1}", f"{r['engine_cost_usd']:.4f}", f"{saves:.1%}"])
    saves = _share(total["engine_saving_usd"], total["cost_usd"])
    cells.append([f"{total['calls']}", tok(total["prompt_tokens"]), f"{total['cache_hit_rate']:.1%}",
                  f"{total['cache_breaks']}", f"{total['cost_usd']:>9.4f} ", f"{total['engine_cost_usd']:.4f}", f"{saves:.1%}"])
    label = next((t for t in (f"TOTAL ({counted(total['sessions'], 'session')})", f"TOTAL ({total['sessions']:,})")
                  if len(t) < name_w), "TOTAL")
    columns = [Column("SESSION", [*names, label], name_w, left=True)]
    columns += [Column(head, [c[i] for c in cells], w) for i, (head, w) in enumerate(figures)]
    lines = fitted(columns, room)
    prose: list[str] = []
    if total["cache_break_causes"]:
        # (The agent's edits of one kind one entry, as simulate says them: "; " between, they hold commas.)
        prose.append("cache breaks by cause: " + "; ".join(causes_said(total["cache_break_causes"])))
    if any(r["basis"] == "as_sent" for r in rows):
        # The whole row is the as-sent simulation then (paid = as_sent), not only its cost.
        prose.append("* no provider usage recorded: prompt tokens, hit rate and cost simulated from the requests as sent")
    if total["retried_attempts"]:
        met = sum(1 for r in rows if r["retried_attempts"])
        prose.append(f"retried: {counted(total['retried_attempts'], 'failed attempt')} sent again (rate limits, "
                     f"overloads) in {counted(met, 'session')}, not billed and in no figure above")
    stood_in = sorted({str(r["priced_as"]) for r in rows if r["model_stood_in"]})
    if stood_in:
        prose.append(f"priced as {', '.join(stood_in)} (--model): sessions whose own model has no price")
    prose.append("ENGINE $: what was paid, times the engine policy's simulated cost over the simulated cost of "
                 "the requests as sent (the same simulator and prices)")
    for line in prose:
        lines += wrapped(line, room)
    return "\n".join(lines)


def render_svg(rows: list[dict[str, Any]]) -> str:
    """A plain bar chart: cost per session (what was paid) beside the engine policy's cost."""
    width, bar_h, gap, left = 720, 14, 10, 220
    top = 30
    height = top + len(rows) * (2 * bar_h + gap) + 20
    peak = max([r["cost_usd"] for r in rows] + [r["engine_cost_usd"] for r in rows] + [1e-9])
    scale = (width - left - 90) / peak
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="monospace" font-size="11">',
             '<text x="10" y="18">cost per session (USD): paid (blue) vs the engine policy (green)</text>']
    y = top
    for r, label in zip(rows, session_names(rows, 32), strict=True):
        name = escape(label)
        parts.append(f'<text x="10" y="{y + bar_h}">{name}</text>')
        for value, colour, dy in ((r["cost_usd"], "#4a7bd0", 0), (r["engine_cost_usd"], "#3fa34d", bar_h)):
            w = max(1.0, value * scale)
            parts.append(f'<rect x="{left}" y="{y + dy}" width="{w:.1f}" height="{bar_h - 2}" fill="{colour}"/>')
            parts.append(f'<text x="{left + w + 4:.1f}" y="{y + dy + bar_h - 3}">{value:.4f}</text>')
        y += 2 * bar_h + gap
    parts.append("</svg>")
    return "\n".join(parts)
