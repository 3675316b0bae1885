"""`replay --follow` keeps a growing recording's texts in the file, as a replay of a finished one does
(engine/recording/text_window.py).

A followed file's events were kept whole (every text the session wrote, in memory: the window's reader
saw the file as it was when opened), so following a long session held all of it. Now its blobs and
turns are held as LazyBlob/LazyTurn by their frame's offset and the window's reader reads on past where
it was opened. What the tests hold, on a session written by the real engine while the source follows
it: no text is held outside the window, the window stays within its budget, and every turn, those
written after the source opened included, rebuilds the recorded request."""

from __future__ import annotations

import json
from pathlib import Path

from engine.pipeline import Pipeline
from engine.recording.cpsession import RecordingReader
from engine.recording.text_window import LazyBlob, LazyTurn
from inspector.sources.file import FileSource


class SmallWindow(FileSource):
    TEXT_BUDGET = 16 << 10
    HISTORY_CHUNK = 8
    READ_AHEAD = 8


def _turns(pipe: Pipeline, first: int, n: int) -> None:
    for t in range(first, first + n):
        req = pipe.next_request()
        pipe.record_usage({"input_tokens": req.trace["final_tokens"], "output_tokens": 40})
        calls = pipe.assistant(
            f"step {t}", [{"id": f"c{t}", "name": "read", "arguments": json.dumps({"path": f"f{t}"})}]
        )
        pipe.tool_result(calls[0].id, f"file f{t}: " + f"line {t} of a long output\n" * (40 + t % 30))


def test_a_followed_recording_keeps_its_texts_in_the_file(tmp_path: Path) -> None:
    path = tmp_path / "live.cpsession"
    pipe = Pipeline(
        "claude-sonnet-4", "anthropic", 8_000, record=path, serve=False, clock=lambda: 1_767_225_600.0
    )
    pipe.identity("You are a synthetic agent.")
    pipe.add_tool("read", "read a file", {"type": "object", "properties": {"path": {"type": "string"}}})
    pipe.user("Read every file.")
    _turns(pipe, 0, 30)
    src = SmallWindow(path, follow=True)
    try:
        first = src.reader.turn_numbers()
        assert first and src._built(first[-1])  # read up to where the file was when opened
        new_turns: list[int] = []
        for batch in range(3):  # the agent goes on; the source reads on as follow() does on each change
            _turns(pipe, 30 + 20 * batch, 20)
            new_turns += [ev["turn"] for ev in src._read_on() if ev.get("k") == "turn"]
            src._load_events()
        pipe.close()
        new_turns += [ev["turn"] for ev in src._read_on() if ev.get("k") == "turn"]
        with RecordingReader.open(path) as r:
            recorded = {t: r.turn(t)["trace"]["request_sha256"] for t in r.turn_numbers()}
        assert new_turns and max(new_turns) == max(recorded)
        src._load_events()
        whole = [ev for ev in src.events if ev.get("k") == "blob" and not isinstance(ev, LazyBlob)]
        texts = sum(len(ev["data"]) for ev in whole)
        assert not whole, f"{len(whole)} blob events held whole ({texts:,} characters of text)"
        assert all(isinstance(ev, LazyTurn) for ev in src.events if ev.get("k") == "turn")
        for t in sorted(recorded):  # stepping through all of it, the turns written since opening too
            assert src._built(t).serialized.request_sha256 == recorded[t], t
        assert src.texts.held <= SmallWindow.TEXT_BUDGET
        for t in (3, max(recorded) - 1, 31, 75):  # and back
            assert src._built(t).serialized.request_sha256 == recorded[t], t
    finally:
        src.close()
