"""Tests for engine/recording/cpsession.py: the `.cpsession` format version 1 (one frame per event), which
the reader still reads and a resumed v1 file still writes (writer, reader, crash safety, index).
Version 2 (compressed chunks) is tested in test_recording_v2.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.hashing import sha256_hex
from engine.recording.cpsession import (
    FORMAT_NAME,
    FORMAT_VERSION,
    TRAILER_SIZE,
    RecordingError,
    RecordingReader,
    RecordingWriter,
)
from engine.recording.frames import HEADER_SIZE, decode_header, encode_frame

ROOT = Path(__file__).resolve().parents[1]
HEADER = {"model": "claude-sonnet-4", "provider": "anthropic", "engine_version": "0.1.0", "start_time": 1.5}


def blob(data: str | bytes) -> dict[str, Any]:
    return {"k": "blob", "h": sha256_hex(data), "data": data}


def trace(n: int) -> dict[str, Any]:
    return {
        "turn": n,
        "tier": "Normal",
        "pressure": {"raw": 0.5, "predictive": 0.6},
        "sections": [],
        "alerts": [],
    }


def session_events(turns: int, size: int = 20) -> list[dict[str, Any]]:
    """What the engine emits: a shared system blob every turn, a new message blob, a message, the turn."""
    out: list[dict[str, Any]] = []
    for t in range(turns):
        msg = f"message {t} " + "x" * size
        out += [blob("system prompt"), blob(msg), {"k": "message", "role": "user", "h": sha256_hex(msg)}]
        out.append({"k": "turn", "turn": t, "trace": trace(t)})
    return out


def unique(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The events as stored: a blob whose hash was already written is skipped."""
    seen: set[str] = set()
    out = []
    for e in events:
        if e["k"] == "blob":
            if e["h"] in seen:
                continue
            seen.add(e["h"])
        out.append(e)
    return out


def record(path: Path, events: list[dict[str, Any]], close: bool = True) -> RecordingWriter:
    w = RecordingWriter(path, HEADER, version=1)
    for e in events:
        w.append(e)
    if close:
        w.close()
    return w


def frame_spans(data: bytes) -> list[tuple[int, int]]:
    spans, pos = [], 0
    while pos < len(data):
        length, _ = decode_header(data[pos : pos + HEADER_SIZE])
        spans.append((pos, pos + HEADER_SIZE + length))
        pos += HEADER_SIZE + length
    return spans


def test_round_trip(tmp_path: Path) -> None:
    events = session_events(6) + [{"k": "usage", "input_tokens": 10, "b": b"\x00\xff"}]
    p = tmp_path / "s.cpsession"
    record(p, events)
    with RecordingReader.open(p) as r:
        assert r.header["format"] == FORMAT_NAME and r.header["version"] == 1
        assert {k: r.header[k] for k in HEADER} == HEADER
        assert r.finished and r.damage is None and r.turn_count == 6
        assert list(r.events()) == unique(events)
        for n in range(6):
            assert r.turn(n) == {"k": "turn", "turn": n, "trace": trace(n)}
            assert r.turn(n - 6) == r.turn(n)
        assert r.blob(sha256_hex("message 3 " + "x" * 20)) == "message 3 " + "x" * 20
        upto = list(r.events(upto_turn=2))
        assert upto[-1] == {"k": "turn", "turn": 2, "trace": trace(2)}
        assert upto == unique(events)[: len(upto)]
        with pytest.raises(IndexError):
            r.turn(6)
        with pytest.raises(KeyError):
            r.blob("0" * 64)


def test_header_defaults_and_writer_refusals(tmp_path: Path) -> None:
    p = tmp_path / "s.cpsession"
    with RecordingWriter(p, {"model": "m", "provider": "openai", "extra": [1]}) as w:
        for bad in ({"k": "@index"}, {"x": 1}, {"k": "turn", "turn": "1"}, {"k": "blob", "h": None}):
            with pytest.raises(ValueError):
                w.append(bad)
        w.append({"k": "turn", "turn": 3})
        with pytest.raises(ValueError, match="increasing"):
            w.append({"k": "turn", "turn": 3})
    with pytest.raises(RecordingError, match="append after close"):
        w.append({"k": "x"})
    with pytest.raises(RecordingError, match="already exists.*resume"):
        RecordingWriter(p, HEADER)
    r = RecordingReader.open(p)
    assert r.header["extra"] == [1] and isinstance(r.header["start_time"], float)
    assert {"engine_version", "model", "provider"} <= set(r.header)
    assert oct(p.stat().st_mode & 0o777) == "0o600"


def test_blobs_are_stored_once(tmp_path: Path) -> None:
    big = "tool schema " * 1000  # 12 kB re-sent by the engine every turn
    p1, p2 = tmp_path / "a.cpsession", tmp_path / "b.cpsession"
    for path, turns in ((p1, 10), (p2, 200)):
        with RecordingWriter(path, HEADER, version=1) as w:
            for t in range(turns):
                w.append(blob(big))
                w.append({"k": "turn", "turn": t, "trace": trace(t)})
    # 190 more turns add their small traces (~100 bytes each), not 190 copies of the 12 kB blob.
    assert p2.stat().st_size - p1.stat().st_size < 190 * 150
    r = RecordingReader.open(p2)
    assert [e["k"] for e in r.events()].count("blob") == 1
    assert r.blob(sha256_hex(big)) == big


def test_resume_appends_and_keeps_dedup(tmp_path: Path) -> None:
    p = tmp_path / "s.cpsession"
    events = session_events(4)
    record(p, events[:8])
    with RecordingWriter.resume(p) as w:
        for e in events[8:]:
            w.append(e)
    r = RecordingReader.open(p)
    assert r.finished and r.turn_count == 4 and list(r.events()) == unique(events)
    assert r.header["model"] == HEADER["model"]
    w = RecordingWriter.resume(p)
    with pytest.raises(RecordingError, match="another writer"):
        RecordingWriter.resume(p)  # two writers would interleave frames
    with pytest.raises(RecordingError, match="another writer"):
        RecordingWriter(p, HEADER, overwrite=True)
    w.close()
    assert RecordingReader.open(p).turn_count == 4
    with RecordingWriter(p, HEADER, overwrite=True):
        pass
    assert RecordingReader.open(p).turn_count == 0


@pytest.mark.parametrize("closed", [True, False])
def test_truncation_at_every_offset(tmp_path: Path, closed: bool) -> None:
    events = session_events(3, size=5) + [{"k": "note", "text": "after the last turn"}]
    src = tmp_path / "full.cpsession"
    w = record(src, events, close=closed)
    if not closed:
        os.close(w._fd)  # type: ignore[arg-type]  # as if killed: no footer
        w._fd = None  # or its finalizer closes the number again, which another file may hold by then
    data = src.read_bytes()
    spans = frame_spans(data)
    header_end = spans[0][1]
    data_end = spans[len(unique(events))][1]
    cut_file = tmp_path / "cut.cpsession"
    for cut in range(len(data) + 1):
        cut_file.write_bytes(data[:cut])
        if cut < header_end:
            with pytest.raises(RecordingError, match="empty|header"):
                RecordingReader.open(cut_file)
            continue
        with RecordingReader.open(cut_file) as r:
            complete = sum(1 for s, e in spans[1:] if e <= min(cut, data_end))
            expected = unique(events)[:complete]
            assert list(r.events()) == expected, cut
            assert r.turn_count == sum(1 for e in expected if e["k"] == "turn")
            if r.turn_count:
                assert r.turn(-1)["k"] == "turn"
            boundary = any(e == cut for _, e in spans)
            if cut == len(data) and closed:
                assert r.finished and r.damage is None
            elif boundary and cut <= data_end:
                assert r.damage is None, cut
            else:
                assert r.damage is not None, cut
                start = max(s for s, _ in spans if s < cut)
                assert (
                    r.damage.offset == min(start, data_end) and r.damage.offset + r.damage.lost_bytes == cut
                )
                assert f"offset {r.damage.offset}" in r.damage.message


values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.text(max_size=20) | st.binary(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
raw_events = st.lists(
    st.tuples(
        st.sampled_from(["blob", "turn", "message", "usage"]), st.sampled_from(["a", "b", "c"]), values
    ),
    max_size=12,
)


@given(raw=raw_events, where=st.floats(0, 1))
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_any_session_cut_anywhere_opens_with_a_prefix(tmp_path: Path, raw: list[Any], where: float) -> None:
    events: list[dict[str, Any]] = []
    for kind, text, value in raw:
        if kind == "blob":
            events.append(blob(text * 30))  # few distinct contents: exercises dedup
        elif kind == "turn":
            events.append({"k": "turn", "turn": sum(e["k"] == "turn" for e in events), "trace": {"v": value}})
        else:
            events.append({"k": kind, "v": value})
    p = tmp_path / "h.cpsession"
    p.unlink(missing_ok=True)
    record(p, events)
    data = p.read_bytes()
    header_end = frame_spans(data)[0][1]
    cut = header_end + int(where * (len(data) - header_end))
    p.write_bytes(data[:cut])
    with RecordingReader.open(p) as r:
        got = list(r.events())
        assert got == unique(events)[: len(got)]
        assert r.turn_count == sum(e["k"] == "turn" for e in got)
        assert (r.damage is None) == (cut == len(data) or any(e == cut for _, e in frame_spans(data)[:-3]))
        for e in got:
            if e["k"] == "blob":
                assert r.blob(e["h"]) == e["data"]


def _corrupt_everywhere_is_reported(data: bytes, path: Path) -> None:
    for i in range(len(data)):
        path.write_bytes(data[:i] + bytes([data[i] ^ 0x5A]) + data[i + 1 :])
        try:
            with RecordingReader.open(path) as r:
                hashes = [e["h"] for e in r.events() if e["k"] == "blob"]
                for n in range(r.turn_count):
                    r.turn(n)
                for h in hashes:
                    r.blob(h)
                assert r.damage is not None, f"flip at {i} went unnoticed"
        except RecordingError as exc:
            assert "offset" in str(exc) or "not a cpsession" in str(exc)


@pytest.mark.parametrize("closed", [True, False])
def test_any_flipped_byte_is_an_error_or_damage(tmp_path: Path, closed: bool) -> None:
    src = tmp_path / "s.cpsession"
    w = record(src, session_events(2, size=3), close=closed)
    if not closed:
        os.close(w._fd)  # type: ignore[arg-type]
        w._fd = None  # or its finalizer closes the number again, which another file may hold by then
    _corrupt_everywhere_is_reported(src.read_bytes(), tmp_path / "bad.cpsession")


def test_corrupt_frame_error_names_offset_and_salvage(tmp_path: Path) -> None:
    p = tmp_path / "s.cpsession"
    w = record(p, session_events(5), close=False)
    os.close(w._fd)  # type: ignore[arg-type]
    w._fd = None  # or its finalizer closes the number again, which another file may hold by then
    data = bytearray(p.read_bytes())
    spans = frame_spans(bytes(data))
    start, end = spans[9]  # a frame in the middle of the file
    data[start : start + 4] = (end - start + 3).to_bytes(4, "big")  # length now overruns into the next frame
    p.write_bytes(bytes(data))
    with pytest.raises(RecordingError, match=f"corrupt frame.*at offset {start}.*salvage=True") as info:
        RecordingReader.open(p)
    assert info.value.offset == start
    r = RecordingReader.open(p, salvage=True)
    assert r.damage is not None and r.damage.offset == start and r.damage.lost_bytes == len(data) - start
    assert r.turn_count == 2 and len(list(r.events())) == 8

    # A flipped payload byte in a file with an index: found when that turn is read.
    p2 = tmp_path / "t.cpsession"
    record(p2, session_events(5))
    data = bytearray(p2.read_bytes())
    tstart, tend = frame_spans(bytes(data))[7]  # turn 1: header, 4 frames of turn 0, 3 of turn 1 (dedup)
    data[tend - 3] ^= 0xFF
    p2.write_bytes(bytes(data))
    r2 = RecordingReader.open(p2)
    assert r2.turn(0)["turn"] == 0
    with pytest.raises(RecordingError, match=f"turn 1 unreadable.*checksum.*at offset {tstart}"):
        r2.turn(1)
    with pytest.raises(RecordingError, match=f"offset {tstart}"):
        list(r2.events())


@given(junk=st.binary(min_size=1, max_size=64))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_garbage_appended_or_inserted(tmp_path: Path, junk: bytes) -> None:
    p = tmp_path / "g.cpsession"
    p.unlink(missing_ok=True)
    w = record(p, session_events(2), close=False)
    os.close(w._fd)  # type: ignore[arg-type]
    w._fd = None  # or its finalizer closes the number again, which another file may hold by then
    data = p.read_bytes()
    mid = frame_spans(data)[3][0]
    p.write_bytes(data[:mid] + junk + data[mid:])
    with pytest.raises(RecordingError, match="offset"):
        with RecordingReader.open(p) as r:
            list(r.events())


def test_junk_whose_length_runs_past_the_end_is_not_taken_for_a_cut_write(tmp_path: Path) -> None:
    """Hypothesis found this one: junk inserted mid-file whose length prefix (533) runs past the end and
    whose payload starts a msgpack bin, not a map. It was read as the last frame cut short, so the reader
    returned the frames before it and silently dropped every frame after it."""
    p = tmp_path / "j.cpsession"
    w = record(p, session_events(2), close=False)
    os.close(w._fd)  # type: ignore[arg-type]
    w._fd = None  # or its finalizer closes the number again, which another file may hold by then
    data = p.read_bytes()
    mid = frame_spans(data)[3][0]
    p.write_bytes(data[:mid] + b"\x00\x00\x02\x15\x00\x00\x00\x00\xc5\x03" + data[mid:])
    with pytest.raises(RecordingError, match=f"not a msgpack map.*offset {mid}"):
        with RecordingReader.open(p) as r:
            list(r.events())


def test_versions_and_foreign_files(tmp_path: Path) -> None:
    for version in (FORMAT_VERSION + 1, 0):
        p = tmp_path / f"v{version}.cpsession"
        p.write_bytes(encode_frame({"k": "@header", "format": FORMAT_NAME, "version": version}))
        with pytest.raises(RecordingError, match=f"version {version}.*versions 1, {FORMAT_VERSION}"):
            RecordingReader.open(p)
        with pytest.raises(RecordingError, match=f"version {version}"):
            RecordingWriter.resume(p)
    p = tmp_path / "x.jsonl"
    p.write_text(json.dumps({"k": "turn"}) + "\n")
    with pytest.raises(RecordingError, match="not a cpsession recording"):
        RecordingReader.open(p)
    p.write_bytes(encode_frame({"k": "hello", "proto": 1}))  # a probe frame, not a recording
    with pytest.raises(RecordingError, match="not a cpsession recording"):
        RecordingReader.open(p)
    p.write_bytes(b"")
    with pytest.raises(RecordingError, match="empty"):
        RecordingReader.open(p)
    with pytest.raises(RecordingError, match="cannot open"):
        RecordingReader.open(tmp_path / "missing.cpsession")


def test_refresh_follows_a_growing_file(tmp_path: Path) -> None:
    src = tmp_path / "src.cpsession"
    events = session_events(5)
    record(src, events)
    data = src.read_bytes()
    spans = frame_spans(data)
    data_end = spans[len(unique(events))][1]
    live = tmp_path / "live.cpsession"
    live.write_bytes(data[: spans[0][1]])  # another process has written the header so far
    r = RecordingReader.open(live)
    assert r.turn_count == 0 and r.refresh() == [] and not r.finished
    got: list[dict[str, Any]] = []
    with open(live, "ab") as f:
        for i in range(spans[0][1], len(data), 37):  # chunks that cut frames anywhere
            f.write(data[i : i + 37])
            f.flush()
            got += r.refresh()
            cut = min(i + 37, len(data))
            mid_frame = not any(e == cut for _, e in spans)
            assert (r.damage is not None) == (mid_frame or data_end < cut < len(data)), cut
            assert got == unique(events)[: len(got)]
    assert got == unique(events) and r.finished and r.turn_count == 5 and r.turn(-1)["turn"] == 4
    assert r.refresh() == []
    w = RecordingWriter.resume(live)  # the agent restarts: the footer is cut off, new frames follow
    w.append({"k": "turn", "turn": 5})
    w.flush()
    assert r.refresh() == [{"k": "turn", "turn": 5}] and not r.finished
    w.close()
    assert r.refresh() == [] and r.finished
    assert RecordingReader.open(live).turn_numbers() == [0, 1, 2, 3, 4, 5]


WRITER = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, sys.argv[2])
    from engine.hashing import sha256_hex
    from engine.recording.cpsession import RecordingWriter
    w = RecordingWriter(sys.argv[1], {"model": "m", "provider": "p"}, version=1)
    t = 0
    while True:
        data = (str(t) * 50_000)[:200_000]  # large frames, so the kill often lands mid-write
        w.append({"k": "blob", "h": sha256_hex(data), "data": data})
        w.append({"k": "turn", "turn": t, "trace": {"turn": t}})
        print(t, flush=True)
        t += 1
    """
)


def test_sigkilled_writer_leaves_an_openable_file(tmp_path: Path) -> None:
    p = tmp_path / "killed.cpsession"
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(p), str(ROOT)], stdout=subprocess.PIPE, text=True, bufsize=1
    )
    assert proc.stdout is not None
    last = -1
    deadline = time.monotonic() + 60  # the child's start-up and 40 turns: seconds on a loaded machine
    while last < 40 and time.monotonic() < deadline:
        last = int(proc.stdout.readline())
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert last >= 40
    r = RecordingReader.open(p)
    assert not r.finished
    assert r.turn_count >= last + 1  # every turn the writer reported complete is there
    assert r.turn_numbers() == list(range(r.turn_count))
    assert r.turn(-1)["trace"] == {"turn": r.turn_count - 1}
    if r.damage is not None:
        assert r.damage.offset + r.damage.lost_bytes == p.stat().st_size
    assert sum(1 for e in r.events() if e["k"] == "turn") == r.turn_count
    with RecordingWriter.resume(p) as w:  # the agent restarts and carries on recording
        w.append({"k": "turn", "turn": r.turn_count, "trace": {}})
    assert RecordingReader.open(p).turn_count == r.turn_count + 1


def test_open_10k_turns_reads_a_small_part_of_the_file(tmp_path: Path) -> None:
    p = tmp_path / "big.cpsession"
    filler = "y" * 1500
    with RecordingWriter(p, HEADER, version=1) as w:
        for t in range(10_000):
            w.append({"k": "blob", "h": f"{t:064x}", "data": filler})
            w.append({"k": "turn", "turn": t, "trace": trace(t)})
    size = p.stat().st_size
    r = RecordingReader.open(p)
    last = r.turn(-1)
    assert last["turn"] == 9999 and r.turn_count == 10_000
    assert r.bytes_read < 0.01 * size  # trailer + turn index + one frame
    before = r.bytes_read
    assert r.turn(5000)["turn"] == 5000
    assert r.bytes_read - before < 200  # a step reads one frame
    r.close()

    # Without the footer (agent killed) the index is rebuilt from frame headers and short prefixes.
    with open(p, "r+b") as f:
        f.truncate(size - TRAILER_SIZE)
    r = RecordingReader.open(p)
    assert r.damage is not None and "index footer" in r.damage.message
    assert r.turn_count == 10_000 and r.turn(-1)["turn"] == 9999
    assert r.bytes_read < 0.2 * size
    assert r.blob(f"{42:064x}") == filler
