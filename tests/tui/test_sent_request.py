"""The request view (`b`) of a captured session shows what the agent actually sent (sectioned, with tokens,
usage, cost and the cache break) before the engine's plan, which is labelled as a what-if. The recording
is a real tapped one: the real anthropic SDK, tapped, against the stand-in upstream, with a fixed clock so
the SVG snapshot is byte-stable."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anthropic
import pytest
from textual.pilot import Pilot

from engine.capture.tap import tap
from inspector.app import InspectorApp
from inspector.sources.file import FileSource
from panels.content_viewer import ContentViewer
from tests.capture.standin import StandIn
from tests.tui.conftest import settle

TOOLS = [{"name": "bash", "description": "Run a shell command", "input_schema": {"type": "object"}}]


def tapped_recording(directory: Path) -> Path:
    """Three real calls through a tapped client (one tool round trip each), plus one history the tap
    cannot read (a generator: counted as a tap error, the call still goes through)."""
    rec = directory / "tapped.cpsession"
    s = StandIn().start()
    try:
        client = tap(anthropic.Anthropic(api_key="k", base_url=s.url, max_retries=0), record=rec)
        client.contextpipe_tap.clock = lambda: 1_700_000_000.0  # deterministic recording
        kw: dict[str, Any] = {
            "model": "claude-sonnet-4",
            "max_tokens": 200,
            "system": "You are a careful coding agent. Keep answers short.",
            "tools": TOOLS,
        }
        msgs: list[Any] = [{"role": "user", "content": "List the files, then read README.md."}]
        for k in range(3):
            if k == 2:
                client.messages.create(messages=(m for m in msgs), **kw)  # unreadable for the tap
            r = client.messages.create(messages=msgs, **kw)
            msgs.append({"role": "assistant", "content": r.content})  # SDK content blocks, as documented
            out = "README.md\nengine\ntests\n" if k == 0 else f"# Project\nstep {k}\n"
            msgs.append(
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": out}],
                }
            )
        client.contextpipe_tap.close()
    finally:
        s.stop()
    return rec


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tapped_recording(tmp_path_factory.mktemp("tapped"))


def test_request_body_of_a_captured_turn(recording: Path) -> None:
    text = FileSource(recording).request_body(2)
    sent, _, engine = text.partition("ENGINE WOULD SEND")
    assert sent.startswith("SENT: the request the agent actually sent at turn 2 (captured)")
    for label in ("-- [0] system", "-- tool bash", "-- [1] user", "-- [2] assistant", "-- [3] tool toolu_1"):
        assert label in sent
    assert "-> tool call toolu_1 bash" in sent  # the tool_use block, from the SDK object
    # provider usage with the 5m/1h split and the cost at the 1h rate
    assert "input 4,621 (cache read 3,400 · write 1,200, 1h 200) · output 17 · cost $0.0063" in sent
    assert "max_tokens" not in sent  # the engine's parameters are not in the sent part
    assert engine and '"max_tokens"' in engine and "never sent" in engine


async def test_pilot_b_shows_the_sent_request_and_tap_errors(recording: Path) -> None:
    app = InspectorApp(FileSource(recording), start_turn=2)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("b")
        await settle(pilot)
        viewer = app.query_one(ContentViewer)
        assert viewer.text.startswith("SENT: the request the agent actually sent at turn 2")
        status = str(app.query_one("#status").render())
        assert "1 tap error" in status


def test_sent_request_snapshot(snap_compare: Any, recording: Path) -> None:
    app = InspectorApp(FileSource(recording), theme="cp-dark", start_turn=2)

    async def run_before(pilot: Pilot) -> None:
        await settle(pilot)
        await pilot.press("b")
        await settle(pilot)

    assert snap_compare(app, terminal_size=(120, 40), run_before=run_before)


async def test_the_sent_request_view_is_titled_and_highlighted_as_text(recording: Path) -> None:
    # A tool result in it ("# Project", or a `def` in a real agent's) made the whole report "markdown" or
    # "python": the title said so and the transcript was coloured as that language.
    from panels.highlight import guess_language

    assert guess_language("SENT: the request ...\n-- [3] tool t1\ndef f():\n    pass\n# heading\n") == "text"
    app = InspectorApp(FileSource(recording), start_turn=2)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("b")
        await settle(pilot)
        title = app.query_one("#content-title").render_line(0).text
        assert title.startswith("request body · turn 2  ·  text  ·"), title
