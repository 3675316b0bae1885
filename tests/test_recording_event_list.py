"""RecordingReader.event_list: list(events(trace_fields=...)) a chunk at a time: the same events in the
same order, and the same RecordingError where events() raises one (simulate reads a recording with it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from engine.recording.cpsession import RecordingError, RecordingReader, RecordingWriter
from engine.recording.frames import FrameError, encode_frame
from engine.recording.lean_turns import decode_frames_lean
from engine.sim.simulate_read import TRACE_FIELDS, recording_events
from tests.support.recordings import record_coding_session

ROOT = Path(__file__).resolve().parent.parent
DEMOS = sorted((ROOT / "demo_sessions").glob("*.cpsession"))


@pytest.fixture(scope="module")
def sessions(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    d = tmp_path_factory.mktemp("event_list")
    p = d / "s30.cpsession"
    record_coding_session(
        p,
        30,
        window=6_000,
        arguments=lambda t: {"cmd": str(t)},
        output=lambda t: "".join(f"line {t}.{i}: value {i * t}\n" for i in range(5 + (t * 37) % 90)),
    )
    v1 = d / "s30.v1.cpsession"  # the same events in version 1 (one frame an event)
    with RecordingReader.open(p) as r, RecordingWriter(v1, dict(r.header), version=1) as w:
        for ev in r.events():
            w.append(ev)
    return [p, v1, *DEMOS]


def _outcome(path: Path, how: str, fields: Any) -> Any:
    try:
        with RecordingReader.open(path) as r:
            return r.event_list(fields) if how == "list" else list(r.events(trace_fields=fields))
    except RecordingError as exc:
        return f"RecordingError: {exc}"


@pytest.mark.parametrize("fields", [None, TRACE_FIELDS, ()])
def test_event_list_is_the_events(sessions: list[Path], fields: Any) -> None:
    for path in sessions:
        got = _outcome(path, "list", fields)
        assert isinstance(got, list) and got, path
        assert got == _outcome(path, "events", fields), path


def test_simulate_holds_the_same_events(sessions: list[Path]) -> None:
    for path in sessions:
        with RecordingReader.open(path) as r:
            held = recording_events(r)()
            assert held == list(r.events(trace_fields=TRACE_FIELDS))


def test_a_damaged_recording_raises_what_events_raises(sessions: list[Path], tmp_path: Path) -> None:
    src = sessions[0].read_bytes()
    checked = 0
    for at in range(len(src) // 7, len(src), len(src) // 7):
        bad = tmp_path / f"bad{at}.cpsession"
        data = bytearray(src)
        data[at] ^= 0x5A
        bad.write_bytes(bytes(data))
        for fields in (None, TRACE_FIELDS):
            want = _outcome(bad, "events", fields)
            assert _outcome(bad, "list", fields) == want, at
            checked += isinstance(want, str)
    assert checked  # at least one of the flips is an error


def test_a_format_frame_among_a_chunks_events_is_the_same_error(
    sessions: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    inflate = RecordingReader._inflate_chunk

    def with_format_frame(self: RecordingReader, *a: Any, **kw: Any) -> list[dict[str, Any]]:
        events = inflate(self, *a, **kw)
        return [*events[:1], {"k": "@x"}, *events[1:]] if len(events) > 3 else events

    monkeypatch.setattr(RecordingReader, "_inflate_chunk", with_format_frame)
    want = _outcome(sessions[0], "events", TRACE_FIELDS)
    assert isinstance(want, str) and "format frame '@x' among the events" in want
    assert _outcome(sessions[0], "list", TRACE_FIELDS) == want


def test_a_frame_over_the_length_limit_is_the_same_error() -> None:
    buf = encode_frame({"k": "blob", "h": "ab", "data": "x" * 100})
    with pytest.raises(FrameError) as exc:
        decode_frames_lean(buf, TRACE_FIELDS, limit=50)
    assert str(exc.value) == f"frame length {len(buf) - 8} exceeds the limit of 50 bytes at offset 0"
