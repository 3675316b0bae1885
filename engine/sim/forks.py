"""Price a forked run (sub-agents that share their parent's cached prefix, engine.fork) against the same
work done by independent sub-agents, and lay out the fork tree.

Each recording is replayed as recorded (`session_diff.side_builds`, the public fold). *Forked*: every
request of the parent and its children goes through one provider cache simulator in time order, so a
child's first call can read the prefix its parent wrote. *Independent*: each session in its own
simulator (a sub-agent with nothing cached for it). Same requests, same prices; the difference is what
sharing the prefix is worth. For each child the report also checks the shared prefix itself
(`validate_spawn` between the parent's last request before the fork and the child's first).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.errors import ContextPipeError
from engine.fork import validate_spawn
from engine.recording.journal import Event
from engine.sim import cachesim
from engine.sim.cachesim import CacheSimulator, Call, CallCache
from engine.sim.pricing import PriceTable, cost, load_prices
from engine.sim.session_diff import side_builds
from engine.sim.simulate import MIN_STEP_S, _price_row, cache_rules_for
from engine.tokens import TokenCounter


class ForkError(ContextPipeError, ValueError):
    """The recordings do not form a fork tree (says which link is missing)."""


@dataclass
class _Session:
    label: str
    events: list[Event]
    session_id: str | None
    parent: str | None
    fork_turn: int | None
    scope: str | None
    calls: list[tuple[float, int, tuple[cachesim.Block, ...], int]] = field(default_factory=list)
    first_request: Any = None
    requests_by_turn: dict[int, Any] = field(default_factory=dict)


def _links(events: Sequence[Event]) -> dict[str, Any]:
    return next((dict(e) for e in events if e.get("k") == "link"), {})


def fork_children(events: Sequence[Event]) -> list[dict[str, Any]]:
    """The `fork` events of a parent journal."""
    return [dict(e) for e in events if e.get("k") == "fork"]


def price_forks(
    parent: tuple[str, list[Event]],
    children: Sequence[tuple[str, list[Event]]],
    *,
    prices: PriceTable | str | Path | None = None,
) -> dict[str, Any]:
    table = prices if isinstance(prices, PriceTable) else load_prices(prices)
    counter = TokenCounter()
    sessions: list[_Session] = []
    fork_turns = {int(f["turn"]) for f in fork_children(parent[1])}
    for k, (label, events) in enumerate([parent, *children]):
        ln = _links(events)
        s = _Session(
            label,
            events,
            ln.get("session_id")
            or (fork_children(events)[0]["session_id"] if fork_children(events) else None),
            ln.get("parent_session"),
            ln.get("fork_turn"),
            ln.get("fork_scope"),
        )
        outputs = {
            int(e["turn"]): int((e.get("usage") or {}).get("output_tokens") or 0)
            for e in events
            if e.get("k") == "usage"
        }
        for turn, tm, built in side_builds(events, None, counter):
            blocks = tuple(
                cachesim.Block(b.sha, b.tokens, breakpoint=b.marker, segment=b.segment)
                for b in built.serialized.blocks
            )
            s.calls.append((tm, turn, blocks, outputs.get(turn, 0)))
            if k == 0 and turn + 1 in fork_turns:
                s.requests_by_turn[turn] = built
            if k > 0 and s.first_request is None:
                s.first_request = built
        sessions.append(s)
    par = sessions[0]
    for c in sessions[1:]:
        if c.parent is None:
            raise ForkError(f"{c.label} is not a forked session (its journal has no link to a parent)")
        if par.session_id is not None and c.parent != par.session_id:
            raise ForkError(
                f"{c.label} was forked from session {c.parent}, not from {par.label} ({par.session_id})"
            )
    cfg = next(e for e in par.events if e.get("k") == "session")["config"]
    model = str(cfg["model"])
    price = _price_row(table, model)
    rules = cache_rules_for(str(cfg["provider"]), model, None, price)

    def run(groups: list[list[tuple[int, int]]]) -> dict[tuple[int, int], CallCache]:
        """groups: lists of (session index, call index) sharing one simulator, each in time order."""
        out: dict[tuple[int, int], CallCache] = {}
        for g in groups:
            ordered = sorted(g, key=lambda x: (sessions[x[0]].calls[x[1]][0], x[0], x[1]))
            calls, last = [], float("-inf")
            for si, ci in ordered:
                tm, _, blocks, out_t = sessions[si].calls[ci]
                ts = max(tm, last + MIN_STEP_S)
                last = ts
                calls.append(Call(blocks, ts, model, out_t, None))
            for key, res in zip(ordered, CacheSimulator(rules, model).simulate(calls), strict=True):
                out[key] = res
        return out

    every = [(si, ci) for si, s in enumerate(sessions) for ci in range(len(s.calls))]
    forked = run([every])
    independent = run([[(si, ci) for ci in range(len(s.calls))] for si, s in enumerate(sessions)])

    def price_of(res: dict[tuple[int, int], CallCache], si: int) -> tuple[float, CallCache]:
        tot = cachesim.ZERO
        c = 0.0
        for ci, call in enumerate(sessions[si].calls):
            r = res[(si, ci)]
            tot = tot + r
            c += cost(model, r, call[3], prices=table)
        return c, tot

    rows = []
    for si, s in enumerate(sessions):
        fc, ft = price_of(forked, si)
        ic, it = price_of(independent, si)
        row: dict[str, Any] = {
            "label": s.label,
            "session_id": s.session_id,
            "turns": len(s.calls),
            "forked": {
                "cost_usd": round(fc, 8),
                "cache_read_tokens": ft.cache_read,
                "cache_write_tokens": ft.cache_write,
                "prompt_tokens": ft.input_tokens,
            },
            "independent": {
                "cost_usd": round(ic, 8),
                "cache_read_tokens": it.cache_read,
                "cache_write_tokens": it.cache_write,
                "prompt_tokens": it.input_tokens,
            },
        }
        if si > 0:
            row.update({"parent_session": s.parent, "fork_turn": s.fork_turn, "scope": s.scope})
            row["first_call_cache_read"] = forked[(si, 0)].cache_read if s.calls else 0
            row["first_call_cache_read_independent"] = independent[(si, 0)].cache_read if s.calls else 0
            parent_req = par.requests_by_turn.get(int(s.fork_turn or 0) - 1)
            if parent_req is not None and s.first_request is not None:
                rep = validate_spawn(parent_req, s.first_request, scope=s.scope or "session")
                row["spawn"] = rep.to_json()
        rows.append(row)
    total_f = sum(r["forked"]["cost_usd"] for r in rows)
    total_i = sum(r["independent"]["cost_usd"] for r in rows)
    return {
        "model": model,
        "cache_rules": rules,
        "parent": rows[0],
        "children": rows[1:],
        "forked_cost_usd": round(total_f, 8),
        "independent_cost_usd": round(total_i, 8),
        "saving_pct": round(100.0 * (total_i - total_f) / total_i, 4) if total_i else None,
    }


def tree_text(report: dict[str, Any]) -> str:
    p = report["parent"]
    lines = [
        f"{p['label']}  (session {p['session_id'] or '-'}, {p['turns']} turns, ${p['forked']['cost_usd']:.5f})"
    ]
    kids = report["children"]
    for k, c in enumerate(kids):
        branch = "└─" if k == len(kids) - 1 else "├─"
        pad = "   " if k == len(kids) - 1 else "│  "
        lines.append(
            f"{branch} {c['label']}  (session {c['session_id']}, forked at turn {c['fork_turn']}, {c['scope']} scope,"
            f" {c['turns']} turns)"
        )
        sp = c.get("spawn")
        if sp is not None:
            state = "shared prefix" if sp["ok"] else "PREFIX DIVERGES"
            lines.append(f"{pad}   {state}: {sp['message']}")
        lines.append(
            f"{pad}   first call reads {c['first_call_cache_read']} tokens from the parent's cache"
            f" (independent: {c['first_call_cache_read_independent']}); reads {c['forked']['cache_read_tokens']}"
            f" in all; ${c['forked']['cost_usd']:.5f} forked vs ${c['independent']['cost_usd']:.5f} independent"
        )
    sv = report["saving_pct"]
    lines.append(
        f"forked run ${report['forked_cost_usd']:.5f} vs independent sub-agents ${report['independent_cost_usd']:.5f}"
        + (f" (saves {sv:.1f}%)" if sv is not None else "")
        + f"; {report['model']}, {report['cache_rules']} cache rules"
    )
    return "\n".join(lines)
