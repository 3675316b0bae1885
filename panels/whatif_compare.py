"""The actual-vs-what-if comparison text (pure: two traces in, Content out)."""

from __future__ import annotations

from textual.content import Content

from engine.trace_schema import Trace
from engine.whatif import carried_cut
from panels.fmt import literal, signed, tier_markup, tok

ENGINE = "engine's tokens"  # the label cell of the header: the scale of the figures under it
WINDOW = "window (provider)"  # 17 cells: the label column's width


def _saved(t: Trace) -> int:
    """What the turn's optimize steps saved, as explain lists them (`-> spill: ... (saved N)`). Not
    estimated_tokens - final_tokens: the cost_aware policy plans what is left after its steps, so that
    difference is the request's framing (-3 on every turn of the demo recording, a spill of 82k aside)."""
    return sum(int(a.get("tokens_saved") or 0) for a in t.get("actions") or ())


NOTE_HEAD = "History stays compacted:"  # the carried-cut note's first words (WhatIfPanel finds it by them)


def carried_note(omitted: int, compacted_at: int | None) -> str:
    """Why the history of a turn after a compaction does not grow back under a wider window, and what
    would show it without the cut. Widening the window there left "tokens sent" unchanged, with no word
    why."""
    at = f"at turn {compacted_at} " if compacted_at is not None else ""
    before = f", or go to a turn before {compacted_at}" if compacted_at is not None else ""
    # Three lines at 80 columns (it was four, and under four other rows: below the pane's fold at 80x24).
    return (f"[$warning]{NOTE_HEAD}[/] a re-plan of this turn keeps the cut made {at}({tok(omitted)} "
            f"tokens left out) under any setting. Press [b]W[/b] to re-run the whole session under these "
            f"settings{before}.")


def compare(actual: Trace, whatif: Trace, compacted_at: int | None = None) -> Content:
    """The two turns side by side. `compacted_at`: the turn whose compaction made the cut this turn's
    history carries (the last one at or before it), named in the note that the cut is kept."""
    # A re-plan has no provider count: its figures are the plan's, the engine's tokens (cl100k), as the
    # manifest's and explain's are, and its header says so; the tier and the timeline show the provider's
    # count of the same request (9.3k beside this 8.8k on the demo recording's turn 25). The window is
    # the provider's (the configured one, the plan divides it by the calibration): its row says so.
    rows = [f"[$text-muted]{ENGINE:<17}{'actual':>7} {'what-if':>7}[/]"]

    def row(label: str, a: str, b: str, note: str = "") -> None:
        rows.append(f"{literal(label):<17}{a:>7} {b:>7}  {note}")

    # Tier names are wider than the number columns: one line, actual → what-if.
    rows.append(f"{'tier':<17}{tier_markup(actual['tier'])} → {tier_markup(whatif['tier'])}")
    row(WINDOW, tok(actual["limit"]), tok(whatif["limit"]))
    row("pressure (pred.)", f"{actual['pressure']['predictive']:.2f}", f"{whatif['pressure']['predictive']:.2f}")
    diff = whatif["final_tokens"] - actual["final_tokens"]
    row("tokens sent", tok(actual["final_tokens"]), tok(whatif["final_tokens"]), f"[bold]{signed(diff)}[/]")
    carried = carried_cut(actual, whatif)
    if carried is not None:  # right under "tokens sent ±0", which it explains (WhatIfPanel shows the two
        # together in a short pane)
        rows.append(carried_note(carried, compacted_at))
        rows.append("")
    row("tokens saved", tok(_saved(actual)), tok(_saved(whatif)), f"{signed(_saved(whatif) - _saved(actual))}")
    row("cacheable prefix", tok(actual["cacheable_prefix_tokens"]), tok(whatif["cacheable_prefix_tokens"]))
    am = [m["section"] for m in actual.get("markers") or []]
    wm = [m["section"] for m in whatif.get("markers") or []]
    moved = "same" if am == wm else f"[$warning]moved: {literal(', '.join(wm) or 'none')}[/]"
    row("markers", str(len(am)), str(len(wm)), moved)
    rows.append("")
    rows.append(f"[$text-muted]{'section':<17}{'actual':>7} {'what-if':>7}  change[/]")
    wsec = {s["id"]: s for s in whatif["sections"]}
    for s in actual["sections"]:
        w = wsec.get(s["id"])
        if w is None:
            row(s["name"], tok(s["tokens"]), "-", "[$error]absent[/]")
            continue
        delta = "" if s["tokens"] == w["tokens"] else f"{signed(w['tokens'] - s['tokens'])} "
        form = "" if s["form"] == w["form"] else f"[$warning]{s['form']}→{w['form']}[/]"
        row(s["name"][:16], tok(s["tokens"]), tok(w["tokens"]), delta + form)
    skipped = ", ".join(literal(s["step"]) for s in whatif.get("skipped") or []) or "none"
    rows.append(f"\n[$text-muted]what-if skipped:[/] {skipped}")
    return Content.from_markup("\n".join(rows))
