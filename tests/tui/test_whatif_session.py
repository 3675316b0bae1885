"""Session-wide what-if: the toggle re-runs the whole session (in a worker, newest settings win) and the
panel shows pipeline vs gates-closed vs as-sent vs actual with a per-turn cost chart."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Static, Switch

from engine.recording.cpsession import RecordingReader
from engine.recording.journal import unpack_event
from engine.sim.simulate import SimSettings, simulate_events
from engine.whatif import Overrides
from inspector.app import InspectorApp
from inspector.sources import SimulationCancelled
from inspector.sources.file import FileSource
from inspector.sources.synthetic import SyntheticSource, synthetic_simulation
from panels.slider import Slider
from panels.whatif import WhatIfPanel
from tests.tui.conftest import settle

DEMO = Path(__file__).resolve().parents[2] / "demo_sessions" / "scout-anthropic.cpsession"


async def test_session_toggle_shows_all_policies_and_newest_settings_win() -> None:
    source = SyntheticSource(40)
    app = InspectorApp(source, theme="cp-dark")
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await pilot.press("w")
        app.query_one("#session", Switch).toggle()
        await settle(pilot)
        whatif = app.query_one("#whatif", WhatIfPanel)
        assert whatif.session and source.simulations == 1
        assert whatif.session_result == synthetic_simulation(40, 7, Overrides())
        text = str(app.query_one("#whatif-result", Static).render())
        for wanted in ("what-if", "closed", "as sent", "actual", "cache hit", "break-even", "cost per turn"):
            assert wanted in text
        budget = app.query_one("#budget", Slider)
        budget.focus()
        await pilot.press("shift+left", "shift+left", "shift+left")
        await settle(pilot)
        expected = synthetic_simulation(40, 7, Overrides(window=int(budget.value)))
        assert whatif.session_result == expected
        assert source.replans == 0  # session mode never re-plans the single turn
        steps = source.simulations
        await pilot.press("escape", "left")  # stepping turns does not re-run the session
        await settle(pilot)
        assert source.simulations == steps
        app.query_one("#session", Switch).toggle()  # back to the single-turn comparison
        await settle(pilot)
        assert not whatif.session and source.replans == 1
        assert "what-if skipped" in str(app.query_one("#whatif-result", Static).render())


def test_file_source_simulate_matches_the_engine_and_cancels() -> None:
    source = FileSource(DEMO)
    got = source.simulate(Overrides(window=8000, gates={"spill": False}))
    events = [unpack_event(e) for e in RecordingReader.open(DEMO).events()]
    want = simulate_events(events, SimSettings(window=8000, gates={"spill": False})).to_json(per_turn=True)
    for name in ("pipeline", "gates_closed", "as_sent"):
        rows = want["policies"][name].pop("per_turn")
        kept = got["policies"][name].pop("per_turn", None)
        assert got["policies"][name] == want["policies"][name]
        # per turn, the panel keeps the cost it charts of the two it charts, and nothing of the others
        assert kept == ([{"cost_usd": r["cost_usd"]} for r in rows] if name in ("pipeline", "gates_closed") else None)
    # The session-wide what-if compares every context policy, as `simulate --policies all` does.
    from engine.sim.policies import ALL
    from panels.whatif_session import policy_rows

    assert set(ALL) <= set(got["policies"])
    rows = policy_rows(got)
    assert len(rows) == 2 + len(ALL) and all(any(n in r for r in rows) for n in ALL)
    assert got["break_even_cached_price_ratio"] == want["break_even_cached_price_ratio"]
    with pytest.raises(SimulationCancelled):
        source.simulate(Overrides(), cancelled=lambda: True)


def test_the_session_whatif_keeps_per_turn_only_what_the_panel_charts() -> None:
    """The report kept per-turn rows of every policy (~4.5 KB a turn: 54 MB held by the panel at 12,000
    turns); the panel draws the per-turn cost of two. What it keeps per turn is now those two numbers."""
    import sys

    def deep(o: object, seen: set[int]) -> int:
        if id(o) in seen:
            return 0
        seen.add(id(o))
        size = sys.getsizeof(o)
        if isinstance(o, dict):
            size += sum(deep(k, seen) + deep(v, seen) for k, v in o.items())
        elif isinstance(o, list | tuple):
            size += sum(deep(v, seen) for v in o)
        return size

    got = FileSource(DEMO).simulate(Overrides(window=8000))
    turns = got["simulated_turns"]
    rows = [got["policies"][n].get("per_turn") for n in got["policies"] if got["policies"][n]]
    per_turn = sum(deep(r, set()) for r in rows if r) / turns
    assert per_turn < 600, f"{per_turn:.0f} bytes of per-turn rows a turn"
    assert len(got["policies"]["pipeline"]["per_turn"]) == turns
