"""Attaching on the fold stream builds no trace of a turn before the attach (issue 15, item 4).

The fold stream's inspector rebuilds each turn's trace from the journal's events (inspector/sources/
live_fold.py), so an agent whose traces nobody has read keeps its turns as recipes (engine/trace_lazy.py)
while only such a client is attached. Yet the snapshot it was sent on attaching, and the range answers
of its history fill, read the journal by index, and reading builds: each turn before the attach had
its trace built on the agent (~100+ us of its CPU apiece) only to be sent whole or summarized. They now
go as their `turn_deferred` markers, as the live stream sends them, and the inspector's fold builds them;
the newest turn of a tail snapshot excepted (the first frame shows it, and the fold cannot rebuild it
without the history before it).

Real Pipelines serving their probe, real Unix sockets, the real live source. Builds are counted at
TurnEvent.resolve (the one place a journaled turn's trace is built).
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from engine.probe.handshake import TAIL_MIN
from engine.recording.journal import unpack_event
from engine.trace_lazy import TurnEvent
from inspector.sources import HistoryFilled
from inspector.sources.live import LiveSource
from tests.test_probe_fold import _pipeline, _turn

T = 20.0


@pytest.fixture
def builds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The turns whose traces were built from their recipes (a resolve that found no event built)."""
    built: list[int] = []
    real = TurnEvent.resolve

    def resolve(self: TurnEvent) -> dict[str, Any]:
        if self._event is None and self._record is not None:
            built.append(self._record.turn)
        return real(self)

    monkeypatch.setattr(TurnEvent, "resolve", resolve)
    return built


def _follow_until_filled(src: LiveSource) -> None:
    """follow() in the background (as the app's reader) until the history before the snapshot's tail
    is in and folded (at once if there was none)."""
    told: list[Any] = []

    def run() -> None:
        for e in src.follow():
            if isinstance(e, HistoryFilled):
                told.append(e)

    threading.Thread(target=run, daemon=True).start()
    deadline = time.monotonic() + 3 * T
    while True:
        with src._state:
            if src._history_told and src._jpos >= src._history_at and not getattr(src, "_marks", None):
                return
        assert time.monotonic() < deadline, f"the history did not arrive ({src._jpos} of {src._history_at})"
        time.sleep(0.02)


def _same_as_the_agents(src: LiveSource, pipe: Any, turns: int) -> None:
    """The client's journal is the agent's, event for event, and every turn's trace the agent's own
    (read last: reading the agent's builds its traces)."""
    src._load_events()  # (the journal to its end, as a save reads it)
    mine = [dict(e) for e in src.events]
    assert [e.get("k") for e in mine].count("turn_deferred") == 0, "every marker became its turn"
    shown = {t: dict(src.full_trace(t)) for t in range(turns)}
    journal = [unpack_event(dict(e)) for e in pipe.journal.events]
    assert len(mine) == len(journal)
    for i, (a, b) in enumerate(zip(mine, journal, strict=True)):
        assert a == b, (i, a.get("k"), b.get("k"))
    agent = {tr["turn"]: tr for tr in list(pipe.traces)}  # (the recent ones: the rest are in the journal)
    agent.update({e["turn"]: e["trace"] for e in journal if e.get("k") == "turn" and e["turn"] not in agent})
    for t in range(turns):
        assert shown[t] == agent[t], t


@pytest.mark.parametrize("history", [12, 300], ids=["whole", "tail"])
def test_attaching_on_the_fold_stream_builds_no_trace_of_the_turns_before(
    rtdir: Path, builds: list[int], history: int
) -> None:
    """A short session's whole snapshot, and a longer one's tail and history by range (the journal
    in memory, where reading it built each turn): no turn built but the tail's newest (shown at once)
    and those annotated before (the fold cannot see their annotations); on the old code every turn
    before the attach (12 of 12, 300 of 300). The folded journal and traces are the agent's."""
    pipe = _pipeline(rtdir, window=12_000)
    try:
        for t in range(history):
            _turn(pipe, t, 40 + t % 300, note=t % 10 == 3)
        n = len(pipe.journal.events)
        assert (n > TAIL_MIN) == (history > 100), n
        assert not builds, "nobody read a trace before the attach"
        src = LiveSource(os.getpid(), timeout=T, backfill_idle=None, fold=True)
        assert src._folding
        _follow_until_filled(src)
        tail = src.client.snapshot_at > 0
        assert tail == (history > 100)
        attached = sorted(builds)
        # A turn annotated while no client was attached: its annotation is in its record only (see
        # Deferred.private), so it is sent built.
        annotated = [t for t in range(history) if t % 10 == 3]
        assert attached == sorted({*annotated, *([history - 1] if tail else [])}), (
            f"attaching built {len(attached)} turns' traces: {attached[:10]}"
        )
        assert src.folded_turns == history - len(attached) and src.asked_traces == 0
        _same_as_the_agents(src, pipe, history)
        src.close()
    finally:
        pipe.close()
