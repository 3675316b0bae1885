"""RecordingReader.events(trace_fields=...): turn traces with only the fields a reader asks for
(engine/recording/lean_turns.py), the same events otherwise, and the same errors for corrupt input."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path
from typing import Any

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.recording.cpsession import RecordingError, RecordingReader
from engine.recording.frames import FrameError, decode_frames, encode_frame
from engine.recording.lean_turns import decode_frames_lean
from engine.sim.simulate import simulate_events, simulate_file
from engine.sim.simulate_read import TRACE_FIELDS
from tests.support.recordings import record_coding_session

ROOT = Path(__file__).resolve().parent.parent
DEMOS = sorted((ROOT / "demo_sessions").glob("*.cpsession"))


def _record(path: Path, turns: int, window: int, lines: int) -> None:
    """A coding-agent loop recorded by the real engine (tool outputs of up to `lines` lines)."""
    record_coding_session(
        path,
        turns,
        window=window,
        arguments=lambda t: {"cmd": str(t)},
        output=lambda t: "".join(f"line {t}.{i}: value {i * t}\n" for i in range(5 + (t * 37) % lines)),
    )


@pytest.fixture(scope="module")
def sessions(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    d = tmp_path_factory.mktemp("lean")
    out = []
    for turns, window, lines in ((12, 128_000, 40), (40, 6_000, 120)):
        p = d / f"s{turns}.cpsession"
        _record(p, turns, window, lines)
        out.append(p)
    return out + DEMOS


def _projected(events: list[dict[str, Any]], fields: set[str]) -> list[dict[str, Any]]:
    return [
        {**e, "trace": {k: v for k, v in e["trace"].items() if k in fields}} if e.get("k") == "turn" else e
        for e in events
    ]


TRACE_KEYS = ["sections", "steps", "actions", "compaction", "usage", "tier", "markers", "nothing_like_it"]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(fields=st.sets(st.sampled_from(TRACE_KEYS)))
def test_lean_events_are_the_whole_events_with_their_traces_cut_to_the_fields(
    sessions: list[Path], fields: set[str]
) -> None:
    """Every event of every recording (two engine sessions, one trimming every turn, and the demo
    recordings): blobs, messages, requests as they are; each turn's trace exactly the asked-for fields
    of the whole trace (none, some, or ones no trace has), in the trace's own order."""
    for p in sessions:
        with RecordingReader.open(p) as r:
            whole = list(r.events())
        with RecordingReader.open(p) as r:
            lean = list(r.events(trace_fields=fields))
        assert lean == _projected(whole, fields)
        assert [list(e["trace"]) for e in lean if e.get("k") == "turn"] == [
            [k for k in e["trace"] if k in fields] for e in whole if e.get("k") == "turn"
        ]


def test_simulate_reads_only_the_sections_and_reports_the_same(sessions: list[Path]) -> None:
    """simulate_file reads each trace's sections only (the count check's), and its report is the one
    a simulate of the whole events gives. On main, every trace was read whole (this fails there: no
    TRACE_FIELDS)."""
    assert TRACE_FIELDS == ("sections",)
    for p in sessions:
        with RecordingReader.open(p) as r:
            whole = list(r.events())
            counts = r.token_counts()
        with RecordingReader.open(p) as r:
            lean = list(r.events(trace_fields=TRACE_FIELDS))
        assert {k for e in lean if e.get("k") == "turn" for k in e["trace"]} <= {"sections"}
        a = simulate_events(whole, source=str(p), counts=counts).to_json(per_turn=True)
        b = simulate_file(p).to_json(per_turn=True)
        a.pop("elapsed_s"), b.pop("elapsed_s")
        assert a == b


def _turn_payload(sessions: list[Path]) -> bytes:
    with RecordingReader.open(sessions[1]) as r:
        ev = next(e for e in r.events() if e.get("k") == "turn" and e["trace"].get("compaction") is not None)
    payload = msgpack.packb(ev, use_bin_type=True)
    assert payload[1:8] == b"\xa1k\xa4turn"  # the shape the lean walk looks for, as the writer makes it
    return payload


def _frame(payload: bytes) -> bytes:
    return struct.pack(">II", len(payload), zlib.crc32(payload)) + payload


def _outcome(decode: Any, buf: bytes, fields: tuple[str, ...] | None = None) -> Any:
    try:
        out = decode(buf) if fields is None else decode(buf, fields)
    except FrameError as exc:
        return f"FrameError: {exc}"
    return out


def test_a_cut_or_padded_turn_payload_gets_the_whole_decodes_error(sessions: list[Path]) -> None:
    """A turn frame whose crc is right but whose msgpack is cut short at any byte, or followed by more
    bytes, or corrupt under the right crc: the lean decode raises decode_frames' very error (or, for a
    cut that still parses as something else, gives what it gives)."""
    payload = _turn_payload(sessions)
    cases = [payload[:n] for n in range(1, len(payload))]
    cases += [payload + b"\xc0", payload + payload, payload[:-1] + b"\xc1"]  # trailing data; a reserved byte
    checked = 0
    for p in cases:
        buf = _frame(p)
        whole = _outcome(decode_frames, buf)
        lean = _outcome(decode_frames_lean, buf, TRACE_FIELDS)
        if isinstance(whole, str):
            assert lean == whole, (len(p), whole, lean)
            checked += 1
        else:
            assert lean == (_projected(whole[0], set(TRACE_FIELDS)), whole[1])
    assert checked >= len(payload) - 2  # nearly every cut is an error, and each is the same error


def test_a_flipped_byte_is_the_same_error(sessions: list[Path]) -> None:
    """A frame whose bytes no longer match its crc: the same error, whichever way it is read; and a
    recording corrupted in its middle gives the same error from events() with or without fields."""
    payload = _turn_payload(sessions)
    bad = bytearray(_frame(payload))
    bad[40] ^= 0x20
    assert _outcome(decode_frames_lean, bytes(bad), TRACE_FIELDS) == _outcome(decode_frames, bytes(bad))
    assert "checksum mismatch" in _outcome(decode_frames, bytes(bad))
    src = sessions[1].read_bytes()
    corrupt = sessions[1].with_suffix(".corrupt.cpsession")
    data = bytearray(src)
    data[len(data) // 2] ^= 0xFF
    corrupt.write_bytes(bytes(data))
    errors = []
    for fields in (None, TRACE_FIELDS):
        with pytest.raises(RecordingError) as exc, RecordingReader.open(corrupt) as r:
            list(r.events(trace_fields=fields))
        errors.append(str(exc.value))
    assert errors[0] == errors[1]


def test_frames_that_are_not_plain_turn_events_are_decoded_whole() -> None:
    """A turn whose trace is not a map, a blob, a map with an unhashable key in the event itself: as
    decode_frames gives them (the event or its error)."""
    frames = [
        encode_frame({"k": "turn", "turn": 3, "trace": [1, 2, 3]}),
        encode_frame({"k": "blob", "h": "ab", "data": "text"}),
        encode_frame({"k": "turn", "turn": 4, "trace": {"sections": [{"id": "x"}], "steps": ["a"]}}),
    ]
    buf = b"".join(frames)
    whole, used = decode_frames(buf)
    lean, used_lean = decode_frames_lean(buf, TRACE_FIELDS)
    assert used == used_lean == len(buf)
    assert lean == [whole[0], whole[1], {"k": "turn", "turn": 4, "trace": {"sections": [{"id": "x"}]}}]
    unhashable = b"\x83\xa1k\xa4turn" + msgpack.packb([1]) + b"\x01" + b"\xa5trace\x80"
    assert _outcome(decode_frames_lean, _frame(unhashable), TRACE_FIELDS) == _outcome(
        decode_frames, _frame(unhashable)
    )
