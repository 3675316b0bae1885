"""A far fold stops when its worker is replaced (issue 15.2). Opening a recording shows its last turn,
and on a 12,000-turn recording folding there took ~2 s of CPU; a person who stepped elsewhere at once
(Home, `g`) had that fold run on beside the turn they went to and its what-ifs: re-plans that cost ~5 ms
alone took 110 ms of process CPU (p95) in `bench_tui.py --only g` on that recording. FileSource folds a
far jump a checkpoint span at a time; between spans it now stops if its worker was cancelled, keeping
what it folded. On a recording made here through the real engine."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

import inspector.sources.file as file_source
from engine.recording.replay import CHECKPOINT_EVERY
from inspector.app import InspectorApp
from inspector.sources import FoldCancelled
from inspector.sources.file import FileSource
from panels.content_viewer import ContentViewer
from tests.support.recordings import record_reading_session
from tests.tui.conftest import settle

TURNS = 3 * CHECKPOINT_EVERY + 20


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return record_reading_session(tmp_path_factory.mktemp("fold") / "run.cpsession", TURNS, seed=3)


def test_a_cancelled_worker_stops_a_far_fold_and_a_later_one_resumes_it(
    recording: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cancelled = threading.Event()
    monkeypatch.setattr(file_source, "cancelled_event", lambda: cancelled)  # the worker's own flag
    last = TURNS - 1
    expected = FileSource(recording).section_content(last, "history")  # folded straight through

    src = FileSource(recording)
    before = src._loaded_turn
    cancelled.set()  # a step replaced the worker as it began
    with pytest.raises(FoldCancelled, match=f"toward turn {last}"):
        src.section_content(last, "history")
    assert src._loaded_turn == before  # nothing read past where it stood: the fold stopped at once

    cancelled.clear()  # the next worker (the person came back): the same turn, as a straight fold builds it
    assert src.section_content(last, "history") == expected


async def test_stepping_away_from_the_opening_turn_shows_the_new_turn_without_an_error(
    recording: Path,
) -> None:
    # The replaced worker's FoldCancelled is not a failure to show content: no "cannot show this content".
    app = InspectorApp(FileSource(recording))
    errors: list[str] = []
    async with app.run_test(size=(120, 40)) as pilot:
        app.notify = lambda message, **kw: errors.append(str(message))  # type: ignore[method-assign]
        await pilot.press("home")
        await settle(pilot)
        for _ in range(200):
            if "turn 0 " in app.query_one(ContentViewer).title + " ":
                break
            await pilot.pause(0.05)
        assert "turn 0" in app.query_one(ContentViewer).title
    assert not [e for e in errors if "Cancelled" in e], errors
