"""The two real sources behind the app: a recording file and a live agent's probe socket.

Both keep the journal events they have seen and embed the engine (a Replayer) for what-if re-plans
and for showing section content; panels only ever see traces (dicts).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from engine.tokens import TokenCounter
from engine.trace_schema import Trace
from engine.whatif import Overrides
from inspector.sources import SimulationCancelled

if TYPE_CHECKING:
    # The replaying engine (pipeline, replayer) is imported by the first fold, in a worker: opening a
    # recording and drawing its first frame needs only the recording reader.
    from engine.assembly import Section
    from engine.pipeline import Built
    from engine.recording.counts import CountTable
    from engine.recording.paged_events import PagedEvents
    from engine.recording.replay import Replayer
    from engine.sim.simulate import SimulationReport

_COUNTER: TokenCounter | None = None


def shared_counter() -> TokenCounter:
    """One token-count cache for every replay in this process: re-plans only tokenize new content."""
    global _COUNTER
    if _COUNTER is None:
        _COUNTER = TokenCounter()
    return _COUNTER


def section_text(section: Section) -> str:
    return items_text(section.items)


def items_text(items: Iterable[Any]) -> str:
    """A section's text from its items (section_text's; content search has a turn's items, not its
    Section: inspector/content_search.py)."""
    out: list[str] = []
    _pieces(items, out)
    return "\n\n".join(out)


def item_text(it: Any) -> str | None:
    """One item's part of its section's text (None: an item that shows nothing). Items are shared from
    turn to turn (a message stays the same object while the history keeps it): content search counts a
    text item by item (inspector/content_search.py)."""
    out: list[str] = []
    _pieces((it,), out)
    return "\n\n".join(out) if out else None


def _pieces(items: Iterable[Any], out: list[str]) -> None:
    """The items' texts as section_text joins them (a blank line apart), appended to `out`: one loop for
    a whole section (a call per item made section_text 1.5-3.5x slower, 185 items 0.065 -> 0.10-0.23 ms)."""
    from engine.artifacts import Message, SpillReference, Text, Thinking, ToolCall, ToolResult, ToolSchema

    for it in items:
        if isinstance(it, Text):
            out.append(it.text)
        elif isinstance(it, SpillReference):
            out.append(it.render())
        elif isinstance(it, ToolSchema):
            out.append(
                json.dumps(
                    {"name": it.name, "description": it.description, "parameters": it.parameters()}, indent=2
                )
            )
        elif isinstance(it, Message):
            out.append(f"## {it.role}")
            for p in it.parts:
                if isinstance(p, ToolResult):
                    out.append(f"[tool result {p.call_id} ({p.form})]\n{p.content}")
                elif isinstance(p, ToolCall):
                    out.append(f"[tool call {p.id} {p.name}] {p.arguments}")
                elif isinstance(p, (Text, Thinking)):
                    out.append(p.text)


def _cancellable(events: Iterable[dict[str, Any]], cancelled: Callable[[], bool]) -> Iterator[dict[str, Any]]:
    """`events` as one of engine.sim.simulate's passes reads them, checking every 64 events whether a
    newer what-if has replaced this one, so a cancelled simulation stops within one pass."""
    for i, ev in enumerate(events):
        if i % 64 == 0 and cancelled():
            raise SimulationCancelled()
        yield ev


def _shadow_inputs(events: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """What engine.shadow.shadow_summary reads of a journal, read in one pass: the shadow, shadow_config,
    session and usage events (unpacked), and of each turn event its trace's final_tokens alone. Every
    event unpacked and held (each turn's whole trace decoded) was the whole journal in memory again."""
    from engine.recording.journal import trace_of, unpack_event

    out: list[dict[str, Any]] = []
    for e in events:
        k = e.get("k")
        if k in ("shadow", "shadow_config", "session", "usage"):
            out.append(unpack_event(e))
        elif k == "turn":
            ev = unpack_event(e)
            out.append(
                {"k": "turn", "turn": ev["turn"], "trace": {"final_tokens": trace_of(ev).get("final_tokens")}}
            )
    return out


def _sent_pair(events: Iterable[dict[str, Any]], turn: int) -> dict[int, dict[str, Any]]:
    """The requests the agent sent at turns `turn - 1` and `turn` (none for an engine's own session):
    what the request view and why_missed compare. Every turn's body, built and kept, held the session's
    texts again (and read every one a recording kept in its file)."""
    from engine.recording.why import ActualBodies

    sent = ActualBodies((turn - 1, turn))
    for ev in events:
        sent.feed(ev)
    return sent.out


# The policies whose per-turn cost the session what-if panel charts (panels/whatif_session.py).
CHARTED = ("pipeline", "gates_closed")


def charted(report: SimulationReport) -> dict[str, Any]:
    """A session-wide what-if's report as the panel keeps it: every policy's totals, and per turn only
    the cost of the two it charts. The per-turn rows of all eleven policies were ~4.5 KB a turn (54 MB
    held by the panel at 12,000 turns) for the ~2 numbers a turn it draws. Made here from the figures,
    not cut from the report's JSON with every row: those rows (eleven dicts of nine a turn) were built
    only to be dropped, and their growth set off the collector's full collections as the session grew
    (a 3,000-turn what-if: ~0.1 s of rows and collections)."""
    out = report.to_json()
    for name, pol in out["policies"].items():
        figures = report.policies[name]
        if pol and name in CHARTED and figures is not None:
            pol["per_turn"] = [{"cost_usd": t.cost_json()} for t in figures.turns]
    return out


class ReplayingSource:
    """Shared behaviour: journal events in memory, an embedded Replayer extended as events arrive, and a
    one-entry Built cache (content and request body of the turn on screen)."""

    kind = "replay"
    # Replayer(history_chunk=): None keeps the replay's whole conversation in memory (see FileSource).
    HISTORY_CHUNK: int | None = None

    def __init__(self) -> None:
        self.header: dict[str, Any] = {}
        self.events: list[dict[str, Any]] = []
        self._replayer: Replayer | None = None
        self._replayer_len = 0
        self._cache: tuple[int, Built] | None = None
        self._lock = threading.RLock()
        self._shadow: tuple[int, dict[str, Any] | None] | None = None  # (events seen, summary)

    def close(self) -> None:
        """Nothing opened here (the Source protocol's close: subclasses let go of their file or socket)."""

    def _load_events(self, upto_turn: int | None = None) -> None:
        """Make sure `events` holds the journal through turn `upto_turn` (None: all of it). A live
        source already has every event; FileSource reads its file lazily."""
        return None

    def _counter(self) -> TokenCounter:
        """The token counter the replay folds with (a recording's own counts: see FileSource)."""
        return shared_counter()

    def _sim_counts(self) -> tuple[TokenCounter | None, CountTable | None]:
        """(counter, counts) for the session-wide what-if (simulate_events' arguments)."""
        return shared_counter(), None

    def replayer(self, upto_turn: int | None = None) -> Replayer:
        with self._lock:
            self._load_events(upto_turn)
            return self._caught_up()

    def _caught_up(self) -> Replayer:
        """The replayer, made or given the events `events` gained since it last looked (under the lock)."""
        with self._lock:
            if self._replayer is None:
                from engine.recording.replay import Replayer

                self._replayer = Replayer(self.events, self._counter(), self.HISTORY_CHUNK)
            elif self._replayer_len != len(self.events):
                # Only the new events are added: the fold cursor and checkpoints stay valid (a paged
                # journal has them already: the replayer holds it).
                self._replayer.extend(() if self._paged() else self.events[self._replayer_len :])
            self._replayer_len = len(self.events)
            return self._replayer

    def _paged(self) -> bool:
        """Whether `events` keeps its events in the recording (FileSource: engine/recording/paged_events.py)."""
        return getattr(self.events, "paged", False)

    def _journal(self) -> Sequence[dict[str, Any]]:
        """The events seen so far, to read outside the lock: a paged journal as it is (it only grows, and
        reads its pages from the file), a list copied (a live source appends to it)."""
        return self.events if self._paged() else list(self.events)

    def _around(self, events: Sequence[dict[str, Any]], turn: int) -> Sequence[dict[str, Any]]:
        """What the request view and why_missed read of turn `turn`'s own events (its usage, its error):
        that turn's events of a paged journal (read from the file), all of a list."""
        if not self._paged():
            return events
        from engine.recording.paged_events import turn_span

        return turn_span(events, self.replayer(turn).request_index, turn)

    def _sent(self, events: Sequence[dict[str, Any]], turn: int) -> dict[int, dict[str, Any]]:
        """_sent_pair of turn `turn`: nothing read for a paged journal without `actual` events (an
        engine's own session), else the events up to two turns on (a turn's actual request is recorded
        before the next turn's request), each page read from the file in order and let go."""
        if not self._paged():
            return _sent_pair(list(events), turn)
        paged = cast("PagedEvents", events)
        if "actual" not in paged.kinds:
            return {}
        stop = self.replayer(turn).request_index.get(turn + 2, len(paged))
        return _sent_pair(paged.upto(stop), turn)

    def _built(self, turn: int) -> Built:
        cached = self._cache
        if cached is not None and cached[0] == turn:
            return cached[1]
        built = self.replayer(turn).replan(turn)
        self._cache = (turn, built)
        return built

    def section_content(self, turn: int, section_id: str) -> str:
        built = self._built(turn)
        for s in built.asm:
            if s.id == section_id:
                return section_text(s)
        return f"(section {section_id} is not in turn {turn})"

    def request_body(self, turn: int) -> str:
        """For a captured session (tap, proxy, litellm, import): what the agent actually sent, sectioned
        with tokens, usage, cost and the cache break, then the engine's plan labelled as a what-if. For
        an agent that embeds the engine, what it built is what was sent: the engine's request alone."""
        engine_body = json.dumps(self._built(turn).serialized.json(), indent=2, ensure_ascii=False)
        from engine.recording.sent import sent_view
        from engine.recording.why import why_missed

        with self._lock:
            self._load_events(turn)
            events = self._journal()
        bodies = self._sent(events, turn)
        if turn not in bodies:
            return engine_body
        cache_break = None
        around = self._around(events, turn)
        try:
            why = why_missed(around, turn, replayer=self.replayer(turn), actual=bodies)
            sent_diff = why.get("as_sent") or {}
            cache_break = sent_diff.get("summary")
        except Exception:  # the diff is a help, not a condition for showing the request
            cache_break = None
        sent = sent_view(
            around,
            turn,
            shared_counter(),
            model=str(self.header.get("model", "")),
            bodies=bodies,
            cache_break=cache_break,
        )
        trace = self._built(turn).trace
        return (
            f"{sent}\n\n"
            f"ENGINE WOULD SEND: ContextPipe's plan for the same turn (a what-if, never sent)\n"
            f"  {trace.get('final_tokens', 0):,} tokens · tier {trace.get('tier')}\n\n{engine_body}"
        )

    def replan(self, turn: int, overrides: Overrides) -> Trace:
        return cast(Trace, self.replayer(turn).replan(turn, overrides).trace)

    def shadow_summary(self) -> dict[str, Any] | None:
        from engine.shadow import shadow_summary

        with self._lock:
            self._load_events()
            n = len(self.events)
            if self._shadow is not None and self._shadow[0] == n:
                return self._shadow[1]
            if self._paged() and "shadow_config" not in cast("PagedEvents", self.events).kinds:
                summary = None  # what shadow_summary says of a journal without a shadow, read from none
            else:
                # Turn events may be held packed (FileSource); shadow_summary reads their traces. Read a
                # page at a time from a paged journal, each trace decoded and let go (_shadow_inputs).
                journal = cast("PagedEvents", self.events).upto(n) if self._paged() else self.events
                summary = shadow_summary(_shadow_inputs(journal))
            self._shadow = (n, summary)
            return summary

    def why_missed(self, turn: int) -> dict[str, Any]:
        from engine.recording.why import why_missed

        replayer = self.replayer(turn)
        with self._lock:
            events = self._journal()
        return why_missed(
            self._around(events, turn), turn, replayer=replayer, actual=self._sent(events, turn)
        )

    def simulate(self, overrides: Overrides, cancelled: Callable[[], bool] | None = None) -> dict[str, Any]:
        """Session-wide what-if through engine.sim.simulate on the events seen so far, each of its passes
        reading them afresh: a paged journal (FileSource) page by page from the file, none held (a list
        of every event, held for the whole what-if, was the journal in memory again), a live source's
        list as copied under the lock (it appends)."""
        from engine.sim.simulate import SimSettings, simulate_stream

        with self._lock:
            self._load_events()
            journal = self._journal()
            n = len(journal)
        paged = self._paged()

        def read() -> Iterable[dict[str, Any]]:
            events = cast("PagedEvents", journal).upto(n) if paged else journal
            return _cancellable(events, cancelled) if cancelled is not None else events

        settings = SimSettings(
            provider=overrides.provider,
            window=overrides.window,
            gates=overrides.gates,
            thresholds=overrides.thresholds,
            policies=["all"],  # the panel compares every context policy on this session
        )
        counter, counts = self._sim_counts()
        report = simulate_stream(
            read, settings, source=str(self.header.get("path", "live")), counter=counter, counts=counts
        )
        return charted(report)

    def save(self, path: str | Path) -> int:
        from engine.recording.cpsession import RecordingWriter
        from engine.recording.text_window import LazyBlob, LazyTurn

        with self._lock:
            self._load_events()
            events = self._journal()  # a paged journal is read a page at a time as it is written
        with RecordingWriter(
            path, {k: self.header.get(k) for k in ("model", "provider", "engine_version")}
        ) as w:
            turns = 0
            for ev in events:
                w.append(ev.whole() if isinstance(ev, LazyBlob | LazyTurn) else ev)
                turns += ev.get("k") == "turn"
        return turns
