"""An annotated turn whose annotation the journal holds apart goes to a fold client as its marker.

Pipeline.annotate journals an annotation on its own (`{"k": "annotate", ...}`) while a probe has
clients, so a fold of the journal (the inspector's live fold, the engine's own rebuild of spilled
turns) sets it as the agent's record does. The record now knows whether each of its annotations was
so journaled (TurnRecord.set's `apart`), and only a turn with one that was not is sent built
(TurnEvent.private). Before, every annotated turn counted as private: an inspector attaching after
another had been attached got those turns' traces built on the agent (~100+ us of its CPU apiece)
where the fold could rebuild them.

Real Pipelines serving their probe, real Unix sockets, the real live source; builds are counted at
TurnEvent.resolve as tests/test_attach_fold_snapshot.py counts them.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from inspector.sources.live import LiveSource
from tests.test_attach_fold_snapshot import _follow_until_filled, _same_as_the_agents, builds
from tests.test_probe_fold import _pipeline, _turn

T = 20.0
__all__ = ["builds"]  # (the fixture, imported for the tests here)


def _wait_clients(pipe: object, n: int) -> None:
    deadline = time.monotonic() + T
    while pipe.probe.client_count != n:  # type: ignore[attr-defined]
        assert time.monotonic() < deadline, f"{pipe.probe.client_count} clients, not {n}"  # type: ignore[attr-defined]
        time.sleep(0.005)


def test_turns_annotated_while_a_client_was_attached_are_folded_not_built(
    rtdir: Path, builds: list[int]
) -> None:
    pipe = _pipeline(rtdir, window=12_000)
    try:
        # Turns 0-3 annotated with nobody attached: their annotations are in their records only.
        for t in range(4):
            _turn(pipe, t, 40, note=True)
        first = LiveSource(os.getpid(), timeout=T, backfill_idle=None, fold=True)
        _wait_clients(pipe, 1)
        # (Its snapshot built those four, as before: the fold cannot see their annotations.)
        assert sorted(builds) == [0, 1, 2, 3], builds
        # Turns 4-9 annotated while a fold client is attached: each annotation journaled apart too.
        for t in range(4, 10):
            _turn(pipe, t, 40 + t, note=True)
        first.close()
        _wait_clients(pipe, 0)
        pipe.close_turn()
        src = LiveSource(os.getpid(), timeout=T, backfill_idle=None, fold=True)
        _follow_until_filled(src)
        # The second attach built none: turns 4-9 went as their markers and were folded (on the old code
        # they were built for its snapshot: any annotation made the record private).
        assert sorted(builds) == [0, 1, 2, 3], builds
        assert src.folded_turns == 6 and src.asked_traces == 0
        _same_as_the_agents(src, pipe, 10)
        src.close()
    finally:
        pipe.close()


def test_an_annotation_set_again_with_nobody_attached_makes_the_turn_private(rtdir: Path) -> None:
    """The same key set twice on one turn, journaled apart once: a fold would see only the first value,
    so that turn is sent built (the check is per set, not per key); a turn annotated only while a client
    was attached is not."""
    from engine.trace_lazy import TurnEvent

    pipe = _pipeline(rtdir, window=12_000)
    log = pipe.journal.events
    try:
        src = LiveSource(os.getpid(), timeout=T, backfill_idle=None, fold=True)
        _wait_clients(pipe, 1)
        pipe.next_request()
        pipe.annotate("note", 1)
        pipe.close_turn()
        said = log.entry(len(log) - 1)
        assert isinstance(said, TurnEvent) and not said.private()
        pipe.next_request()
        pipe.annotate("note", 1)
        src.close()
        _wait_clients(pipe, 0)
        pipe.annotate("note", 2)
        pipe.close_turn()
        unsaid = log.entry(len(log) - 1)
        assert isinstance(unsaid, TurnEvent) and unsaid.private()
    finally:
        pipe.close()


def test_a_spilled_turn_annotated_apart_goes_to_disk_unbuilt(rtdir: Path, monkeypatch: object) -> None:
    """An untraced agent with a fold inspector attached, annotating every turn, past the journal's
    bound: the journal writes those turns as their markers (their annotations are its own events, which
    the rebuild folds), builds none in the agent's thread, and reads them back with their annotations
    (spill32's leftover: the old code built every annotated turn it spilled: 383 of them here)."""
    import pytest

    from engine.trace_lazy import TurnRecord

    built = [0]
    real = TurnRecord._build

    def counted(self: TurnRecord) -> dict[str, object]:
        built[0] += 1
        return real(self)

    assert isinstance(monkeypatch, pytest.MonkeyPatch)
    monkeypatch.setattr(TurnRecord, "_build", counted)
    pipe = _pipeline(rtdir, window=12_000)
    try:
        src = LiveSource(os.getpid(), timeout=T, backfill_idle=None, fold=True)
        _wait_clients(pipe, 1)
        for t in range(900):
            _turn(pipe, t, 5 + t % 40, note=True)
        log = pipe.journal.events
        on_disk, kinds, _ = log.spilled_census()
        assert on_disk > 1_000 and kinds["turn"] > 150
        assert built[0] == 0, f"{built[0]} annotated turns built as they spilled"
        assert len(log._unbuilt) == kinds["turn"]
        src.close()
        first = log[log._unbuilt[0]]  # rebuilt where it is read, with its annotation
        assert first["k"] == "turn" and first["trace"]["note"] == {
            "turn": first["turn"],
            "size": 5 + first["turn"] % 40,
        }
    finally:
        pipe.close()
