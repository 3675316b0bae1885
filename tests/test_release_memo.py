"""Pipeline._release_history answers a turn whose task end and compaction cut are those it last released
to without calling into the history log (issue 12: two calls a turn fewer), and releases as before once
the cut moves or the log's on-disk end moved (a replay checkpoint's park or unpark)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engine.pipeline import Pipeline
from tests.support.turn_work import python_frames
from tests.test_history_window import _pipe, _round


def _log_calls(fn: Callable[[], Any]) -> int:
    seen = python_frames(fn, basename=True)
    return seen[("history_log.py", "release")] + seen[("history_log.py", "starts_round")]


def _compacted(pipe: Pipeline, start: int = 0) -> int:
    """Rounds until a compaction moved messages to disk; the next round's number."""
    t = start
    while pipe.history.on_disk() == 0 or pipe.compaction.compactions < 2:
        _round(pipe, t)
        t += 1
        assert t < 400, "the session never compacted"
    return t


def test_a_turn_that_keeps_the_cut_does_not_ask_the_log_again() -> None:
    pipe = _pipe(8)
    start = _compacted(pipe)
    held = 0
    for t in range(start, start + 40):
        cut = pipe.compaction.cut
        calls = _log_calls(lambda: _round(pipe, t))  # noqa: B023  (called at once)
        if pipe.compaction.cut == cut and pipe.compaction.cut > 0:
            # The request's fold asked with the cut it last released to: nothing to move.
            assert calls == 0, (t, cut)
            held += 1
    assert held >= 10
    pipe.close()


def test_release_runs_again_when_the_cut_moves_or_the_log_read_messages_back() -> None:
    pipe, kept = _pipe(8), _pipe(None)
    t = _compacted(pipe)
    for k in range(t):
        _round(kept, k)
    # The cut moves at each compaction: the messages behind it go to disk as before.
    disk = pipe.history.on_disk()
    moves = 0
    while moves < 2:
        cut = pipe.compaction.cut
        _round(pipe, t)
        _round(kept, t)
        t += 1
        if pipe.compaction.cut != cut:
            moves += 1
            assert pipe.history.on_disk() > disk
            disk = pipe.history.on_disk()
    # Messages read back into memory (a checkpoint restored): the next turn with the same cut releases
    # them again, although the task end and cut are those released to before.
    te = next(i for i, msg in enumerate(pipe.history) if msg.role == "assistant")  # the task's end
    pipe.history.unpark(te)
    assert pipe.history.on_disk() < disk
    cut = pipe.compaction.cut
    body = _round(pipe, t)
    assert body == _round(kept, t)
    if pipe.compaction.cut == cut:
        assert pipe.history.on_disk() >= disk
    assert list(pipe.history) == list(kept.history)
    pipe.close()
    kept.close()
