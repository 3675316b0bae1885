"""Session-wide what-if: the whole session re-run under the panel's settings, beside every optimizer
gate closed, the requests as the agent sent them, and the provider's real figures (pure: a report
dict in, Content out). The report is `cp-inspect simulate --json` with per-turn figures."""

from __future__ import annotations

from textual.content import Content

from engine.sim.break_causes import causes_said
from engine.wording import counted
from panels.fmt import BLOCKS, literal, tok

POLICIES = (("pipeline", "what-if"), ("gates_closed", "closed"), ("as_sent", "as sent"), ("actual", "actual"))
LABEL = 14
COL = 9


def _money(v: float | None) -> str:
    if v is None:
        return "-"
    return f"${v:.2f}" if v >= 10 else f"${v:.3f}" if v >= 0.1 else f"${v:.4f}"


def _bars(costs: list[float], width: int, top: float) -> str:
    """Per-turn cost as bars, several turns per column when the session is longer than the chart."""
    n = len(costs)
    if n == 0 or width <= 0:
        return ""
    cols = min(width, n)
    out = []
    for c in range(cols):
        chunk = costs[int(c * n / cols): max(int(c * n / cols) + 1, int((c + 1) * n / cols))]
        v = sum(chunk) / len(chunk)
        i = round(min(v / top, 1.0) * (len(BLOCKS) - 1)) if top > 0 else 0
        out.append(BLOCKS[max(1, i)] if v > 0 else BLOCKS[0])
    return "".join(out)


def tokens_scale(calibration: float | None) -> str:
    """Which tokens the table's counts are: simulate re-plans in the engine's tokens (cl100k) and scales
    them by the calibration learned from the recorded usage (the report's `calibration`), so they are
    estimates on the provider's scale, as the tier's and the timeline's counts are; unscaled (nothing
    learned, or --no-calibrate), the engine's. Said under the rows: the table sits beside the tier's
    provider-scale "sent" and the manifest's engine-scale counts."""
    if calibration and calibration != 1.0:
        return f"tokens: ≈ the provider's (the engine's ×{calibration:.2f}, learned)"
    return "tokens: the engine's (cl100k), not calibrated"


def session_view(report: dict, width: int = 60, received: int | None = None) -> Content:
    """`received`: the turns the inspector holds now. Attached to a live agent, the run covers the
    turns there were when it started; the agent goes on, and the figures did not say they were older."""
    pol = report["policies"]
    # Columns narrow to the pane (a wrapped table is unreadable): 13 + 4 x 8 fits the 48 columns the
    # pane has at 120x40; the widest cell ("$0.0123", "100.0%") is 7.
    col = max(8, min(COL, (width - LABEL + 1) // len(POLICIES)))
    label = max(13, min(LABEL, width - col * len(POLICIES)))
    rows = ["[$text-muted]" + " " * label + "".join(f"{h:>{col}}" for _, h in POLICIES) + "[/]"]
    since = (received or 0) - int(report.get("turns") or 0)
    if since > 0 and report.get("turns") is not None:
        rows.insert(0, f"[$warning]run on {counted(report['turns'], 'turn')}; {since} more arrived since "
                       f"(W twice re-runs with them)[/]")

    def row(name: str, fmt, key: str) -> None:  # type: ignore[no-untyped-def]
        cells = []
        for pname, _ in POLICIES:
            p = pol.get(pname)
            cells.append(f"{'-' if p is None or p.get(key) is None else fmt(p[key]):>{col}}")
        rows.append(f"{literal(name):<{label}}" + "".join(cells))

    row("prompt tokens", tok, "prompt_tokens")
    row("uncached", tok, "uncached_tokens")
    row("cache hit", lambda v: f"{v:.1%}", "cache_hit_rate")
    row("cost", _money, "cost_usd")
    row("compactions", str, "compactions")
    row("cache breaks", str, "cache_breaks")
    rows.append(f"[$text-muted]{tokens_scale(report.get('calibration'))}[/]")
    p, c = pol["pipeline"], pol["gates_closed"]
    diff = p["cost_usd"] - c["cost_usd"]
    verdict = ("[$success]cheaper[/]" if diff < 0 else "[$error]dearer[/]" if diff > 0 else "same")
    be = report.get("break_even_cached_price_ratio")
    rows.append("")
    rows.append(f"what-if vs closed: {verdict} by {_money(abs(diff))} "
                f"({abs(diff) / max(1e-12, c['cost_usd']):.1%})")
    rows.append("break-even cached price: " + (f"[bold]{be:.1%}[/] of input" if be is not None
                                              else "[$text-muted]none (no single crossing)[/]"))
    for pname, shown in (("pipeline", "what-if"), ("gates_closed", "closed")):
        # Why each column's cache broke, the agent's edits of one kind in one row (as simulate says it).
        causes = (pol.get(pname) or {}).get("cache_break_causes")
        if causes:
            rows.append(f"[$text-muted]cache breaks ({shown}):[/] {literal('; '.join(causes_said(causes)))}")
    # Per-turn cost, both policies on one scale so the bars compare.
    chart = max(10, width - 12)  # label (9) + space, and a column spare for a scrollbar
    series = {name: [t["cost_usd"] for t in (pol[name] or {}).get("per_turn") or []]
              for name in ("pipeline", "gates_closed")}
    top = max((max(v) for v in series.values() if v), default=0.0)
    rows.append("")
    rows.append(f"[$text-muted]cost per turn (peak {_money(top)}), {counted(report.get('simulated_turns', 0), 'turn')}[/]")
    rows.append(f"{'what-if':<9} [$accent]{_bars(series['pipeline'], chart, top)}[/]")
    rows.append(f"{'closed':<9} [$warning]{_bars(series['gates_closed'], chart, top)}[/]")
    rows.extend(policy_rows(report, width))
    for note in report.get("notes") or []:
        rows.append(f"[$text-muted]{literal(note)}[/]")
    return Content.from_markup("\n".join(rows))


PEER_ORDER = ("paper", "sliding_window", "clear_tool_uses", "server_compaction", "threshold_compaction", "wave1",
              "cost_aware")


def policy_rows(report: dict, width: int = 80) -> list[str]:
    """The policy table `cp-inspect simulate --policies all` prints, for this session: one row per
    context policy (peers and engine policies), cost relative to the paper baseline. Narrow panes get
    a shorter name column (names cut with …) and drop the compactions column before anything wraps."""
    pol = report["policies"]
    names = [n for n in PEER_ORDER if pol.get(n)]
    if not names:
        return []
    paper = (pol.get("paper") or {}).get("cost_usd") or 0.0
    compact = width >= 56
    name_w = max(10, min(21, width - (42 if compact else 34)))  # a column spare for a scrollbar

    def cut(n: str) -> str:
        return n if len(n) <= name_w - 1 else n[: name_w - 2] + "…"

    head = f"{'policy':<{name_w}}{'tokens':>7}{'hit':>7}{'cost':>9}{'vs paper':>9}" + (f"{'compact':>8}" if compact else "")
    out = ["", f"[$text-muted]{head}[/]"]
    best = min(pol[n]["cost_usd"] for n in names)
    for n in names:
        p = pol[n]
        rel = f"{p['cost_usd'] / paper:.2f}x" if paper > 0 else "-"
        mark = "[$success]" if p["cost_usd"] == best else ""
        tail = f"{p.get('compactions') or 0:>8}" if compact else ""
        out.append(f"{mark}{literal(cut(n)):<{name_w}}{tok(p['prompt_tokens']):>7}{p['cache_hit_rate']:>7.1%}"
                   f"{_money(p['cost_usd']):>9}{rel:>9}{tail}" + ("[/]" if mark else ""))
    return out
