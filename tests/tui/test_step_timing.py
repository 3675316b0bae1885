"""CONTEXTPIPE_STEP_TIMING: the running app records each key press's UI CPU and wall up to its frame."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from inspector.app import InspectorApp
from inspector.sources.synthetic import SyntheticSource
from inspector.step_timing import ENV, StepTiming
from panels.manifest import ManifestPanel
from tests.tui.conftest import settle


async def test_each_key_press_is_recorded_up_to_its_frame(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "steps.jsonl"
    monkeypatch.setenv(ENV, str(log))
    app = InspectorApp(SyntheticSource(40))
    shown: list[tuple[int, str | None]] = []
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        manifest = app.query_one("#manifest", ManifestPanel)
        for key in ("home", "right", "right", "x", "right", "left"):
            await pilot.press(key)
            await settle(pilot)
            await pilot.pause(0.1)  # slower than the content debounce: each step fetches its own content
            shown.append((app.index, manifest.selected_section()))
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    assert [r["key"] for r in lines] == ["home", "right", "right", "x", "right", "left"]
    for r, (index, section) in zip(lines, shown, strict=True):
        assert (r["w"], r["h"]) == (120, 40)
        if r["key"] == "x":  # not bound: nothing stepped; closed by the next key
            assert (r["index"], r["ended"], r["frame_cpu"]) == (-1, "next key", None)
            continue
        assert (r["index"], r["turn"], r["section"]) == (index, app.timeline.traces[index]["turn"], section)
        assert r["ended"] == ("frame" if r["prepared"] else "content")
        assert r["frames"] >= 1
        # CPU of one thread never exceeds the wall time it ran in; the frames are part of the span.
        assert 0 < r["render_cpu"] <= r["cpu"] <= r["wall"] + 1
        assert 0 < r["frame_cpu"] <= r["cpu"] and 0 < r["frame_wall"] <= r["wall"]
        assert r["gc"] >= 0 and r["queued"] >= 0
    # Home lands on a turn nobody prepared: its content comes from the worker, in a later frame. Stepping
    # on from there, the worker has prepared the next turn while the person looked: shown in the step's frame.
    assert lines[0]["prepared"] is False and lines[0]["ended"] == "content"
    assert any(r["prepared"] and r["ended"] == "frame" for r in lines[1:])


async def test_off_without_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    app = InspectorApp(SyntheticSource(10))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        await pilot.press("left")
        assert app.step_timing is None


def test_content_shown_before_the_steps_first_frame_ends_the_record_as_content() -> None:
    """On a busy machine the content worker's text can be handled before the step's frame is written:
    that frame shows the content, so the record ends as "content" (it was recorded as a bare "frame")."""
    out, queued = io.StringIO(), []
    out.close = lambda: None  # type: ignore[method-assign]
    timing = StepTiming(out, lambda: (120, 40), queued.append)
    timing.key("right", 0.0)
    timing.stepped(1, 1, "history", prepared=False, expects_content=True)
    timing.content_shown()  # before the step's own after-refresh callback ran
    for callback in queued:
        callback()
    timing.close()
    (line,) = [json.loads(x) for x in out.getvalue().splitlines()]
    assert line["ended"] == "content" and line["frame_cpu"] is not None
