"""Pilot tests: what-if controls re-plan in a worker; live follow, step-back, disconnect and save."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

from textual.widgets import Input, Label, Select, Static, Switch

from engine.whatif import Overrides
from inspector.app import InspectorApp
from inspector.screens import SaveScreen
from inspector.sources import Disconnected, NewTurn, SourceEvent
from inspector.sources.synthetic import SyntheticSource
from panels.markup_line import MarkupLine
from panels.slider import Slider
from panels.whatif import WhatIfPanel
from tests.tui.conftest import settle


async def test_budget_slider_replans_and_shows_result(replay_source: SyntheticSource) -> None:
    app = InspectorApp(replay_source, start_turn=30)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await pilot.press("w")
        whatif = app.query_one("#whatif", WhatIfPanel)
        assert whatif.result is None
        app.query_one("#budget", Slider).focus()
        await pilot.press("right")  # +1000 tokens
        await settle(pilot)
        assert whatif.result is not None
        actual, replanned = whatif.result
        assert actual is app.timeline.traces[30]
        assert replanned == replay_source.replan(30, Overrides(window=33000))
        shown = str(app.query_one("#whatif-result", Static).render())
        assert "tier" in shown and "tokens sent" in shown


async def test_newer_slider_value_wins(replay_source: SyntheticSource) -> None:
    app = InspectorApp(replay_source, start_turn=30)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await pilot.press("w")
        app.query_one("#budget", Slider).focus()
        await pilot.press("shift+right", "shift+right", "shift+right")  # +30k in three quick steps
        await settle(pilot)
        _, replanned = app.query_one("#whatif", WhatIfPanel).result
        assert replanned["limit"] == 62000
        assert replanned["tier"] != app.timeline.traces[30]["tier"]  # a doubled window relieves pressure


async def test_gate_and_provider_and_reset(replay_source: SyntheticSource) -> None:
    app = InspectorApp(replay_source, start_turn=31)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await pilot.press("w")
        whatif = app.query_one("#whatif", WhatIfPanel)
        app.query_one("#gate-spill", Switch).value = False
        await settle(pilot)
        assert whatif.overrides() == Overrides(gates={"spill": False})
        assert any(s["step"] == "spill" for s in whatif.result[1]["skipped"])
        app.query_one("#provider", Select).value = "openai"
        await settle(pilot)
        assert whatif.result[1]["provider"] == "openai" and whatif.result[1]["markers"] == []
        # Stepping keeps the what-if settings and re-plans the new turn.
        app.query_one("#manifest").focus()
        await pilot.press("left")
        await settle(pilot)
        assert whatif.result[0]["turn"] == 30 and whatif.result[1]["turn"] == 30
        await pilot.click("#reset")
        await settle(pilot)
        assert whatif.overrides().is_empty() and whatif.result is None


async def test_threshold_slider_by_mouse(replay_source: SyntheticSource) -> None:
    app = InspectorApp(replay_source, start_turn=20)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await pilot.press("w")
        await pilot.click("#th-trim_schemas", offset=(10, 0))  # the first cell of the track
        await settle(pilot)
        overrides = app.query_one("#whatif", WhatIfPanel).overrides()
        assert overrides.thresholds == {"trim_schemas": 0.30}


async def test_live_follows_then_disconnects(live_source: SyntheticSource) -> None:
    app = InspectorApp(live_source)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        assert len(app.timeline) == 30 and app.index == 29
        assert app.disconnected == "agent pid 4242 exited"
        assert "Agent disconnected — 30 turns kept; press s to save" in str(app.query_one("#status", MarkupLine).render())
        # The toast says it once: it read "Agent disconnected (agent pid 4242 exited). 30 turns kept; ...".
        # (Textual keeps the toasts it shows in App._notifications.)
        toasts = [n.message for n in app._notifications]
        assert any(t.startswith("Agent pid 4242 exited. 30 turns kept") for t in toasts), toasts


class GatedSource(SyntheticSource):
    """Live source whose next turn arrives only when the test releases it."""

    def __init__(self) -> None:
        super().__init__(12, live=True, initial=10)
        self.release = threading.Event()

    def follow(self) -> Iterator[SourceEvent]:
        for t in (10, 11):
            self.release.wait(5)
            self.release.clear()
            yield NewTurn(self.trace(t))
        yield Disconnected("agent pid 4242 exited")


async def test_live_stepping_back_stops_following() -> None:
    source = GatedSource()
    app = InspectorApp(source)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause(0.1)
        assert app.index == 9
        source.release.set()
        await pilot.pause(0.2)
        assert app.index == 10  # following the newest
        await pilot.press("left")
        assert "stepped back" in str(app.query_one("#status", MarkupLine).render())
        source.release.set()
        await settle(pilot)
        assert len(app.timeline) == 12 and app.index == 9  # stayed where the person is
        await pilot.press("end")
        assert app.index == 11 and app.timeline.follow


async def test_save_after_disconnect(tmp_path: Path, live_source: SyntheticSource) -> None:
    app = InspectorApp(live_source)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await pilot.press("s")
        assert isinstance(app.screen, SaveScreen)
        target = tmp_path / "kept.json"
        app.screen.query_one(Input).value = str(target)
        await pilot.press("enter")
        await settle(pilot)
        assert len(json.loads(target.read_text())["turns"]) == 30


async def test_saving_while_the_agent_runs_says_turns_go_on_arriving() -> None:
    """The prompt said "Save 10 received turns" while more arrived behind it; the save, at Enter, takes
    every turn there by then (a live demo: "Save 15 received turns", then "saved 21 turns")."""
    source = GatedSource()
    app = InspectorApp(source)
    async with app.run_test(size=(160, 48)) as pilot:
        for _ in range(200):  # the first ten turns shown (a loaded machine takes longer than a fixed pause)
            await pilot.pause(0.05)
            if len(app.timeline) == 10 and app.index == 9:
                break
        await pilot.press("s")
        assert isinstance(app.screen, SaveScreen)
        prompt = str(app.screen.query_one(Label).render())
        assert "10 so far" in prompt and "Save 10 received turns" not in prompt, prompt
        await pilot.press("escape")
        for arrived in (11, 12):  # let the agent finish before the app closes
            source.release.set()
            for _ in range(200):
                await pilot.pause(0.05)
                if len(app.timeline) == arrived:
                    break
        await settle(pilot)
        assert app.disconnected


async def test_save_is_disabled_in_replay(replay_source: SyntheticSource) -> None:
    app = InspectorApp(replay_source)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await pilot.press("s")
        assert not isinstance(app.screen, SaveScreen)


async def test_hidden_whatif_panel_does_nothing_on_a_step_and_catches_up_when_shown(
        replay_source: SyntheticSource) -> None:
    """Behind the Content tab a step leaves the what-if controls alone (setting five sliders and six
    switches nobody sees was part of every step); showing the tab, by key or otherwise, first brings
    them to the turn on screen."""
    from textual.widgets import TabbedContent

    app = InspectorApp(replay_source, start_turn=10)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        budget = app.query_one("#budget", Slider)
        calls: list[float] = []
        original = budget.set_quietly

        def counting(value: float) -> None:
            calls.append(value)
            original(value)

        budget.set_quietly = counting  # type: ignore[method-assign]
        budget.set_quietly(5000)  # what the sliders show is stale from here on
        calls.clear()
        for _ in range(3):
            await pilot.press("right")
        await settle(pilot)
        assert calls == [], "a hidden what-if panel followed the steps"
        assert budget.value != app.timeline.traces[app.index]["limit"]
        await pilot.press("w")
        await settle(pilot)
        assert calls and budget.value == app.timeline.traces[app.index]["limit"]

        # Shown without the app's key (a click on the tab switches TabbedContent itself).
        await pilot.press("c")
        budget.set_quietly(5000)
        await pilot.press("right")
        await settle(pilot)
        assert budget.value == 5000
        app.query_one("#details", TabbedContent).active = "tab-whatif"
        await settle(pilot)
        assert budget.value == app.timeline.traces[app.index]["limit"]


async def test_a_session_wide_result_says_when_more_turns_arrived_after_it() -> None:
    """Attached to a live agent, `W` priced the turns there were then; the agent went on and the figures
    did not say they were older than the session shown. They say how many turns came after their run."""
    import threading
    import time

    agent_goes_on = threading.Event()  # the last 10 turns arrive only once the first run has finished
    app = InspectorApp(SyntheticSource(30, live=True, initial=20, delay=0.01, hold=agent_goes_on))
    async with app.run_test(size=(120, 40)) as pilot:
        give_up = time.monotonic() + 30
        while len(app.timeline) < 20 and time.monotonic() < give_up:
            await pilot.pause(0.05)
        await pilot.press("W")
        whatif = app.query_one("#whatif", WhatIfPanel)
        while whatif.session_result is None and time.monotonic() < give_up:
            await pilot.pause(0.05)
        ran_on = whatif.session_result["turns"]  # type: ignore[index]
        assert ran_on == 20
        agent_goes_on.set()
        while len(app.timeline) < 30 and time.monotonic() < give_up:
            await pilot.pause(0.05)
        await pilot.pause(0.1)
        assert ran_on < 30
        shown = str(app.query_one("#whatif-result", Static).render())
        assert f"run on {ran_on} turns; {30 - ran_on} more arrived since (W twice re-runs with them)" in shown, shown
        await pilot.press("W", "W")  # off and on: the run takes them all, and the note goes
        while (whatif.session_result is None or whatif.session_result["turns"] < 30) and time.monotonic() < give_up:
            await pilot.pause(0.05)
        await pilot.pause(0.1)
        assert "more arrived since" not in str(app.query_one("#whatif-result", Static).render())
