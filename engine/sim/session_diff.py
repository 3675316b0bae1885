"""Diff two engine configurations over recorded sessions: what each would send, turn by turn, and what it
costs. The check a pull request that changes prompts, tools or policy runs before it ships.

A *side* is a configuration: the recorded settings, recorded settings under what-if overrides (window,
gates, thresholds, provider; from a TOML/JSON file or inline `key=value` pairs), or another recording
of the same session (say, made by the candidate engine version or prompt). Each side is a replay of its
journal under its settings (the public fold, `Pipeline.build` with its own chain of compaction states,
as `simulate` does), so nothing here folds events on its own.

Per turn: the first point the two requests differ (`engine.request_diff`: section, unit, byte offset,
cause), each side's tool-schema hash, cache marker positions, prompt tokens, and its cache reads, writes
and cost from the provider cache simulator and the price table. `tokens` is the prompt the simulator
prices (the request's blocks, as the totals' `prompt_tokens` and the --fail-on tokens gate count it);
`request_tokens` is the trace's whole request, a few tokens of request framing more, which is what a
window holds. A *cache break* on a side is a turn whose
request does not keep the previous request's cached prefix (the simulator's attribution); a *new*
cache break is one the candidate has and the baseline does not, named by the candidate's own
request diff against its previous turn (tool_order, volatile, latch_changed, ...).

This module diffs one session (`diff_session`); many recordings at once, their totals and the --fail-on
gates are engine/sim/diff_report.py's (`diff_recordings`, `DiffReport`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import tee
from pathlib import Path
from typing import Any

from engine.errors import ConfigError
from engine.hashing import content_hash
from engine.pipeline import Built
from engine.policy.state import CompactionState
from engine.providers import canonical_provider
from engine.recording.journal import Event
from engine.recording.replay import Replayer, ReplayError
from engine.request_diff import RequestDiff, diff_requests, parse_request, with_engine_steps
from engine.sim.diff_sides import DiffError as DiffError
from engine.sim.diff_sides import Side
from engine.sim.diff_sides import parse_side as parse_side
from engine.sim.diff_text import summary_lines as summary_lines
from engine.sim.diff_text import to_markdown as to_markdown
from engine.sim.diff_text import to_text as to_text
from engine.sim.pricing import PriceTable, load_prices
from engine.sim.simulate_column import _simulate
from engine.sim.simulate_figures import PolicyFigures
from engine.sim.simulate_index import unbilled
from engine.sim.simulate_requests import _Req
from engine.sim.simulate_settings import (
    NO_MODEL_OPTION_FIX,
    NO_MODEL_OPTION_UNNAMED,
    SimulateError,
    _price_row,
    cache_rules_for,
)
from engine.tokens import TokenCounter
from engine.whatif import Overrides
from engine.wording import counted

# ------------------------------------------------------------------------------------------ sides


# ------------------------------------------------------------------------------------------ building


def side_builds(
    events: Iterable[Event], overrides: Overrides | None, counter: TokenCounter, replayer: Replayer | None = None
) -> Iterator[tuple[int, float, Built]]:
    """Every recorded turn rebuilt under `overrides` (None: as recorded), in order: (turn, time, built).
    `replayer`: the journal's, indexed already (Replayer.index_stream), when `events` is read once, not held."""
    if replayer is None:
        replayer = Replayer(events, counter)
    pipe = replayer.new_pipeline()
    state = CompactionState()
    ov = overrides if overrides is not None and not overrides.is_empty() else None
    for ev in events:
        if ev.get("k") == "request":
            pipe.begin_request(ev["turn"])
            cfg = pipe.config
            if ov is not None:
                cfg = cfg.with_overrides(ov.window, ov.thresholds, ov.gates, ov.provider)
            built = pipe.build(ev.get("bound", {}), cfg, state)
            state = built.state or state
            yield int(ev["turn"]), float(ev.get("time") or 0.0), built
        pipe.fold(ev)


def _schema_hash(built: Built) -> str:
    # In wire order: a reordered tool list is a different prefix to the cache.
    return content_hash(list(built.serialized.tool_shas.items()))[:12]


def _markers(built: Built) -> list[str]:
    return [f"{m['section']}@{m['offset_tokens']}" for m in built.trace.get("markers", ())]


# ------------------------------------------------------------------------------------------ the diff


@dataclass
class TurnDiff:
    """One turn under two configurations: the first request difference and each side's figures."""
    turn: int
    first_difference: dict[str, Any] | None  # request_diff between the two sides (None: identical)
    sides: list[dict[str, Any]]  # per side: tokens, schema hash, markers, cache read/write, cost, break
    new_cache_break: str | None = None  # the candidate broke its cache here and the baseline did not

    def to_json(self) -> dict[str, Any]:
        return {
            "turn": self.turn,
            "first_difference": self.first_difference,
            "baseline": self.sides[0],
            "candidate": self.sides[1],
            "new_cache_break": self.new_cache_break,
        }


@dataclass
class SessionDiff:
    """One recording under two configurations: turn by turn differences, totals and new cache breaks."""
    source: str
    turns: list[TurnDiff]
    totals: list[dict[str, Any]]  # per side
    new_breaks: dict[str, int]
    notes: list[str]

    @property
    def differing_turns(self) -> int:
        return sum(1 for t in self.turns if t.first_difference is not None)

    def to_json(self, per_turn: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {
            "source": self.source,
            "turns": len(self.turns),
            "differing_turns": self.differing_turns,
            "baseline": self.totals[0],
            "candidate": self.totals[1],
            "new_cache_breaks": self.new_breaks,
            "notes": self.notes,
        }
        if per_turn:
            out["per_turn"] = [t.to_json() for t in self.turns]
        return out


def _summary(d: RequestDiff) -> dict[str, Any]:
    return {
        "cause": d.cause,
        "breaks_cache": d.breaks_cache,
        "segment": d.segment,
        "section": d.section,
        "label": d.label,
        "block": d.block,
        "offset": d.offset,
        "detail": d.detail,
    }


def diff_session(
    base_events: Sequence[Event] | Recording,
    cand_events: Sequence[Event] | Recording,
    base: Side,
    cand: Side,
    *,
    source: str = "<journal>",
    prices: PriceTable | str | Path | None = None,
    counter: TokenCounter | None = None,
) -> SessionDiff:
    counter = counter if counter is not None else TokenCounter()
    table = prices if isinstance(prices, PriceTable) else load_prices(prices)
    notes: list[str] = []
    sides = [(base, base_events), (cand, cand_events)]
    reqs: list[list[_Req]] = [[], []]
    rows: dict[int, dict[Any, Any]] = {}
    prev: list[Any] = [None, None]
    gens = _builds(sides, counter)
    try:
        # Both sides advance in lockstep by turn: only the current and previous requests are held.
        cur = [next(g, None) for g in gens]
        while cur[0] is not None or cur[1] is not None:
            turns_now = [c[0] for c in cur if c is not None]
            t = min(turns_now)
            parsed: list[Any] = [None, None]
            for side in (0, 1):
                c = cur[side]
                if c is not None and c[0] == t:
                    parsed[side] = _take(c, side, prev, rows)
                    cur[side] = next(gens[side], None)
            if parsed[0] is not None and parsed[1] is not None:
                d = diff_requests(parsed[0], parsed[1])
                rows[t]["cross"] = None if d.identical else _summary(d)
                pv = [rows[t][side]["provider"] for side in (0, 1)]
                if pv[0] != pv[1] and d.cause != "model_changed":  # (a model change says it already)
                    # Another provider's request spells tools and system another way: the units differ
                    # from the first tool ("input schema edited" where nothing was) and no cache is shared.
                    rows[t]["cross"] = {
                        "cause": "provider_changed",
                        "breaks_cache": True,
                        "segment": "",
                        "section": "",
                        "label": "",
                        "block": None,
                        "offset": 0,
                        "detail": f"provider {pv[0]} -> {pv[1]}: another request format; each provider caches "
                        "its own requests",
                    }
    except ConfigError as exc:
        raise DiffError(str(exc)) from exc
    # Times and blocks for the simulator.
    for side in (0, 1):
        for t in sorted(rows):
            r = rows[t].get(side)
            if r is not None:
                reqs[side].append(r["_req"])
    sessions = [_session_of(ev) for _, ev in sides]
    figures: list[PolicyFigures] = []
    for side in (0, 1):
        cfg = sessions[side]
        ov = sides[side][0].overrides
        model = str(cfg["model"])
        provider = canonical_provider(ov.provider or cfg["provider"])
        try:
            price = _price_row(table, model, NO_MODEL_OPTION_FIX, NO_MODEL_OPTION_UNNAMED)
        except SimulateError as exc:
            # Which recording: with two recording sides the message did not say whose model it was.
            raise DiffError(f"{sides[side][0].recording or source}: {exc}") from exc
        rules = cache_rules_for(provider, model, ov.provider, price)
        outputs, failed = _outputs_and_failed(sides[side][1])
        failed = unbilled(failed, outputs)
        figures.append(
            _simulate(
                sides[side][0].label,
                [r for r in reqs[side] if r.turn not in failed],
                rules=rules,
                model=model,
                table=table,
                outputs=outputs,
                options={},
                link_outputs=False,
                automatic_prefix=rules in ("openai", "deepseek"),
            )
        )
    per = [{f.turn: f for f in fig.turns} for fig in figures]
    turns: list[TurnDiff] = []
    new_breaks: Counter[str] = Counter()
    only: dict[str, list[int]] = {"baseline": [], "candidate": []}
    for t in sorted(rows):
        row = rows[t]
        if 0 not in row or 1 not in row:
            only["baseline" if 1 not in row else "candidate"].append(t)
            continue
        sides_out = []
        for side in (0, 1):
            r = row[side]
            f = per[side].get(t)
            sides_out.append(
                {
                    # The simulator's prompt, what the cost and the totals are of (a turn it did not price,
                    # one that failed, counts its blocks the same way).
                    "tokens": f.prompt_tokens if f else r["tokens"],
                    "request_tokens": r["request_tokens"],
                    "schema_hash": r["schema"],
                    "markers": r["markers"],
                    "request_sha256": r["sha"][:16],
                    "cache_read_tokens": f.cache_read_tokens if f else 0,
                    "cache_write_tokens": f.cache_write_tokens if f else 0,
                    "cost_usd": round(f.cost_usd, 8) if f else 0.0,
                    "cache_break": f.cache_break if f else None,
                    "own_diff": r["own"],
                }
            )
        new = None
        if sides_out[1]["cache_break"] and not sides_out[0]["cache_break"]:
            own = sides_out[1]["own_diff"]
            new = own["cause"] if own and own["breaks_cache"] else str(sides_out[1]["cache_break"])
            new_breaks[new] += 1
        turns.append(TurnDiff(t, row["cross"], sides_out, new))
    for who, ts in only.items():
        # One line per side, not per turn (a long session against a short one was a line per turn), and
        # what it means for the figures: the totals are each side's whole recording.
        if ts:
            n = len(ts)
            notes.append(
                f"{'turn' if n == 1 else 'turns'} {_ranges(ts)} {'is' if n == 1 else 'are'} only in the {who}"
                f" ({n} turn{'' if n == 1 else 's'}): not compared turn by turn, but counted in the {who}'s"
                " totals (cost, tokens, hit rate)"
            )
    # Two recordings of different work (another task, another agent's run) diffed turn by turn: every
    # turn and the totals differ by the work, which read as the configurations' doing ("+395%" for a
    # 74-turn DeepSeek session against a 17-turn OpenHands one, with only "model changed" to say why).
    opening = [_opening(base_events), _opening(cand_events)]
    if opening[0] and opening[1] and not opening[0] & opening[1]:
        notes.insert(  # first: it is what every other figure of the diff has to be read with
            0,
            "the two recordings open with different tasks (their first user message and goal share nothing): "
            "if they are runs of different work, the turns and totals below differ by that work, not only by "
            "the two configurations"
        )
    # A request larger than its window is one no provider serves: a side that sends them prices a
    # session that could not have run (window=1 read as 70% cheaper). Said, as simulate says it.
    for side in (0, 1):
        window = int(sides[side][0].overrides.window or sessions[side]["window"])
        rows_side = [rows[t][side] for t in sorted(rows) if side in rows[t]]
        over = sum(1 for r in rows_side if r["request_tokens"] > window)  # framing included: the window holds it
        if over:
            who = "baseline" if side == 0 else "candidate"
            notes.append(
                f"{who}: {over} of {counted(len(rows_side), 'request')} {'is' if over == 1 else 'are'} larger than its window ({window:,}), "
                "which a provider would reject: its figures are of requests that could not be sent"
            )
    totals = []
    for side, fig in enumerate(figures):
        tot = fig.totals
        totals.append(
            {
                "label": sides[side][0].label,
                "prompt_tokens": tot.input_tokens,
                "cache_read_tokens": tot.cache_read,
                "cache_write_tokens": tot.cache_write,
                "cache_hit_rate": round(tot.hit_rate, 6),
                "cost_usd": round(fig.cost_usd, 8),
                "cache_breaks": fig.cache_breaks,
                "cache_break_causes": fig.cache_break_causes,
                "model": fig.model,
                "cache_rules": fig.cache_rules,
            }
        )
    return SessionDiff(source, turns, totals, dict(sorted(new_breaks.items())), notes)


def _opening(events: Sequence[Event] | Recording) -> set[str]:
    """What a recording's session opens with: the content hashes of the first user message's parts and of
    the goal, all recorded before the first request (every importer and the engine record them so)."""
    out: set[str] = set()
    for e in events.head() if isinstance(events, Recording) else events:
        k = e.get("k")
        if k == "request":
            break
        if k == "part" and isinstance(e.get("part"), Mapping) and e["part"].get("h"):
            out.add(str(e["part"]["h"]))
        elif k == "source" and isinstance(e.get("spec"), Mapping) and e["spec"].get("kind") == "goal" and e.get("h"):
            out.add(str(e["h"]))
    return out


def _ranges(turns: Sequence[int]) -> str:
    """1, 2, 3, 7, 9, 10 -> "1-3, 7, 9-10"."""
    out: list[str] = []
    start = prev = turns[0]
    for t in [*turns[1:], None]:
        if t is not None and t == prev + 1:
            prev = t
            continue
        out.append(str(start) if start == prev else f"{start}-{prev}")
        if t is not None:
            start = prev = t
    return ", ".join(out)


def _take(item: tuple[int, float, Built], side: int, prev: list[Any], rows: dict[int, dict[Any, Any]]) -> Any:
    """One side's rebuilt turn: its figures and its own diff against its previous request go into
    `rows[turn][side]`; returns the parsed request for the cross diff."""
    turn, tm, built = item
    parsed = parse_request(built.serialized)
    own = None
    if prev[side] is not None:
        steps = [str(a["step"]) for a in built.trace.get("actions", ())]
        own = _summary(with_engine_steps(diff_requests(prev[side], parsed), steps))
    prev[side] = parsed
    trace = built.trace
    rows.setdefault(turn, {"cross": None})[side] = {
        # The blocks' tokens, what the simulator prices; final_tokens adds the request's framing.
        "tokens": sum(b.tokens for b in built.serialized.blocks),
        "request_tokens": trace["final_tokens"],
        "schema": _schema_hash(built),
        "markers": _markers(built),
        "sha": built.serialized.request_sha256,
        "provider": built.serialized.provider,
        "own": own,
        "_req": _Req(
            turn,
            tm,
            list(built.serialized.blocks),
            [str(a["step"]) for a in trace.get("actions", ())],
            list(trace.get("latch_flips", ())),
        ),
    }
    return parsed


def _builds(sides: list[tuple[Side, Any]], counter: TokenCounter) -> list[Iterator[tuple[int, float, Built]]]:
    """Each side's builds. A recording is read again for them (nothing of it was held); one that is both
    sides' is read once for both (itertools.tee: the sides advance in lockstep by turn, so what the one
    ahead has read and the other has not is one turn's events)."""
    (_, a), (_, b) = sides
    if isinstance(a, Recording) and a is b:
        ra, rb = tee(a.read())
        reads: list[Iterable[Event]] = [ra, rb]
    else:
        reads = [x.read() if isinstance(x, Recording) else x for x in (a, b)]
    return [
        side_builds(ev, s.overrides, counter, src.replayer() if isinstance(src, Recording) else None)
        for (s, src), ev in zip(sides, reads, strict=True)
    ]


def _outputs_and_failed(events: Sequence[Event] | Recording) -> tuple[dict[int, int], set[int]]:
    if isinstance(events, Recording):
        return events.outputs_and_failed()
    return _outputs(events), {int(e["turn"]) for e in events if e.get("k") == "error"}


def _session_of(events: Sequence[Event] | Recording) -> dict[str, Any]:
    s = next((e for e in (events.head() if isinstance(events, Recording) else events) if e.get("k") == "session"), None)
    if s is None:
        raise DiffError("the journal has no session event: it was not written by the ContextPipe engine")
    return dict(s["config"])


def _outputs(events: Iterable[Event]) -> dict[int, int]:
    out: dict[int, int] = {}
    for e in events:
        if e.get("k") in ("usage", "actual") and e.get("usage"):
            out[int(e["turn"])] = int(e["usage"].get("output_tokens") or 0)
    return out


class Recording:
    """A recording the diff reads again for each pass instead of holding its events (they were most of a
    long session's diff memory: the journal of each file, whole). The first read, here, checks the file
    and gathers what the diff needs of the whole session with no trace built: whether it has requests,
    the replay index (session, turns, spill failures: Replayer.index_stream), the output tokens and the
    failed turns. Whatever of that fails is raised where the diff asked for it when it held the events,
    so a damaged file says the same thing at the same point."""

    def __init__(self, path: Path, counter: TokenCounter) -> None:
        from engine.recording.cpsession import RecordingReader

        self.path = path
        self._reader = RecordingReader.open(path)
        self.damage = self._reader.damage.message if self._reader.damage is not None else None
        self.has_events = self.has_requests = False
        self._index: Replayer | None = None
        self._index_error: ReplayError | None = None
        self._outputs: dict[int, int] | Exception = {}
        self._failed: set[int] | Exception = set()

        def lean() -> Iterator[Event]:
            # The turn events' traces are not built: nothing gathered here reads them.
            for _, ev in self._reader.event_frames(trace_fields=()):
                self.has_events = True
                self._gather(ev)
                yield ev

        events = lean()
        try:
            self._index = Replayer.index_stream(lambda: events, counter)
        except ReplayError as exc:  # said when the builds start, as Replayer(events) said it there
            self._index_error = exc
            for _ in events:  # the rest is read all the same: damage, or no requests, is said first
                pass

    def _gather(self, ev: Event) -> None:
        k = ev.get("k")
        if k == "request":
            self.has_requests = True
        if not isinstance(self._outputs, Exception) and k in ("usage", "actual") and ev.get("usage"):
            try:
                self._outputs[int(ev["turn"])] = int(ev["usage"].get("output_tokens") or 0)
            except Exception as exc:  # noqa: BLE001 - raised where _outputs() raised it
                self._outputs = exc
        if not isinstance(self._failed, Exception) and k == "error":
            try:
                self._failed.add(int(ev["turn"]))
            except Exception as exc:  # noqa: BLE001 - likewise
                self._failed = exc

    def read(self) -> Iterator[Event]:
        """The events afresh, in their plain in-memory form."""
        return (ev for _, ev in self._reader.event_frames())

    def head(self) -> Iterator[Event]:
        return self.read()

    def replayer(self) -> Replayer:
        if self._index is None:
            assert self._index_error is not None
            raise self._index_error
        return self._index

    def outputs_and_failed(self) -> tuple[dict[int, int], set[int]]:
        if isinstance(self._outputs, Exception):
            raise self._outputs
        if isinstance(self._failed, Exception):
            raise self._failed
        return self._outputs, self._failed

    def close(self) -> None:
        self._reader.close()
