"""A paced turn on the probe's fold stream goes from publish() straight into the inspector's ring.

The agent's thread sends a fold client's turn itself at the turn's close (its marker), all of the
turn's events in one batch frame. That send ran cold after the model call through _send_now,
_send_here and _ring_turn, each with its own checks (~25 us of the send's ~65, measured); the I/O
thread, asleep with nothing due, now names the fold client for publish()'s straight path as it does a
quiet elided reader (agent_send._ring_candidate, _fold_now). Real agent (a Pipeline serving its
probe), real socket and ring, the real live source folding the stream: the turns it shows are the
agent's own, key order included.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import pytest

from engine.probe import ring
from engine.probe.agent_limits import AGENT_WINDOW
from tests.support.fold_stream import assert_shown_as_sent, fold_stream, traced_turn_publishes, wait_until
from tests.test_probe_fold import _kinds, _turn


@pytest.mark.parametrize("record", [False, True])
def test_a_paced_fold_turn_is_one_ring_frame_from_publish_with_no_wake_up(rtdir: Path, record: bool) -> None:
    with fold_stream(rtdir, record) as fs:
        pipe, probe, src, view = fs.pipe, fs.probe, fs.src, fs.view
        # Every turn sent at its close, as by an agent whose turns come further apart than FOLD_COALESCE
        # (tests/test_probe_fold_coalesce.py has the closer ones).
        probe.fold_coalesce = 0.0
        # Spies (the real methods still run): the general send path and the I/O thread's wake-up byte.
        called: list[str] = []
        for name in ("_send_now", "_send_here", "_ring_turn", "_wake"):
            real = getattr(probe, name)

            def spy(*a: Any, _real: Any = real, _name: str = name, **k: Any) -> Any:
                called.append(_name)
                return _real(*a, **k)

            setattr(probe, name, spy)
        c = probe._ring_one
        written, sends, wakeups = c.ring.written, probe.agent_sends, probe.wakeups
        turns = list(range(2, 6))
        for t in turns:
            time.sleep(AGENT_WINDOW / 4)  # paced: a model call between turns
            _turn(pipe, t)
        pipe.close_turn()
        view.wait_for(turns[-1])
        assert called == [], f"a paced fold turn took the general send path: {called}"
        assert probe.wakeups == wakeups, "the I/O thread was woken for a paced fold turn"
        assert probe.agent_sends - sends == len(turns)  # one send (one batch frame) a turn, at its close
        assert c.ring.written > written
        if not record:
            assert _kinds(pipe, 2) == {"TurnRecord"}  # still unbuilt: the fold client does not trace
        assert_shown_as_sent(fs, turns)
        assert src.asked_traces == 0


@pytest.mark.parametrize("record", [False, True])
def test_a_paced_fold_turns_close_is_one_python_call_past_publish(rtdir: Path, record: bool) -> None:
    """The close's send runs once a turn right after the model call, when nothing of the probe is in
    cache, and each Python call on that path cost the agent's thread a few us (its frame, its code and
    the attributes it reads, cold): publish() calls `_fold_now`, which makes the batch and writes it with
    no other Python call but the ring's write (a recording agent's frames are stripped by a
    comprehension, a call of its own before Python 3.12), with the ring's write in line where the frame
    fits before the ring's end (RingWriter.write_frame only to go round it). It went through _ring_now,
    _window_full, _fold_now, _take_pending, _types and pack_payload_fast (~57 against ~49 us a turn's
    publishes, measured in one process), then _fold_now and write_frame (~44 against ~38 us a close)."""
    with fold_stream(rtdir, record) as fs:
        pipe, probe, view = fs.pipe, fs.probe, fs.view
        # Every turn sent at its close, as by an agent whose turns come further apart than FOLD_COALESCE
        # (tests/test_probe_fold_coalesce.py has the closer ones).
        probe.fold_coalesce = 0.0
        sends = probe.agent_sends
        turns = list(range(2, 6))
        with traced_turn_publishes(probe) as calls:
            for t in turns:
                time.sleep(AGENT_WINDOW / 4)  # paced: a model call between turns
                _turn(pipe, t)
        pipe.close_turn()
        view.wait_for(turns[-1])
        assert probe.agent_sends - sends == len(turns)
        assert len(calls) == len(turns)
        strip = ["<listcomp>"] if record and sys.version_info < (3, 12) else []
        for names in calls:
            assert names == ["publish", "_fold_now", *strip], names
        assert_shown_as_sent(fs, turns, key_order=False)


@pytest.mark.parametrize("stray", [["not", "an", "event"], ("not", "an", "event")])
def test_the_straight_path_leaves_a_queue_with_a_stray_object_as_it_was(rtdir: Path, stray: Any) -> None:
    """`_fold_now` sends only journal events (dicts, or a recording agent's (event, frame) pairs): any
    other object waiting (nothing the engine publishes, a capture layer's mistake), first, between or
    last, makes it decline before it takes or writes anything, so the general path (which leaves such
    slots out of the batch) decides. Its check is a loop over the waiting events (see `_fold_now`): one
    that looked at fewer of them fails here."""
    with fold_stream(rtdir, False) as fs:
        probe = fs.probe
        # A turn on the straight path: its reply and tool result are held for the next close. (Turn 1 is
        # not enough: run as the client settles, it was sent whole in about a third of the runs.)
        _turn(fs.pipe, 2)
        wait_until(lambda: probe._ring_one is not None, "the fold client was not named again after turn 2")
        c = probe._ring_one
        assert c is not None and c.fold
        pending = probe._pending  # (the I/O thread sleeps with nothing due: nothing else takes from it)
        held = list(pending)  # (turn 2's reply and tool result, held for the next close)
        assert held and all(type(ev) is dict for ev in held)
        for where in (0, len(held) // 2, len(held) + 1):
            waiting: list[Any] = [*held, {"k": "note"}]
            waiting.insert(where, stray)
            pending.clear()
            pending.extend(waiting)
            before = (probe._head, c.jpos, c.ring.written, probe.agent_sends)
            assert probe._fold_now(c) is False
            assert list(pending) == waiting
            assert (probe._head, c.jpos, c.ring.written, probe.agent_sends) == before
        pending.clear()
        pending.extend(held)


def test_fold_turns_written_in_line_go_round_a_small_ring_whole(
    monkeypatch: pytest.MonkeyPatch, rtdir: Path
) -> None:
    """`_fold_now` writes a frame that fits before the ring's end itself and leaves one that does not to
    RingWriter.write_frame, which goes round: in a ring a few turns long, every turn still reaches the
    inspector whole and in order through the straight path, each turn's frame its own send, none
    dropped. (A write in line that left the ring's position, room or total wrong shows here as a torn
    or lost turn, or a `dropped`.)"""
    monkeypatch.setattr(ring, "RING_SIZE", 4096)  # ~1 KB a turn: round the ring every four turns
    with fold_stream(rtdir, False) as fs:
        pipe, probe, view = fs.pipe, fs.probe, fs.view
        probe.fold_coalesce = 0.0  # every turn sent at its close
        c = probe._ring_one
        assert c is not None and c.ring is not None and c.ring.size == 4096
        written, sends = c.ring.written, probe.agent_sends
        turns = list(range(2, 22))
        for t in turns:
            _turn(pipe, t)
            view.wait_for(t)  # read before the next: the ring goes round under a reader keeping up
        pipe.close_turn()
        assert probe.agent_sends - sends == len(turns)  # each turn by the straight path
        assert c.ring.written - written > 3 * 4096  # round the ring more than three times
        assert c.dropped_total == 0 and not c.dropped_pending  # the agent lost nothing for it
        client = fs.src.client
        assert client is not None and client.dropped == 0  # nor did the ring (an overrun is counted there)
        assert_shown_as_sent(fs, turns)
