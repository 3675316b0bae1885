"""A followed recording that goes wrong mid-session (cut, or a corrupt frame): the follower falls back to
the live stream (inspector/sources/live_recording.py; tests/test_probe_follow.py has the agent's recorder
stopping) and says so once, as a source event the app shows (the header's follow_stopped was shown
nowhere), and the content search finds the turns that came after the fall-back. Real agents (Pipelines
serving their probe), real sockets and files."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from inspector.content_search import ENTERS, ContentScan
from inspector.sources import NewTurn, Notice
from inspector.sources.live_recording import RecordingFollower, open_live
from tests.support.fold_stream import fold_pipeline, wait_until
from tests.test_probe_fold import T, _Follower, _turn


def _go_wrong(path: Path, trouble: str) -> None:
    if trouble == "truncated":
        os.truncate(path, 100)
    else:  # bytes that are no frame where the agent's next chunk was to start
        with open(path, "ab") as f:
            f.write(b"\x00not a frame\xff" * 64)
    time.sleep(0.3)  # (looked at before the agent's next write: see _file_trouble)


class _View(_Follower):
    """The probe tests' follower view, keeping the notices too."""

    def __init__(self, src: RecordingFollower) -> None:
        self.notices: list[Notice] = []
        super().__init__(src)  # type: ignore[arg-type]

    def _run(self) -> None:
        for e in self.src.follow():
            if isinstance(e, NewTurn):
                self.turns.append(e.trace)
            elif isinstance(e, Notice):
                self.notices.append(e)
            if self._stop:
                return


@contextmanager
def _followed(rtdir: Path) -> Iterator[tuple[Any, Path, RecordingFollower]]:
    """An agent (a Pipeline serving its probe) recording to a file, its first 3 turns made, and an
    inspector's source following that file as `attach` opens it; the agent closed at the end."""
    path = rtdir.parent / "s.cpsession"
    pipe = fold_pipeline(rtdir, record=str(path))
    try:
        for t in range(3):
            _turn(pipe, t)
        src, why = open_live(os.getpid(), timeout=T)
        assert why is None and isinstance(src, RecordingFollower)
        yield pipe, path, src
    finally:
        pipe.close()


@pytest.mark.parametrize("trouble", ["truncated", "corrupt"])
def test_the_fall_back_is_said_and_search_finds_the_turns_after_it(
    rtdir: Path, monkeypatch: pytest.MonkeyPatch, trouble: str
) -> None:
    """...and reads them from the search index the live source's fold feeds (content_search.arrival_index,
    RecordingFollower.reach_live), not through the source: a re-plan a turn (~6.7 ms against ~1)."""
    with _followed(rtdir) as (pipe, path, src):
        view = _View(src)
        wait_until(lambda: pipe.probe._nfollowers == 1, "no follower")
        for t in range(3, 6):
            _turn(pipe, t)
        view.wait_for(5)
        # A search made while the file was followed: its stream reads the file's journal.
        early = ContentScan("output of step", src)
        early.open_for(src)
        early.scan_to(list(range(6)), lambda: False)
        assert [c.turn for c in early.changes if c.kind == ENTERS][:1] == [1]
        assert not view.notices
        _go_wrong(path, trouble)
        for t in range(6, 10):
            _turn(pipe, t)
            time.sleep(0.02)
        pipe.close_turn()
        view.wait_for(9)
        why_stopped = src.header.get("follow_stopped")
        assert why_stopped
        wait_until(lambda: bool(view.notices), "the fall-back was not said")
        assert [n.text for n in view.notices] == [f"{why_stopped}: its turns are sent live from here on"]
        replans: list[int] = []
        real = RecordingFollower.section_content

        def replanned(self: RecordingFollower, turn: int, section_id: str) -> str:
            replans.append(turn)
            return real(self, turn, section_id)

        monkeypatch.setattr(RecordingFollower, "section_content", replanned)
        # The next query goes on with the earlier one's stream, as the app's SearchRunner.start does.
        scan = ContentScan("output of step 8", src)
        scan.take_stream(early)
        scan.scan_to(list(range(10)), lambda: False)
        assert [(c.turn, c.kind) for c in scan.changes] == [(9, ENTERS)], scan.changes
        assert scan.unreadable == 0
        # A new search after the fall-back, from nothing.
        fresh = ContentScan("output of step 7", src)
        fresh.open_for(src)
        fresh.scan_to(list(range(10)), lambda: False)
        assert [(c.turn, c.kind) for c in fresh.changes] == [(8, ENTERS)], fresh.changes
        assert fresh.unreadable == 0
        assert replans == [], "a turn after the fall-back read through a re-plan"
        view.stop()


def test_a_cut_the_reader_has_already_taken_as_the_files_size_is_still_a_cut(rtdir: Path) -> None:
    """The file cut between the follower's look at its size and its next read: the read takes the new
    size as the file's (nothing new in it), so the size no longer looked shorter than what was seen and
    the follower never fell back (the agent's next write leaves a hole where the turns were; a search
    read zeros). Measured against where the events read end, the cut is seen at the next look."""
    with _followed(rtdir) as (pipe, path, src):
        assert [v["turn"] for v in src.load_initial()] == [0, 1, 2]
        os.truncate(path, 100)
        assert src.reader.refresh() == [] and src.reader.seen_size == 100  # (the race's outcome)
        seen: list[Any] = []
        events = src.follow()
        reader = threading.Thread(target=lambda: seen.extend(events), daemon=True)
        reader.start()
        wait_until(lambda: any(isinstance(e, Notice) for e in seen), "the cut was not seen: no fall-back")
        assert src.header["follow_stopped"] == "the recording was cut to 100 bytes while it was followed"
        _turn(pipe, 3)
        pipe.close_turn()
        wait_until(lambda: any(isinstance(e, NewTurn) and e.trace["turn"] == 3 for e in seen), "no turn 3")
        src.close()
        reader.join(T)
