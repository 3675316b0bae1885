"""A live agent's status line at 80 columns keeps its model whole, and a provider the name does not say.

Seen under `cp-inspect run -- mini ... -m claude-sonnet-4-5-20250929` at 80x24: "● LIVE pid 2886.1  turn 4
(5/5)  following newest    claude-sonnet-4-5-202509…", the model cut and its provider gone."""

from __future__ import annotations

import time

import pytest

from inspector.app import InspectorApp
from inspector.sources.synthetic import SyntheticSource
from panels.markup_line import MarkupLine

DATED = "claude-sonnet-4-5-20250929"


@pytest.mark.parametrize(
    ("provider", "ends"),
    [
        # the name says Anthropic: the provider gives way and the model shows whole
        ("anthropic", f"following newest  {DATED}"),
        # Claude through the OpenAI wire: that is what the provider says, so it stays, the model cut
        ("openai", "following newest  claude-sonn… · openai wire"),
    ],
)
async def test_a_live_agents_dated_model_at_80_columns(provider: str, ends: str) -> None:
    source = SyntheticSource(400, live=True, initial=6, delay=1.0)
    source.header.update(model=DATED, provider=provider, pid=28861, session=1)
    app = InspectorApp(source)
    async with app.run_test(size=(80, 24)) as pilot:
        # (settle() waits for the source's worker, which a live source ends only when the agent does)
        give_up = time.monotonic() + 20
        status = ""
        while "following newest" not in status and time.monotonic() < give_up:
            await pilot.pause(0.05)
            status = app.query_one("#status", MarkupLine).render_line(0).text
        assert status.lstrip().startswith("● LIVE pid 28861.1  turn "), status
        assert status.rstrip().endswith(ends), status
        assert "…" not in status.replace(ends, ""), status  # nothing else cut
