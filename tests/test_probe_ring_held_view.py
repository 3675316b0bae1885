"""The ring's header stored through its u64 views is what struct.pack_into stored before.

publish() marks a fold client's ring with two item stores of `RingWriter.held_q`, and each frame's
written total is one store of `written_q` (engine.probe.ring, `_NATIVE_LE`: cheaper cold than
struct.pack_into). The inspector reads the record as `<QQ` (the count of
events held, the total written + 1 when the newest was held): these tests hold the agent's real path
(a Pipeline serving its probe, the live source on the fold stream) to those bytes, byte for byte, and
check that a ring with the view still closes its mapping when its client leaves.
"""

from __future__ import annotations

import time
from pathlib import Path

from engine.probe import ring as ring_mod
from engine.probe.ring import _HELD, HELD_AT, RingReader, RingWriter
from tests.test_probe_fold import T, _pipeline
from tests.test_probe_fold_held import _close
from tests.test_probe_fold_held_marks import _fold_client, _sent


def _record(ring: RingWriter) -> bytes:
    return bytes(ring._mm[HELD_AT : HELD_AT + _HELD.size])


def test_mark_held_through_the_view_stores_the_pack_into_record() -> None:
    view, packed = RingWriter(4096), RingWriter(4096)
    packed.held_q = None  # the struct.pack_into store, as before the view
    try:
        assert view.held_q is not None or not ring_mod._NATIVE_LE
        for w in (view, packed):
            w.write(b"x" * 100)
            w.mark_held(7)
        assert _record(view) == _record(packed) == _HELD.pack(7, 101)
        reader = RingReader(view.fd, 4096)  # type: ignore[arg-type]
        try:
            assert reader.held() == 7
            view.write(b"y")  # a frame written since: nothing held since it
            assert reader.held() == 0
        finally:
            reader.close()
    finally:
        view.close()
        packed.close()
    # The view is released before the mapping: close() leaves nothing mapped (a view still exported
    # would make mmap.close() fail, which close() swallows).
    assert view._mm.closed and packed._mm.closed


def test_the_written_total_through_the_view_is_the_pack_into_header() -> None:
    """Frames written (past the ring's end too) leave the same header and the same bytes to read."""
    view, packed = RingWriter(4096), RingWriter(4096)
    packed.held_q = packed.written_q = None  # struct.pack_into, as before the views
    readers = [RingReader(w.fd, 4096) for w in (view, packed)]  # type: ignore[arg-type]
    try:
        assert view.written_q is not None or not ring_mod._NATIVE_LE
        for i in range(12):
            frame = bytes([i]) * (500 + 37 * i)
            for w in (view, packed):
                if i % 2:
                    w.write_frame(frame[:8], frame[8:])
                else:
                    w.write(frame)
            assert bytes(view._mm[:HELD_AT]) == bytes(packed._mm[:HELD_AT])
            assert readers[0].take() == readers[1].take() == frame
        assert readers[0].written() == view.written == sum(500 + 37 * i for i in range(12)) > 4096
    finally:
        for r in readers:
            r.close()
        view.close()
        packed.close()
    assert view._mm.closed


def test_a_held_event_marks_the_fold_ring_with_the_exact_record(rtdir: Path) -> None:
    pipe = _pipeline(rtdir)
    probe = pipe.probe
    probe.fold_coalesce = 0.0  # every close sent at once: frames where the test says
    try:
        client, view = _fold_client(pipe)
        (ring,) = probe._held_rings
        assert ring.held_q is not None or not ring_mod._NATIVE_LE
        _close(pipe, 1)  # the turn's batch: a frame, nothing held since
        _sent(probe, client)
        probe.mark_gap = 0.0  # every held event marked: each store is checked below
        calls = pipe.assistant("step 1", [{"id": "c1", "name": "bash", "arguments": "{}"}])
        assert _record(ring) == _HELD.pack(probe._holds, ring.written + 1)
        first = client.held()
        assert first == probe._holds > 0
        pipe.tool_result(calls[0].id, "output of step 1")
        assert _record(ring) == _HELD.pack(probe._holds, ring.written + 1)
        assert client.held() == probe._holds > first
        # The turn's close sends what was held: the reader sees nothing held since that frame.
        pipe.next_request()
        pipe.record_usage({"input_tokens": 100, "output_tokens": 10})
        _sent(probe, client)
        assert client.held() == 0
        view.stop()
        deadline = time.monotonic() + T
        while probe.client_count:
            assert time.monotonic() < deadline, "the client never left"
            time.sleep(0.005)
        deadline = time.monotonic() + T
        while not ring._mm.closed:  # the I/O thread closes its ring as the client leaves
            assert time.monotonic() < deadline, "the ring's mapping was left open (its view not released)"
            time.sleep(0.005)
        assert not probe._held_rings
    finally:
        pipe.close()
