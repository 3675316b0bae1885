"""A what-if over a recording damaged at the shown turn says why it has no answer, in the panel where the
answer goes (the re-plan's worker failed silently: the panel kept its hint and said nothing)."""

from __future__ import annotations

from pathlib import Path

from textual.pilot import Pilot
from textual.widgets import Static

from engine.recording.cpsession import RecordingReader, RecordingWriter
from engine.recording.journal import unpack_event
from inspector.app import InspectorApp
from inspector.sources.file import FileSource
from panels.slider import Slider
from tests.support.recordings import record_coding_session


def _damaged(tmp_path: Path) -> Path:
    """A recording whose tool schema's description is a number: it folds for the screen, but a re-plan
    of any turn cannot build the request (fuzz43's finding: a bare TypeError, now a ReplayError)."""
    good = tmp_path / "good.cpsession"
    record_coding_session(good, 4, arguments=lambda t: {"cmd": f"ls {t}"}, output=lambda t: f"file{t}.py")
    with RecordingReader.open(good) as r:
        events = [unpack_event(e) for e in r.events()]
        header = dict(r.header)
    (tool,) = [e for e in events if e.get("k") == "tool"]
    tool["description"] = 5
    bad = tmp_path / "bad.cpsession"
    with RecordingWriter(bad, header) as w:
        for e in events:
            w.append(e)
    return bad


async def _shown(pilot: Pilot, app: InspectorApp, wanted: str) -> str:
    """The What-if's answer once it says `wanted` (up to 10 s). Not `settle`: the content worker fails on
    this recording as well (the app says so in a notification), and settle raises a failed worker."""
    for _ in range(200):
        text = str(app.query_one("#whatif-result", Static).render())
        if wanted in text:
            break
        await pilot.pause(0.05)
    return text


async def test_a_what_if_the_recording_cannot_re_plan_says_so(tmp_path: Path) -> None:
    app = InspectorApp(FileSource(_damaged(tmp_path)), theme="cp-dark")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.5)
        await pilot.press("end", "w")
        await pilot.pause(0.2)
        app.query_one("#budget", Slider).focus()
        await pilot.press("shift+left")
        text = await _shown(pilot, app, "cannot re-plan")
        assert "cannot re-plan this turn: ReplayError: turn 3" in text, text
        assert "damaged" in text
