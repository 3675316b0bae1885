"""A call the SDK retried (an upstream 429, then its reply) says so in the inspector, as `explain` does.

Seen using `cp-inspect run` on an agent with the real anthropic SDK against a stand-in answering 429
before its reply: the proxy keeps the failed attempts on the turn (engine/capture/proxy/retries.py),
`explain` and `simulate` said so, but the TUI showed such a turn as any other (no line in the Tier
panel, no stop for `n`), so a person watching a rate-limited agent saw nothing of it. Here the real SDK
goes through the real proxy to the stand-in; the recording is opened as `replay` (and an attached
inspector following it) opens it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anthropic
import pytest

from engine.capture.proxy.recording import Recorder
from engine.capture.proxy.server import ProxyServer
from inspector.app import InspectorApp
from inspector.sources.file import FileSource
from inspector.timeline import interesting_reasons
from panels.tier import TierPanel
from tests.capture.standin import StandIn
from tests.tui.conftest import settle


@pytest.fixture
def retried_recording(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    return record_retried(tmp_path)


def record_retried(tmp_path: Path) -> Path:
    """Three calls of one conversation through the proxy; the second met a 429 and was retried."""
    standin = StandIn(retry_after="0.01").start()
    rec = Recorder(tmp_path / "rec")
    server = ProxyServer({"anthropic": standin.url}, rec).start()
    try:
        client = anthropic.Anthropic(base_url=server.url, api_key="k", max_retries=2)
        msgs: list[Any] = [{"role": "user", "content": "List the files."}]
        for i in range(3):
            standin.failures[:] = [429] if i == 1 else []
            r = client.messages.create(model="claude-sonnet-4", max_tokens=64, system="Be careful.", messages=msgs)
            msgs += [{"role": "assistant", "content": "ok"}, {"role": "user", "content": f"Step {i}."}]
            assert r.usage.input_tokens > 0
        assert [h.get("x-stainless-retry-count") for _, h, _ in standin.requests] == ["0", "0", "1", "0"]
    finally:
        server.stop()
        rec.close()
        standin.stop()
    (path,) = [info.path for info, _ in rec.sessions.values()]
    return Path(path)


def _tier_text(app: InspectorApp) -> str:
    tier = app.query_one("#tier", TierPanel)
    return " ".join(tier.render_line(y).text.strip() for y in range(tier.region.height))


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_a_retried_turn_says_so_in_the_tier_panel(retried_recording: Path, size: tuple[int, int]) -> None:
    app = InspectorApp(FileSource(retried_recording), start_turn=0)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        assert "retried" not in _tier_text(app)
        await pilot.press("right")
        await settle(pilot)
        shown = _tier_text(app)
        assert "retried after HTTP 429" in shown, shown
        assert "error" not in shown, shown  # the call was answered in the end
        await pilot.press("right")
        await settle(pilot)
        assert "retried" not in _tier_text(app)
        # `n` stops there (the stand-in's usage makes every turn an alert's too: asked of the summaries)
        said = [interesting_reasons(t, None) for t in app.timeline.traces]
        assert ["retried" in r for r in said] == [False, True, False], said


def record_all_failed(tmp_path: Path) -> Path:
    """Two calls through the proxy; every attempt of the second met a 429 (the SDK gave up after two retries)."""
    standin = StandIn(retry_after="0.01").start()
    rec = Recorder(tmp_path / "rec")
    server = ProxyServer({"anthropic": standin.url}, rec).start()
    try:
        client = anthropic.Anthropic(base_url=server.url, api_key="k", max_retries=2)
        msgs: list[Any] = [{"role": "user", "content": "List the files."}]
        client.messages.create(model="claude-sonnet-4", max_tokens=64, system="Be careful.", messages=msgs)
        msgs += [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "Step 1."}]
        standin.failures[:] = [429, 429, 429]
        with pytest.raises(anthropic.RateLimitError):
            client.messages.create(model="claude-sonnet-4", max_tokens=64, system="Be careful.", messages=msgs)
    finally:
        server.stop()
        rec.close()
        standin.stop()
    (path,) = [info.path for info, _ in rec.sessions.values()]
    return Path(path)


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_a_turn_whose_every_attempt_failed_keeps_its_retried_line_in_view(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, size: tuple[int, int]
) -> None:
    """The error (the API's JSON body) wrapped over every row of the panel and pushed "retried after HTTP
    429, HTTP 429" under its edge at both sizes. It is cut to the rows left, with "…", and whole in the
    panel's tooltip."""
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    app = InspectorApp(FileSource(record_all_failed(tmp_path)), start_turn=1)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        tier = app.query_one("#tier", TierPanel)
        rows = [tier.render_line(y).text.rstrip() for y in range(tier.size.height)]  # the rows in view
        assert any(r.startswith("retried after HTTP 429, HTTP 429") for r in rows), rows
        assert rows[1].startswith("error HTTP 429"), rows
        assert "stand-in says 429" not in " ".join(rows) and rows[-2].endswith("…"), rows  # cut, and says so
        assert "stand-in says 429" in str(tier.tooltip), tier.tooltip
        await pilot.press("left")  # an answered turn: no tooltip left behind
        await settle(pilot)
        assert tier.tooltip is None
