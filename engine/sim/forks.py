"""Price a forked run (sub-agents that share their parent's cached prefix, engine.fork) against the same
work done by independent sub-agents, and lay out the fork tree.

Each recording is replayed as recorded (`session_diff.side_builds`, the public fold). *Forked*: every
request of the parent and its children goes through one provider cache simulator in time order, so a
child's first call can read the prefix its parent wrote. *Independent*: each session in its own
simulator (a sub-agent with nothing cached for it). Same requests, same prices; the difference is what
sharing the prefix is worth. For each child the report also checks the shared prefix itself
(`validate_spawn` between the parent's last request before the fork and the child's first).

The tree may be deeper than one level (a sub-agent forks its own): each child links to the root or to
another recording given, checked before anything is priced (a missing link, a cycle or one session
given twice is a ForkError naming the recording).
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
from engine.sim.simulate_column import MIN_STEP_S
from engine.sim.simulate_settings import (
    NO_MODEL_OPTION_FIX,
    NO_MODEL_OPTION_UNNAMED,
    _price_row,
    cache_rules_for,
)
from engine.tokens import TokenCounter
from engine.wording import counted


class ForkError(ContextPipeError, ValueError):
    """The recordings do not form a fork tree (says which link is missing)."""


@dataclass
class _Session:
    """One session of a fork tree as the simulator reads it: its events, its parent and its calls."""
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
    """`children`: every recording of the tree below `parent`, at any depth (a child's own forks too), in
    any order; each must link to `parent` or to another of them. The children in the report are in tree
    order (each after its parent), with their `depth` (1: forked from `parent`) and `parent_label`."""
    table = prices if isinstance(prices, PriceTable) else load_prices(prices)
    counter = TokenCounter()
    sessions: list[_Session] = []
    for k, (label, events) in enumerate([parent, *children]):
        if not any(e.get("k") == "session" for e in events):
            raise ForkError(
                f"{label} holds no session: its agent stopped before its first turn was recorded, or it was "
                "not written by the ContextPipe engine"
            )
        ln = _links(events)
        forks = fork_children(events)
        s = _Session(
            label,
            events,
            ln.get("session_id") or (forks[0]["session_id"] if forks else None),
            ln.get("parent_session"),
            ln.get("fork_turn"),
            ln.get("fork_scope"),
        )
        outputs = {
            int(e["turn"]): int((e.get("usage") or {}).get("output_tokens") or 0)
            for e in events
            if e.get("k") == "usage"
        }
        # The requests a child's spawn check compares with: this session's last before each of its forks.
        fork_turns = {f["turn"] for f in forks if isinstance(f.get("turn"), int)}  # (a damaged one: no check)
        for turn, tm, built in side_builds(events, None, counter):
            blocks = tuple(
                cachesim.Block(b.sha, b.tokens, breakpoint=b.marker, segment=b.segment)
                for b in built.serialized.blocks
            )
            s.calls.append((tm, turn, blocks, outputs.get(turn, 0)))
            if turn + 1 in fork_turns:
                s.requests_by_turn[turn] = built
            if k > 0 and s.first_request is None:
                s.first_request = built
        sessions.append(s)
    par = sessions[0]
    order = _tree_order(sessions)
    cfg = next(e for e in par.events if e.get("k") == "session")["config"]
    model = str(cfg["model"])
    price = _price_row(table, model, NO_MODEL_OPTION_FIX, NO_MODEL_OPTION_UNNAMED)
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
            c += cost(model, r, call[3], prices=table, at=call[0])  # (its hour, for an off-peak rate)
        return c, tot

    by_id = {s.session_id: s for s in sessions if s.session_id is not None}
    rows = []
    for si, depth in order:
        s = sessions[si]
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
            up = by_id[str(s.parent)]  # _tree_order checked every link
            row.update({"parent_session": s.parent, "fork_turn": s.fork_turn, "scope": s.scope})
            row.update({"parent_label": up.label, "depth": depth})
            row["first_call_cache_read"] = forked[(si, 0)].cache_read if s.calls else 0
            row["first_call_cache_read_independent"] = independent[(si, 0)].cache_read if s.calls else 0
            parent_req = up.requests_by_turn.get(int(s.fork_turn or 0) - 1)
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


def _tree_order(sessions: Sequence[_Session]) -> list[tuple[int, int]]:
    """(session index, depth) of every session, each after its parent (children in the order given):
    or a ForkError naming the recording whose link is missing, repeated, or does not lead to the root."""
    root = sessions[0]
    seen: dict[str, str] = {}
    for s in sessions:
        if s.session_id is None:
            continue
        if s.session_id in seen:
            raise ForkError(
                f"{s.label} and {seen[s.session_id]} are the same session ({s.session_id}): give it once"
            )
        seen[s.session_id] = s.label
    kids: dict[str, list[int]] = {}
    for i, c in enumerate(sessions[1:], 1):
        if c.parent is None:
            raise ForkError(f"{c.label} is not a forked session (its journal has no link to a parent)")
        if c.parent not in seen:
            if root.session_id is None:
                raise ForkError(f"{c.label} was forked from session {c.parent}; {root.label} never forked")
            raise ForkError(
                f"{c.label} was forked from session {c.parent}, which is neither {root.label} "
                f"({root.session_id}) nor any other recording given (give its parent's recording too)"
            )
        kids.setdefault(c.parent, []).append(i)
    # Siblings in the order their parent forked them (its fork events), whatever order they were given in.
    forked_at = {
        (s.session_id, str(f.get("child"))): n
        for s in sessions
        for n, f in enumerate(fork_children(s.events))
    }
    for parent_id, idx in kids.items():
        idx.sort(key=lambda i: (forked_at.get((parent_id, str(sessions[i].session_id)), len(forked_at)), i))
    order: list[tuple[int, int]] = []
    stack = [(0, 0)]
    while stack:
        si, depth = stack.pop()
        order.append((si, depth))
        sid = sessions[si].session_id
        stack.extend((k, depth + 1) for k in reversed(kids.get(sid, []) if sid is not None else []))
    if len(order) < len(sessions):
        # Linked, but not to the root: a cycle (A forked from B, B from A) beside the tree.
        lost = [sessions[i].label for i in range(len(sessions)) if i not in {j for j, _ in order}]
        raise ForkError(f"{', '.join(lost)}: forked from each other in a cycle, not from {root.label}")
    return order


def tree_text(report: dict[str, Any], *, limit: int = 30) -> str:
    """The tree, a child under its parent; past `limit` sub-agents the rest are counted (the JSON lists
    every one), so a fan-out of a thousand stays a screenful."""
    p = report["parent"]
    lines = [
        f"{p['label']}  (session {p['session_id'] or '-'}, {counted(p['turns'], 'turn')}, "
        f"${p['forked']['cost_usd']:.5f})"
    ]
    kids = report["children"]
    depth = [int(c.get("depth") or 1) for c in kids]
    # A child is its parent's last when no sibling follows before the tree climbs back above it.
    last = []
    for i, d in enumerate(depth):
        nxt = next((e for e in depth[i + 1 :] if e <= d), 0)
        last.append(nxt < d)
    open_levels: list[bool] = []  # per depth above this row: a sibling still follows there (draw "│")
    for k, c in enumerate(kids[:limit]):
        d = depth[k]
        del open_levels[d - 1 :]
        lead = "".join("│  " if more else "   " for more in open_levels)
        branch = "└─" if last[k] else "├─"
        pad = lead + ("   " if last[k] else "│  ")
        open_levels.append(not last[k])
        lines.append(
            f"{lead}{branch} {c['label']}  (session {c['session_id']}, forked at turn {c['fork_turn']}"
            + (f" of {c['parent_label']}" if d > 1 else "")
            + f", {c['scope']} scope, {counted(c['turns'], 'turn')})"
        )
        sp = c.get("spawn")
        if sp is not None:
            state = "shared prefix" if sp["ok"] else "PREFIX DIVERGES"
            lines.append(f"{pad}   {state}: {sp['message']}")
        if not c["turns"]:
            lines.append(f"{pad}   made no model call (closed before its first request)")
            continue
        lines.append(
            f"{pad}   first call reads {c['first_call_cache_read']} tokens from the parent's cache"
            f" (independent: {c['first_call_cache_read_independent']}); reads {c['forked']['cache_read_tokens']}"
            f" in all; ${c['forked']['cost_usd']:.5f} forked vs ${c['independent']['cost_usd']:.5f} independent"
        )
    if len(kids) > limit:
        lines.append(f"... and {counted(len(kids) - limit, 'more sub-agent')} (--json lists each)")
    if len(kids) > 1:
        checked = [c["spawn"] for c in kids if c.get("spawn") is not None]
        diverge = sum(1 for sp in checked if not sp["ok"])
        lines.append(
            f"{len(kids)} sub-agents, {counted(max(depth), 'level')} deep; the shared prefix diverges in {diverge} of the"
            f" {len(checked)} checked; first calls read {sum(c['first_call_cache_read'] for c in kids)} tokens"
            " from their parents' caches in all"
        )
    sv = report["saving_pct"]
    lines.append(
        f"forked run ${report['forked_cost_usd']:.5f} vs independent sub-agents ${report['independent_cost_usd']:.5f}"
        + (f" (saves {sv:.1f}%)" if sv is not None else "")
        + f"; {report['model']}, {report['cache_rules']} cache rules"
    )
    return "\n".join(lines)
