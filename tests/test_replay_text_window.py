"""A replay of a long recording holds a window of its texts, not all of them (engine/recording/text_window.py,
the replay fold's history on disk, HistoryLog.park/unpark).

`cp-inspect replay` kept every text it had read: the journal's blob events, the fold's store of them and
its conversation (every message, in every checkpoint's list). A 1 GB recording grew the process to
~1.3 GB. What the tests hold, on a recording generated here through the real engine: stepping from the
first turn to the last and jumping back holds a bounded part of the session's texts (tracemalloc; the
old code held them all), every request rebuilt is byte for byte what a replay holding everything
builds, and a text read again after it left the window is the same text the recording holds."""

from __future__ import annotations

import copy
import gc
import hashlib
import json
import random
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from engine.artifacts import Message, Text
from engine.pipeline import Pipeline
from engine.recording.cpsession import RecordingReader
from engine.recording.history_log import HistoryLog
from engine.recording.replay import Replayer
from engine.recording.text_window import LazyBlob, TextWindow
from engine.recording.why import ActualBodies
from inspector.sources.file import FileSource
from inspector.sources.replaying import shared_counter

TURNS = 200
OUTPUT_CHARS = 24_000  # per turn, under the spill threshold: ~4.8 MB of distinct text in the session


def _make(path: Path) -> int:
    """A coding-agent loop through the real engine (the default tokenizer, which a replay uses), each
    tool output distinct words; the window compacts every few turns. The session's text in bytes."""
    rnd = random.Random(7)
    words = [
        "".join(rnd.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rnd.randint(3, 8)))
        for _ in range(4000)
    ]
    pipe = Pipeline(
        "claude-sonnet-4", "anthropic", 16_000, record=path, serve=False, clock=lambda: 1_767_225_600.0
    )
    pipe.identity("You are a synthetic agent.")
    pipe.add_tool("read", "read a file", {"type": "object", "properties": {"path": {"type": "string"}}})
    pipe.user("Read every file.")
    total = 0
    for t in range(TURNS):
        req = pipe.next_request()
        pipe.record_usage({"input_tokens": req.trace["final_tokens"], "output_tokens": 40})
        calls = pipe.assistant(
            f"step {t}", [{"id": f"c{t}", "name": "read", "arguments": json.dumps({"path": f"f{t}"})}]
        )
        body = f"file f{t}:\n" + " ".join(rnd.choices(words, k=OUTPUT_CHARS // 6))
        total += len(body)
        pipe.tool_result(calls[0].id, body)
    pipe.close()
    return total


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    path = tmp_path_factory.mktemp("text_window") / "long.cpsession"
    return path, _make(path)


@pytest.fixture(scope="module")
def expected(recording: tuple[Path, int]) -> dict[int, bytes]:
    """Every turn's request as a replay holding the whole journal and conversation in memory builds it."""
    with RecordingReader.open(recording[0]) as r:
        rp = Replayer(list(r.events()), shared_counter())
    return {t: rp.replan(t).serialized.body for t in range(rp.turns)}


class SmallWindow(FileSource):
    TEXT_BUDGET = 64 << 10
    HISTORY_CHUNK = 8
    READ_AHEAD = 16  # the default reads the whole of a 200-turn file at the first step


def _walk(src: FileSource, turns: list[int]) -> dict[int, str]:
    return {t: src._built(t).serialized.request_sha256 for t in turns}


def _decoded_held() -> int:
    """Bytes still held of what the recording reader decoded (texts, events, traces): the serializer's
    caches of request fragments, bounded by item count and made elsewhere, are not counted."""
    gc.collect()
    snap = tracemalloc.take_snapshot().filter_traces(
        [tracemalloc.Filter(True, "*/engine/recording/frames.py")]
    )
    return sum(stat.size for stat in snap.statistics("filename"))


def test_stepping_to_the_end_and_back_holds_a_window_of_the_texts(
    recording: tuple[Path, int], expected: dict[int, bytes]
) -> None:
    path, text_bytes = recording
    src = SmallWindow(path)
    half = TURNS // 2
    gc.collect()
    tracemalloc.start()
    try:
        got = _walk(src, list(range(half)))
        at_half = _decoded_held()
        got |= _walk(src, list(range(half, TURNS)))
        at_end = _decoded_held()
        back = [TURNS // 3, 1, TURNS - 1, half, 5]
        again = _walk(src, back)
        after = _decoded_held()
    finally:
        tracemalloc.stop()
    want = {t: hashlib.sha256(b).hexdigest() for t, b in expected.items()}
    assert got == want and again == {t: want[t] for t in back}
    # The second half of the session adds half its text (~2.4 MB): the old code kept all of it (and every
    # text before); what grows now is the events without their texts (~4 KB a turn), and the live window
    # of the conversation, the window's budget and the recent traces stay as they were.
    # (The code before: +3.3 MB over the second half, 7.9 MB at the end; now +1.4 MB and 3.7 MB.)
    grown = at_end - at_half
    assert grown < 0.75 * text_bytes / 2, (
        f"held {grown:,} bytes more after the second half ({text_bytes // 2:,} of text)"
    )
    assert at_end < 0.9 * text_bytes, f"held {at_end:,} bytes at the end ({text_bytes:,} of text)"
    assert after - at_end < 0.75 * text_bytes / 2, f"jumping back held {after - at_end:,} bytes more"
    assert src.texts.held <= SmallWindow.TEXT_BUDGET
    assert src.texts.reads > 0  # texts left the window and were read from the file again


def test_texts_read_again_after_they_left_the_window_are_the_recorded_ones(
    recording: tuple[Path, int],
) -> None:
    path, _ = recording
    with RecordingReader.open(path) as r:
        recorded = {ev["h"]: ev["data"] for ev in r.events() if ev.get("k") == "blob"}
    src = FileSource(path)
    src._load_events()
    window = TextWindow(path, budget=0)  # keeps nothing: every text is read from the file
    lazy = [window.blob_event(ev["h"], ev._at) for ev in src.events if isinstance(ev, LazyBlob)]
    assert len(lazy) == len(recorded)
    for ev in lazy + lazy[::-1]:
        assert "data" not in ev
        assert ev["data"] == ev.get("data") == recorded[ev["h"]]
    assert window.reads == 4 * len(lazy) and window.held == 0
    window.close()


def test_saving_a_replay_writes_the_texts_kept_in_the_file(
    recording: tuple[Path, int], tmp_path: Path
) -> None:
    path, _ = recording
    src = SmallWindow(path)
    out = tmp_path / "copy.cpsession"
    assert src.save(out) == TURNS
    with RecordingReader.open(path) as a, RecordingReader.open(out) as b:
        assert list(a.events()) == list(b.events())


def test_gathering_the_sent_requests_reads_no_text_they_do_not_name(recording: tuple[Path, int]) -> None:
    path, _ = recording
    src = SmallWindow(path)
    src._load_events()
    reads = src.texts.reads
    sent = ActualBodies()
    for ev in src.events:
        sent.feed(ev)
    assert sent.out == {} and src.texts.reads == reads  # an engine's own session: no `actual` events
    why = src.why_missed(TURNS - 1)
    assert why["engine"] is not None and why["as_sent"] is None
    assert src.request_body(TURNS - 1).startswith("{")


def _msgs(n: int, start: int = 0) -> list[Message]:
    return [
        Message("user" if i % 2 else "assistant", (Text(f"message {i} " + "x" * (i % 7)),))
        for i in range(start, start + n)
    ]


def test_a_parked_history_copy_shares_its_disk_part_and_reads_like_the_list() -> None:
    log = HistoryLog(4)
    model = _msgs(30)
    for m in model[:20]:
        log.append(m)
    assert log.release(2, 14) and log.on_disk() == 12
    snap = copy.deepcopy(log)
    assert snap.in_memory() == 8  # the released part is shared on disk, not read back into the copy
    assert snap.park() and snap.in_memory() == 2 and list(snap) == model[:20]
    for m in model[20:]:
        log.append(m)
    assert log.release(2, 26) and list(log) == model  # the original appends to the shared file after the park
    restored = copy.deepcopy(snap)
    restored.unpark(10)
    assert restored.in_memory() == 2 + 10 and list(restored) == model[:20]
    for m in model[20:]:
        restored.append(m)
    assert restored.release(2, 28) and list(restored) == model and restored[11] == model[11]
    assert list(snap) == model[:20] and list(log) == model


def _turn_bytes(rp: Replayer, turns: list[int]) -> list[bytes]:
    return [rp.replan(t).serialized.body for t in turns]


def test_a_replayer_with_its_history_on_disk_builds_the_same_requests(
    expected: dict[int, bytes], recording: Any
) -> None:
    with RecordingReader.open(recording[0]) as r:
        events = list(r.events())
    rp = Replayer(events, shared_counter(), history_chunk=4)
    order = list(range(TURNS)) + [3, TURNS - 1, 64, 0, 65]
    assert _turn_bytes(rp, order) == [expected[t] for t in order]
    cursor = rp._cursor
    assert cursor is not None and cursor[1].history.on_disk() > 0


def test_a_closed_source_reads_no_text_again(recording: tuple[Path, int]) -> None:
    from engine.recording.cpsession import RecordingError

    src = SmallWindow(recording[0])
    src._load_events()
    lazy = [ev for ev in src.events if isinstance(ev, LazyBlob)]
    assert lazy[-1]["data"]  # the window's reader is open now
    src.close()
    # A worker still folding as the app exits fails on the closed window: no descriptor is opened again.
    with pytest.raises(RecordingError, match="closed"):
        lazy[0]["data"]
    assert src.texts._reader is None


def test_stepping_forward_reads_no_message_back_from_disk(
    recording: tuple[Path, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only the copies the cursor hands out build, so the cursor's running token count of the
    conversation stayed at 0 and every build counted the whole history again: read back from disk once
    it was released, a step cost more the further into the file it was."""
    src = SmallWindow(recording[0])
    for t in range(TURNS // 2):
        src._built(t)
    reads: list[int] = []
    original = HistoryLog._read_range

    def counting(self: HistoryLog, a: int, b: int) -> list[Message]:
        reads.append(b - a)
        return original(self, a, b)

    monkeypatch.setattr(HistoryLog, "_read_range", counting)
    for t in range(TURNS // 2, TURNS):
        src._built(t)
    cursor = src._replayer._cursor if src._replayer is not None else None
    assert cursor is not None and cursor[1].history.on_disk() > 0
    assert sum(reads) == 0, f"{len(reads)} reads of {sum(reads)} messages from disk"
