"""What-if wiring: a slider or switch change re-plans the selected turn (or the whole session) in a
worker; a newer setting cancels the older run, and a result that no longer matches is dropped."""

from __future__ import annotations

from textual import on, work
from textual.worker import get_current_worker

from engine.whatif import Overrides
from inspector.app_state import AppState
from inspector.messages import ReplanFinished, SimulationFinished
from inspector.sources import SimulationCancelled
from panels.whatif import ReplanRequested, WhatIfPanel


class WhatIfMixin(AppState):
    @on(ReplanRequested)
    def _replan_requested(self, message: ReplanRequested) -> None:
        whatif = self.query_one("#whatif", WhatIfPanel)
        if message.session:
            self.workers.cancel_group(self, "replan")
            self.run_simulation(message.overrides)
        elif message.overrides.is_empty():
            self.workers.cancel_group(self, "simulate")
            self.workers.cancel_group(self, "replan")
            whatif.result = None
        elif self.index >= 0:
            self.run_replan(self.index, message.overrides)

    @work(thread=True, exclusive=True, group="replan", exit_on_error=False)
    def run_replan(self, index: int, overrides: Overrides) -> None:
        """exclusive=True cancels the previous re-plan; a cancelled one finishes but never posts."""
        worker = get_current_worker()
        trace = self.source.replan(self.timeline.traces[index]["turn"], overrides)
        if not worker.is_cancelled:
            self.post_message(ReplanFinished(index, overrides, trace))

    @work(thread=True, exclusive=True, group="simulate", exit_on_error=False)
    def run_simulation(self, overrides: Overrides) -> None:
        """Session-wide what-if. Newest settings win: exclusive=True cancels the previous run, which
        stops at its next check (the source polls `cancelled`) and never posts."""
        worker = get_current_worker()
        try:
            report = self.source.simulate(overrides, cancelled=lambda: worker.is_cancelled)
        except SimulationCancelled:
            return
        except Exception as exc:  # an unknown model or setting is a message in the panel, not a crash
            if not worker.is_cancelled:
                self.post_message(SimulationFinished(overrides, None, f"{type(exc).__name__}: {exc}"))
            return
        if not worker.is_cancelled:
            self.post_message(SimulationFinished(overrides, report))

    @on(SimulationFinished)
    def _simulation_finished(self, message: SimulationFinished) -> None:
        whatif = self.query_one("#whatif", WhatIfPanel)
        if not whatif.session or message.overrides != whatif.overrides():
            return
        if message.error is not None:
            whatif.show_session_error(f"session-wide what-if failed: {message.error}")
        else:
            whatif.session_result = message.report

    @on(ReplanFinished)
    def _replan_finished(self, message: ReplanFinished) -> None:
        whatif = self.query_one("#whatif", WhatIfPanel)
        actual = self.full_trace(message.index)
        if message.index == self.index and message.overrides == whatif.overrides() and actual is not None:
            whatif.result = (actual, message.trace)
