"""A `cp-inspect diff` report as a person or a CI comment reads it: the turns that differ, each with where
the two requests first part, tokens, cache reads and writes, cost and any new cache break (`to_text`),
the totals' three lines (`summary_lines`) and a short Markdown report with the --fail-on gates that
failed (`to_markdown`). The report itself (DiffReport) is engine/sim/diff_report.py's.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from engine.wording import counted

if TYPE_CHECKING:
    from engine.sim.diff_report import DiffReport


def to_text(report: DiffReport, *, all_turns: bool = False, limit: int = 40) -> str:
    tot = report.totals()
    lines = [
        f"diff {report.baseline} -> {report.candidate}: {counted(tot['sessions'], 'session')}, "
        f"{counted(tot['turns'], 'turn')}"
    ]
    for s in report.sessions:
        lines.append("")
        lines.append(
            f"{s.source}: {s.differing_turns} of {counted(len(s.turns), 'turn')} send different requests"
        )
        shown = 0
        for t in s.turns:
            if not all_turns and t.first_difference is None and t.new_cache_break is None:
                continue
            if shown >= limit:
                lines.append("  ... (more turns: --all / --json)")
                break
            shown += 1
            a, b = t.sides
            fd = t.first_difference
            at = fd and (fd["label"] or fd["section"])  # none for a model change: the whole request
            where = f"{fd['cause']} at {at + ' ' if at else ''}byte {fd['offset']}" if fd else "identical"
            lines.append(
                f"  turn {t.turn:>4}: {where}; prompt tokens {a['tokens']} -> {b['tokens']}; read "
                f"{a['cache_read_tokens']} -> {b['cache_read_tokens']}; write {a['cache_write_tokens']} -> "
                f"{b['cache_write_tokens']}; ${a['cost_usd']:.5f} -> ${b['cost_usd']:.5f}"
                + (f"; NEW CACHE BREAK ({t.new_cache_break})" if t.new_cache_break else "")
            )
            if fd and fd["detail"]:
                lines.append(f"           {fd['detail']}")
            if a["schema_hash"] != b["schema_hash"]:
                lines.append(f"           tool schemas {a['schema_hash']} -> {b['schema_hash']}")
            if a["markers"] != b["markers"]:
                lines.append(f"           markers {a['markers']} -> {b['markers']}")
        for n in s.notes:
            lines.append(f"  note: {n}")
    lines.append("")
    lines += summary_lines(report)
    return "\n".join(lines)


def summary_lines(report: DiffReport) -> list[str]:
    tot = report.totals()
    c = tot["cost_usd"]
    pct = tot["cost_change_pct"]
    hr = tot["cache_hit_rate"]
    breaks = tot["new_cache_breaks"]
    return [
        f"cost ${c[0]:.4f} -> ${c[1]:.4f}" + (f" ({pct:+.2f}%)" if pct is not None else ""),
        f"cache hit rate {hr[0]:.1%} -> {hr[1]:.1%}",
        "new cache breaks: " + (", ".join(f"{k} x{v}" for k, v in breaks.items()) if breaks else "none"),
    ]


def to_markdown(report: DiffReport, failures: Sequence[str] = ()) -> str:
    """A short report for a CI comment."""
    tot = report.totals()
    c, hr = tot["cost_usd"], tot["cache_hit_rate"]
    pct = tot["cost_change_pct"]
    head = "❌" if failures else "✅"
    lines = [
        f"### {head} ContextPipe diff: `{report.baseline}` → `{report.candidate}`",
        "",
        f"{counted(tot['sessions'], 'session')}, {counted(tot['turns'], 'turn')}, {tot['differing_turns']} send "
        "different "
        "requests.",
        "",
        "| | baseline | candidate |",
        "| --- | ---: | ---: |",
        f"| cost | ${c[0]:.4f} | ${c[1]:.4f}" + (f" ({pct:+.2f}%)" if pct is not None else "") + " |",
        f"| cache hit rate | {hr[0]:.1%} | {hr[1]:.1%} |",
    ]
    breaks = tot["new_cache_breaks"]
    lines.append("")
    if breaks:
        lines.append("**New cache breaks:** " + ", ".join(f"`{k}` ×{v}" for k, v in breaks.items()))
        firsts = [(s.source, t) for s in report.sessions for t in s.turns if t.new_cache_break is not None][
            :5
        ]
        for src, t in firsts:
            own = t.sides[1]["own_diff"] or {}
            lines.append(
                f"- `{Path(src).name}` turn {t.turn}: {own.get('label', '')}: {own.get('detail', '')}"
            )
    else:
        lines.append("No new cache breaks.")
    for f in failures:
        lines.append(f"- **failed** {f}")
    # What the text and JSON say beside the figures (a file cut short, turns only one side has, requests
    # past the window) bears on reading them in a CI comment too.
    notes = [(s.source, n) for s in report.sessions for n in s.notes]
    if notes:
        lines.append("")
        lines.append("**Notes:**")
        lines += [f"- `{Path(src).name}`: {n}" for src, n in notes]
    return "\n".join(lines)
