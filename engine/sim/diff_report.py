"""`cp-inspect diff` over many recordings (`diff_recordings`): each recording diffed under the two sides
(engine/sim/session_diff.py's `diff_session`), a recording given twice or holding no requests refused,
and the report (`DiffReport`): its totals over the sessions and which --fail-on gates fail.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.errors import ContextPipeError
from engine.recording.replay import MALFORMED, ReplayError, not_the_engines
from engine.sim.diff_sides import DiffError, Side
from engine.sim.pricing import PriceTable, load_prices
from engine.sim.session_diff import Recording, SessionDiff, diff_session
from engine.tokens import TokenCounter
from engine.wording import counted


@dataclass
class DiffReport:
    """`cp-inspect diff` over many recordings: each session's differences under two configurations."""

    baseline: str
    candidate: str
    sessions: list[SessionDiff]

    def totals(self) -> dict[str, Any]:
        cost = [sum(s.totals[i]["cost_usd"] for s in self.sessions) for i in (0, 1)]
        breaks: Counter[str] = Counter()
        for s in self.sessions:
            breaks.update(s.new_breaks)
        read = [sum(s.totals[i]["cache_read_tokens"] for s in self.sessions) for i in (0, 1)]
        prompt = [sum(s.totals[i]["prompt_tokens"] for s in self.sessions) for i in (0, 1)]
        return {
            "sessions": len(self.sessions),
            "turns": sum(len(s.turns) for s in self.sessions),
            "differing_turns": sum(s.differing_turns for s in self.sessions),
            "cost_usd": [round(c, 8) for c in cost],
            "cost_change_pct": (round(100.0 * (cost[1] - cost[0]) / cost[0], 4) if cost[0] else None),
            "cache_hit_rate": [round(r / p, 6) if p else 0.0 for r, p in zip(read, prompt, strict=True)],
            "new_cache_breaks": dict(sorted(breaks.items())),
        }

    def to_json(self, per_turn: bool = True) -> dict[str, Any]:
        return {
            "baseline": self.baseline,
            "candidate": self.candidate,
            "totals": self.totals(),
            "sessions": [s.to_json(per_turn) for s in self.sessions],
        }

    def failures(self, gates: Sequence[str]) -> list[str]:
        """Which --fail-on gates fail: `cache-break` (any new cache break), `cost:+N%` (the candidate costs
        more than N% above the baseline), `tokens:+N%` (likewise, prompt tokens)."""
        tot = self.totals()
        out: list[str] = []
        for g in gates:
            kind, _, arg = g.partition(":")
            if kind == "cache-break":
                n = sum(tot["new_cache_breaks"].values())
                if n:
                    causes = ", ".join(f"{k} x{v}" for k, v in tot["new_cache_breaks"].items())
                    out.append(f"cache-break: {counted(n, 'new cache break')} in the candidate ({causes})")
            elif kind in ("cost", "tokens"):
                pct = _pct(arg, g)
                if kind == "cost":
                    a, b = tot["cost_usd"]
                else:
                    a = sum(s.totals[0]["prompt_tokens"] for s in self.sessions)
                    b = sum(s.totals[1]["prompt_tokens"] for s in self.sessions)
                if b > a * (1 + pct / 100.0) + 1e-12:
                    change = f"{100.0 * (b - a) / a:+.2f}%" if a else "from zero"
                    # In the unit the report's totals use ($0.4447, 1,059,309): "0.444708" had none.
                    shown = (f"${b:.4f}", f"${a:.4f}") if kind == "cost" else (f"{b:,.0f}", f"{a:,.0f}")
                    out.append(f"{g}: candidate {kind} {shown[0]} vs baseline {shown[1]} ({change})")
            else:
                raise DiffError(f"--fail-on {g!r}: use cache-break, cost:+N% or tokens:+N%")
        return out


def _pct(arg: str, gate: str) -> float:
    s = arg.strip().rstrip("%").lstrip("+")
    try:
        return float(s)
    except ValueError as exc:
        raise DiffError(f"--fail-on {gate!r}: expected a percentage such as cost:+2%") from exc


def diff_recordings(
    base: Side,
    cand: Side,
    recordings: Sequence[str | Path],
    *,
    prices: PriceTable | str | Path | None = None,
) -> DiffReport:
    """The diff over each recording (a side that is itself a recording replaces it on that side)."""
    counter = TokenCounter()
    table = prices if isinstance(prices, PriceTable) else load_prices(prices)
    paths: list[str | Path] = list(recordings)
    if base.recording is not None and cand.recording is not None and paths:
        # Both sides fixed: each recording given would have been "diffed" as the same two files again,
        # labelled with its own name, and the totals counted that many times.
        raise DiffError(
            f"both sides are recordings ({base.recording}, {cand.recording}): the recordings after them "
            f"({', '.join(str(p) for p in paths)}) would not be used; leave them out, or give a configuration "
            "(recorded, key=value, .toml/.json) for one side"
        )
    seen: dict[Path, str | Path] = {}
    for p in paths:
        key = Path(p).resolve()
        if key in seen:  # its figures would be counted twice in the totals
            raise DiffError(f"{p} is given twice (as {seen[key]} too): give each recording once")
        seen[key] = p
    if not paths:
        paths.extend([p for p in (base.recording, cand.recording) if p is not None][:1])
    if not paths:
        raise DiffError("give at least one recording to diff the two configurations on")
    cache: dict[Path, Recording] = {}
    damaged: dict[Path, str] = {}

    def events(p: Path) -> Recording:
        if p not in cache:
            try:
                got = Recording(p, counter)
            except (OSError, ContextPipeError) as exc:
                text = str(exc)  # a RecordingError names the file already
                raise DiffError(text if text.startswith(str(p)) else f"{p}: {text}") from exc
            cache[p] = got
            if not got.has_requests:
                # Nothing to compare: a diff of 0 turns (or of one side's turns against none) would pass
                # every --fail-on gate. The agent died before its first request, or it never made one.
                why = "holds no events" if not got.has_events else "holds no requests"
                raise DiffError(
                    f"{p} {why}: its agent stopped before its first turn was recorded; nothing to diff"
                )
            if got.damage:
                damaged[p] = f"{p}: {got.damage}"
        return cache[p]

    try:
        return _diff_each(base, cand, paths, events, damaged, table, counter)
    finally:
        for rec in cache.values():
            rec.close()


def _diff_each(
    base: Side,
    cand: Side,
    paths: list[str | Path],
    events: Callable[[Path], Recording],
    damaged: dict[Path, str],
    table: PriceTable,
    counter: TokenCounter,
) -> DiffReport:
    out = []
    for p in paths:
        p = Path(p)
        ev_a = events(base.recording) if base.recording else events(p)
        ev_b = events(cand.recording) if cand.recording else events(p)
        files = ", ".join(dict.fromkeys(str(x) for x in (base.recording or p, cand.recording or p)))
        try:
            out.append(diff_session(ev_a, ev_b, base, cand, source=str(p), prices=table, counter=counter))
            # A file cut short is read up to the cut: its figures are of those turns only.
            used = dict.fromkeys(x for x in (base.recording or p, cand.recording or p))
            out[-1].notes[:0] = [damaged[x] for x in used if x in damaged]
        except ReplayError as exc:  # says which event, not which file
            raise DiffError(f"{files}: {exc}") from None
        except ContextPipeError:
            raise
        except MALFORMED as exc:  # an event of the wrong shape, met while rebuilding: the file's fault
            raise DiffError(f"{files}: events are {not_the_engines(exc)}") from None
    return DiffReport(base.label, cand.label, out)
