"""`cp-inspect replay FILE` of a recording its writer has not closed (an agent still running, or killed
between two turns): the turns so far were shown and nothing was said, so a person watching a live agent's
file saw it stand still. A toast says the file is not closed and how to follow it; a closed recording, and
one opened with --follow, say nothing of it."""

from __future__ import annotations

from pathlib import Path

from engine.recording.cpsession import RecordingReader
from inspector.app import InspectorApp
from inspector.sources.file import FileSource
from tests.tui.conftest import settle

DEMO = Path(__file__).resolve().parents[2] / "demo_sessions" / "scout-anthropic.cpsession"


def _unclosed(tmp_path: Path) -> Path:
    with RecordingReader.open(DEMO) as reader:
        end = reader.data_end  # (where the footer starts: the file as its writer leaves it between turns)
    path = tmp_path / "unclosed.cpsession"
    path.write_bytes(DEMO.read_bytes()[:end])
    return path


async def _told(source: FileSource) -> list[str]:
    app = InspectorApp(source, theme="cp-dark")
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        if source.follow_file:  # (a followed file is never done: its reader waits for more)
            while len(app.timeline) < 40:
                await pilot.pause(0.05)
        else:
            await settle(pilot)
        assert len(app.timeline) == 40
        return [n.message for n in app._notifications]


async def test_a_recording_not_closed_says_so_and_how_to_follow_it(tmp_path: Path) -> None:
    path = _unclosed(tmp_path)
    told = await _told(FileSource(path))
    assert told == [
        f"{path} is not closed: its writer may still be adding turns (cp-inspect replay --follow {path} shows "
        "them as they come), or stopped after the turns shown"
    ], told


async def test_closed_or_followed_recordings_do_not(tmp_path: Path) -> None:
    assert await _told(FileSource(DEMO)) == []
    assert await _told(FileSource(_unclosed(tmp_path), follow=True)) == []
