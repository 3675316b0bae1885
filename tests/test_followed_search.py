"""The content search's stream of a followed recording (inspector/followed_search.py, RecordingStream):
each request decided, not built, counts what the build sends, turn by turn, on recordings that compact,
spill and summarize; a follower indexes the file's turns in its own thread as it reads them, so the first
`/` finds them counted and decides none. Real agents (Pipelines serving their probe), real files."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from inspector.content_search import ContentScan, SentStream, stream_for
from inspector.followed_search import RecordingStream
from inspector.sources.live_recording import RecordingFollower, open_live
from tests.support.probe_agent import T, one_turn, serving_pipeline

ROOT = Path(__file__).resolve().parents[1]
DEMOS = sorted((ROOT / "demo_sessions").glob("*.cpsession"))


def _compacting(path: Path) -> Path:
    """A session that goes over a small window: its history cut, long results spilled, on a file."""
    from engine.pipeline import Pipeline

    pipe = Pipeline("claude-sonnet-4", "anthropic", 6_000, record=str(path))
    pipe.identity("You are a careful coding agent.")
    pipe.user("Fix the failing test.")
    for t in range(60):
        req = pipe.next_request()
        pipe.record_usage({"input_tokens": req.trace["final_tokens"], "output_tokens": 10})
        calls = pipe.assistant(f"step {t}", [{"id": f"c{t}", "name": "bash", "arguments": "{}"}])
        body = "a long build log line\n" * (400 if t % 9 == 4 else 6)
        pipe.tool_result(calls[0].id, f"output of step {t} MARK-{t % 5}\n" + body)
    pipe.close()
    return path


@pytest.mark.parametrize("which", [*(p.stem for p in DEMOS), "compacting"])
def test_each_turn_decided_sends_what_its_build_sends(which: str, tmp_path: Path) -> None:
    path = (
        _compacting(tmp_path / "c.cpsession")
        if which == "compacting"
        else ROOT / "demo_sessions" / f"{which}.cpsession"
    )
    built, decided = SentStream(path), RecordingStream(None, path)
    from engine.recording.cpsession import RecordingReader

    with RecordingReader.open(path) as r:
        turns = r.turn_numbers()
    try:
        for t in turns:
            want = {sid: built.section_text(t, sid) for sid, run, n in built.sections_of(t) or () if n}
            got_sections = decided.sections_of(t)
            assert got_sections is not None
            got = {sid: decided.section_text(t, sid) for sid, run, n in got_sections if n}
            assert got == want, f"turn {t}"
        for query in ("mark-3", "step 1", "build log", "careful", "omitted"):
            a = ContentScan(query, None, SentStream(path))  # type: ignore[arg-type]
            b = ContentScan(query, None, RecordingStream(None, path))  # type: ignore[arg-type]
            for s in (a, b):
                s.scan_to(turns, lambda: False)
            assert a.changes == b.changes and a.counts == b.counts, query
            a.close()
            b.close()
    finally:
        built.close()
        decided.close()


def test_a_follower_indexes_its_turns_as_it_reads_them(monkeypatch: pytest.MonkeyPatch, rtdir: Path) -> None:
    """Attached as `attach` attaches to an agent that records: the turns in the file, and those that come,
    are indexed in the follower's thread; the first `/` decides none of them again."""
    path = rtdir.parent / "agent.cpsession"
    pipe = serving_pipeline(monkeypatch, rtdir, record=str(path))
    for t in range(30):
        one_turn(pipe, t, f"output of step {t}" + (" NEEDLE" if t in (5, 9) else ""))
    src, why = open_live(os.getpid(), timeout=T, backfill_idle=None)
    assert why is None and isinstance(src, RecordingFollower)
    index = src.search_index
    assert isinstance(index, RecordingStream) and not index.turns  # (nothing read on attach)
    stop = threading.Event()
    chunks = list(src.load_chunks())
    reader = threading.Thread(target=lambda: [None for _ in src.follow() if not stop.is_set()], daemon=True)
    reader.start()
    try:

        def indexed(n: int) -> None:
            give_up = time.monotonic() + T
            while sorted(index.turns) != list(range(n)):
                assert time.monotonic() < give_up, sorted(index.turns)
                time.sleep(0.02)

        indexed(30)
        past = index.past
        scan = ContentScan("needle", src)
        scan.open_for(src)
        assert scan.stream is index is stream_for(src)
        turns = [t["turn"] for c in chunks for t in c.traces]
        scan.scan_to(turns, lambda: False)
        assert [(c.turn, c.kind, c.count) for c in scan.changes] == [(6, "enters", 1), (10, "enters", 2)]
        assert index.past == past, "the first search decided turns the follower had indexed"
        scan.close()  # (Esc: the stream is the source's, kept)
        for t in range(30, 36):
            one_turn(pipe, t, f"output of step {t}" + (" LATE-TEXT" if t == 33 else ""))
        pipe.next_request()  # (turn 36 sends turn 33's result: its request closes turn 35 in the file)
        indexed(36)
        again = ContentScan("late-text", src)
        again.open_for(src)
        again.scan_to(list(range(36)), lambda: False)
        assert [(c.turn, c.kind) for c in again.changes] == [(34, "enters")]
    finally:
        stop.set()
        src.close()
        pipe.close()
        reader.join(T)


def test_the_stream_goes_on_as_the_file_grows(tmp_path: Path) -> None:
    from engine.pipeline import Pipeline

    path = tmp_path / "grows.cpsession"
    pipe = Pipeline("claude-sonnet-4", "anthropic", 16_000, record=str(path))
    pipe.identity("You are a careful coding agent.")
    pipe.user("Fix the failing test.")

    def turn(t: int) -> None:
        req: Any = pipe.next_request()
        pipe.record_usage({"input_tokens": req.trace["final_tokens"], "output_tokens": 10})
        calls = pipe.assistant(f"step {t}", [{"id": f"c{t}", "name": "bash", "arguments": "{}"}])
        pipe.tool_result(calls[0].id, f"output of step {t}")

    for t in range(5):
        turn(t)
    stream = RecordingStream(None, path)
    assert stream.index_ahead() == 5 and stream.ended
    for t in range(5, 8):
        turn(t)
    assert stream.index_ahead() == 3 and sorted(stream.turns) == list(range(8))
    assert stream.section_text(7, "history") is not None and "output of step 6" in str(
        stream.section_text(7, "history")
    )
    pipe.close()
    stream.close()


def test_replay_follow_searches_the_file_through_the_same_stream(tmp_path: Path) -> None:
    """`replay --follow FILE` (a FileSource following a file, no agent): its scans take a RecordingStream
    of their own (content_search.stream_for), closed with the scan, and find what a closed file's do."""
    from inspector.sources.file import FileSource

    path = _compacting(tmp_path / "c.cpsession")
    src = FileSource(path, follow=True)
    turns = [t["turn"] for c in src.load_chunks() for t in c.traces]
    scan = ContentScan("mark-3", src)
    scan.open_for(src)
    assert isinstance(scan.stream, RecordingStream) and not scan.stream.standing
    scan.scan_to(turns, lambda: False)
    want = ContentScan("mark-3", None, SentStream(path))  # type: ignore[arg-type]
    want.scan_to(turns, lambda: False)
    assert scan.changes == want.changes and scan.changes
    scan.close()
    want.close()
    src.close()
