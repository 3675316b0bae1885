"""The What-if tab loads the tokenizer before the first slider move needs it (issue 15.2).

A re-plan under a new budget counts texts the recording's count table lacks (a cut or summarised item),
and the first such count in a process loaded cl100k inside that re-plan: on pydicom-1413 (bench_tui.py
--only g, load ~3.9) 36 of the 38 ms CPU of the slowest first re-plan, ~110 ms wall. Showing the tab now
loads it in the background (WhatIfRunner.warm); opening the app without it does not.
`test_showing_the_whatif_tab_loads_the_tokenizer_before_any_replan` fails on 52a7f89.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import engine.tokens
import inspector.sources.replaying
from engine.tokens import TiktokenTokenizer
from engine.whatif import Overrides
from inspector.app import InspectorApp
from inspector.sources.file import FileSource
from tests.tui.conftest import settle

DEMO = Path(__file__).resolve().parents[1] / "demo_sessions" / "scout-anthropic.cpsession"


@pytest.fixture
def fresh_tokenizer(monkeypatch: pytest.MonkeyPatch) -> TiktokenTokenizer:
    """A process whose cl100k is not loaded yet: the default tokenizer, and the shared counter over it."""
    tok = TiktokenTokenizer()
    monkeypatch.setattr(engine.tokens, "_DEFAULT", tok)
    monkeypatch.setattr(inspector.sources.replaying, "_COUNTER", None)
    return tok


async def test_showing_the_whatif_tab_loads_the_tokenizer_before_any_replan(
    fresh_tokenizer: TiktokenTokenizer,
) -> None:
    source = FileSource(DEMO)
    replans: list[int] = []
    replan = source.replan

    def counted(turn: int, overrides: Overrides) -> object:
        replans.append(turn)
        return replan(turn, overrides)

    source.replan = counted  # type: ignore[method-assign]
    app = InspectorApp(source, start_turn=17)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        assert fresh_tokenizer.backend == ""  # opening the app and a turn does not load it
        await pilot.press("w")
        await settle(pilot)
        assert replans == []  # no slider moved yet
        assert fresh_tokenizer.backend in ("bpe-openai", "tiktoken")  # loaded: the first move finds it
        await pilot.press("w")  # again: focus the slider; no second load is started
        await settle(pilot)
        assert not [w for w in app.workers if w.group == "whatif-warm" and w.state.name != "SUCCESS"]


async def test_a_budget_replan_counts_with_the_tokenizer_the_tab_loads(fresh_tokenizer: TiktokenTokenizer) -> None:
    """What warm() loads is what a re-plan under a cut budget counts with: without the tab shown, the
    re-plan itself loads it (the cost the tab takes off the first slider move)."""
    app = InspectorApp(FileSource(DEMO), start_turn=5)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        assert fresh_tokenizer.backend == ""
        assert app.timeline.traces[app.index]["turn"] == 5  # its 2,000-token plan counts a text the table lacks
        app.whatif.replan(app.index, app.timeline.traces[app.index]["turn"], Overrides(window=2_000))
        await settle(pilot)
        assert fresh_tokenizer.backend in ("bpe-openai", "tiktoken")
