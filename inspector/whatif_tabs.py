"""The What-if, Why miss and Shadow tabs' answers (InspectorApp.whatif_tabs): a re-plan or a session-wide
what-if asked for and its result shown when it is still the one asked, why the cache missed (worked out
only while its tab shows), and the Shadow tab added once the source shows a shadow rollout. The work
runs in workers (whatif_runner.WhatIfRunner, InspectorApp.whatif).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from inspector.app import InspectorApp


from textual.widgets import TabbedContent, TabPane

from inspector.messages import (
    ReplanFinished,
    ShadowLoaded,
    SimulationFinished,
    WhyMissed,
)
from panels.shadow import ShadowPanel
from panels.whatif import ReplanRequested, WhatIfPanel
from panels.why_miss import WhyMissPanel


class WhatIfTabs:
    def __init__(self, app: InspectorApp) -> None:
        self.app = app
        self.shadow_tab = False  # the Shadow tab is added once the source shows a shadow rollout

    def replan_requested(self, message: ReplanRequested) -> None:
        app = self.app
        whatif = app.query_one("#whatif", WhatIfPanel)
        if message.session:
            app.whatif.cancel(session=False)
            app.whatif.simulate(message.overrides)
        elif message.overrides.is_empty():
            app.whatif.cancel()
            whatif.result = None
        elif app.index >= 0:
            app.whatif.replan(app.index, app.timeline.traces[app.index]["turn"], message.overrides)

    def simulation_finished(self, message: SimulationFinished) -> None:
        app = self.app
        whatif = app.query_one("#whatif", WhatIfPanel)
        if not whatif.session or message.overrides != whatif.overrides():
            return
        if message.error is not None:
            whatif.show_error(f"session-wide what-if failed: {message.error}")
        else:
            whatif.session_result = message.report

    def replan_finished(self, message: ReplanFinished) -> None:
        app = self.app
        whatif = app.query_one("#whatif", WhatIfPanel)
        if message.index != app.index or message.overrides != whatif.overrides():
            return
        if message.trace is None:
            whatif.result = None
            whatif.show_error(f"cannot re-plan this turn: {message.error}")
            return
        actual = app.full_trace(message.index)
        if actual is not None:
            whatif.compacted_at = self.compacted_at(message.index)
            whatif.result = (actual, message.trace)

    def compacted_at(self, index: int) -> int | None:
        """The turn of the last compaction at or before the turn at `index` (the one whose cut its
        history carries), None when none compacted."""
        for trace in reversed(self.app.timeline.traces[: index + 1]):
            comp = trace.get("compaction")
            if comp and comp.get("decision") == "compacted":
                return int(trace["turn"])
        return None

    def refresh_why(self) -> None:
        app = self.app
        if app.index < 0 or app.query_one("#details", TabbedContent).active != "tab-why":
            return
        app.query_one("#why", WhyMissPanel).why = None
        app.whatif.why_missed(app.index, app.timeline.traces[app.index]["turn"])

    def tab_activated(self, event: TabbedContent.TabActivated) -> None:
        app = self.app
        if event.pane.id == "tab-whatif":  # shown by a click on its tab
            app.whatif.warm()
            app.query_one("#whatif", WhatIfPanel).sync()
        elif event.pane.id == "tab-why":
            self.refresh_why()

    async def shadow_loaded(self, message: ShadowLoaded) -> None:
        app = self.app
        if message.summary is None:
            return
        if not self.shadow_tab:
            await app.query_one("#details", TabbedContent).add_pane(
                TabPane("Shadow", ShadowPanel(id="shadow"), id="tab-shadow")
            )
            self.shadow_tab = True
        panel = app.query_one("#shadow", ShadowPanel)
        panel.summary = message.summary
        if app.index >= 0:
            panel.turn = app.timeline.traces[app.index]["turn"]

    def why_missed(self, message: WhyMissed) -> None:
        app = self.app
        if message.index == app.index:
            app.query_one("#why", WhyMissPanel).why = message.why
