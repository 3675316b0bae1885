"""What a simulated column costs: its calls priced (long-context and off-peak rates per call), the provider's
own usage as the `actual` column, the price notes a report carries, and the cached-token price at which
the pipeline and the gates-closed column cost the same (`break_even_cached_price_ratio`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from engine.sim import cachesim
from engine.sim.cachesim import CallCache
from engine.sim.pricing import (
    ModelPrice,
    PriceTable,
    call_cost,
    cost,
    crosses_long_context,
    rates_at,
    usage_call,
)
from engine.sim.simulate_figures import PolicyFigures, TurnFigures


def break_even_cached_price_ratio(
    pipeline: CallCache,
    gates_closed: CallCache,
    price: ModelPrice,
    output_delta: int = 0,
) -> float | None:
    """The cached-token price, as a fraction r of the input price, at which both policies cost the same.

    With input price p, cache-write prices w (5 min) and w1 (1 h), output price o, and each policy's
    uncached U, cache-read R, 5-minute write W, 1-hour write W1 tokens, a policy costs

        U*p + R*(r*p) + W*w + W1*w1 + O*o

    Setting cost(pipeline) = cost(gates_closed) and solving the linear equation for r:

        r = -(dU*p + dW*w + dW1*w1 + dO*o) / (dR*p),    d = pipeline - gates_closed

    Write prices stay as in the table (a write premium is priced independently of the read discount).
    Returns None when there is no single crossing: dR == 0 (the cached price does not move the
    difference), p == 0, or r outside [0, 1] (a cached price below zero or above the input price is not
    a price any provider charges). Above r the policy with fewer cache reads (normally the pipeline,
    which rewrites history) is the cheaper one; below r the other one is.
    """
    p = price.input
    d_read = pipeline.cache_read - gates_closed.cache_read
    if d_read == 0 or p <= 0:
        return None
    d_unc = pipeline.uncached - gates_closed.uncached
    d_w1 = pipeline.cache_write_1h - gates_closed.cache_write_1h
    d_w5 = (pipeline.cache_write - pipeline.cache_write_1h) - (
        gates_closed.cache_write - gates_closed.cache_write_1h
    )
    rest = (
        d_unc * p
        + d_w5 * price.cache_write
        + d_w1 * (price.cache_write_1h or 0.0)
        + output_delta * price.output
    )
    r = -rest / (d_read * p)
    if not 0.0 <= r <= 1.0:
        return None
    return r


def _column_cost(
    price: ModelPrice,
    model: str,
    table: PriceTable,
    tot: CallCache,
    out_total: int,
    per: list[TurnFigures],
    times: Sequence[float | None],
) -> tuple[float, int, int]:
    """A column's cost, how many of its calls bill at the row's long-context rates and how many at its
    off-peak rates (`times`: each call's, in `per`'s order). Both are per call (the whole call, when its
    own input passes the line or it was made off-peak), so a column with such calls adds up its calls;
    any other is billed on its totals, as it always was."""
    off = 0
    if price.off_peak is not None:
        off = sum(1 for at in times if rates_at(price, at) is price.off_peak)
    crossed = 0
    if price.long_context is not None:
        crossed = sum(
            1
            for t in per
            if crosses_long_context(
                price,
                {
                    "uncached": t.uncached_tokens,
                    "cache_read": t.cache_read_tokens,
                    "cache_write": t.cache_write_tokens,
                },
            )
        )
    if crossed or off:
        return math.fsum(t.cost_usd for t in per), crossed, off
    return cost(model, tot, out_total, prices=table, totals=True), 0, 0


def _actual(
    usages: Mapping[int, Mapping[str, Any]],
    model: str,
    table: PriceTable,
    turns: Iterable[int],
    times: Mapping[int, float] | None = None,
) -> PolicyFigures | None:
    if not usages:
        return None
    per: list[TurnFigures] = []
    calls: list[CallCache] = []
    out_total = 0
    price = table.get(model)  # the row cost() looks up for every call: looked up once
    at: list[float | None] = []
    for t in sorted(turns):
        u = usages.get(t)
        if u is None:
            continue
        # 1-hour writes are billed at their own rate (Anthropic: 2x input against 1.25x for 5 minutes)
        c = usage_call(u)
        o = int(u.get("output_tokens") or 0)
        calls.append(c)
        out_total += o
        at.append((times or {}).get(t))
        per.append(
            TurnFigures(
                t,
                c.input_tokens,
                c.cache_read,
                c.cache_write,
                c.uncached,
                o,
                call_cost(price, c, o, at[-1]),
                False,
                None,
            )
        )
    tot = cachesim.totals(calls)
    usd, crossed, off = _column_cost(price, model, table, tot, out_total, per, at)
    return PolicyFigures("actual", model, "provider", tot, out_total, usd, None, None, per, crossed, off)


def _price_notes(cols: Mapping[str, PolicyFigures | None], table: PriceTable) -> list[str]:
    """What the price rows billed that one rate per token does not show: calls billed whole at a row's
    long-context rates (Claude Sonnet 4/4.5 past 200K input tokens), and a row's own note (DeepSeek's
    peak rate, which off-peak hours halve)."""
    notes: list[str] = []
    by_model: dict[str, list[str]] = {}
    for name, f in cols.items():
        if f is not None and f.long_context_calls:
            by_model.setdefault(f.model, []).append(f"{name} {f.long_context_calls} of {len(f.turns)}")
    for model, parts in by_model.items():
        row = table.get(model)
        lc = row.long_context
        if lc is None or row.long_context_above is None:
            continue
        notes.append(
            f"calls over {row.long_context_above:,} input tokens billed whole at {row.model}'s long-context rates "
            f"(${lc.input}/M input, ${lc.cache_read}/M cached, ${lc.cache_write}/M cache write, ${lc.output}/M "
            f"output; such a prompt needs the 1M-context beta): " + "; ".join(parts)
        )
    off: dict[str, list[str]] = {}
    for name, f in cols.items():
        if f is not None and table.get(f.model).off_peak is not None:
            off.setdefault(f.model, []).append(f"{name} {f.off_peak_calls} of {len(f.turns)}")
    for model, parts in off.items():
        row = table.get(model)
        op = row.off_peak
        assert op is not None
        hours = " and ".join(f"{a:02d}:00-{b:02d}:00" for a, b in row.peak_hours)
        notes.append(
            f"{row.model}: calls made off-peak by their recorded time billed at the off-peak rates (${op.input}/M "
            f"input, ${op.cache_read}/M cached, ${op.output}/M output): "
            + "; ".join(parts)
            + f". Peak hours "
            f"are {hours} UTC{' on weekdays' if row.peak_weekdays_only else ''}. A call with no real time "
            "(an import without timestamps, or one from before off-peak billing began) and one on a public "
            "holiday the provider bills off-peak (not known here) bill at the list rate"
        )
    seen: set[str] = set()
    for f in cols.values():
        if f is None:
            continue
        row = table.get(f.model)
        if row.note and row.off_peak is None and row.model not in seen:  # (an off-peak row's: said above)
            seen.add(row.model)
            notes.append(f"{row.model}: {row.note}")
    return notes
