"""What-if work off the UI thread: a re-plan of one turn, or the whole session re-simulated and priced.

A newer setting cancels the older run (exclusive workers); a cancelled run finishes but never posts,
and the app drops a result that no longer matches the panel's settings."""

from __future__ import annotations

import threading

from textual.app import App
from textual.worker import get_current_worker

from engine.tokens import default_tokenizer
from engine.whatif import Overrides
from inspector.messages import ReplanFinished, ShadowLoaded, SimulationFinished, WhyMissed
from inspector.sources import FoldCancelled, SimulationCancelled, Source


class WhatIfRunner:
    def __init__(self, app: App[None], source: Source) -> None:
        self.app, self.source = app, source
        # The shadow summary runs one at a time (see shadow): whether one runs, and whether it was asked
        # for again meanwhile.
        self._shadow_lock = threading.Lock()
        self._shadow_running = False
        self._shadow_again = False
        self._warm_started = False

    def warm(self) -> None:
        """Load the token counter's tokenizer in the background, once, when the What-if tab is shown.

        A re-plan under a new budget counts texts the recording's count table lacks (a cut or summarised
        item), and the first such count loads cl100k: ~35-40 ms CPU on pydicom-1413, the whole tail of
        the first slider move (36 of its 38 ms). Loaded while the person reaches for the slider, it is
        ready before the first move. Not at start-up: a session that never opens What-if never loads it
        (memory, and the CPU the first steps need)."""
        if self._warm_started:
            return
        self._warm_started = True
        tokenizer = default_tokenizer()  # the one the re-plans count with (TokenCounter's default)
        if tokenizer.backend:  # loaded already (a count this process made before)
            return

        def work() -> None:
            tokenizer.count("what-if")

        self.app.run_worker(work, thread=True, group="whatif-warm", exit_on_error=False)

    def cancel(self, session: bool = True) -> None:
        self.app.workers.cancel_group(self.app, "replan")
        if session:
            self.app.workers.cancel_group(self.app, "simulate")

    def replan(self, index: int, turn: int, overrides: Overrides) -> None:
        def work() -> None:
            worker = get_current_worker()
            try:
                trace = self.source.replan(turn, overrides)
            except FoldCancelled:  # a newer setting or step replaced this re-plan mid-fold
                return
            except Exception as exc:  # a recording damaged at this turn: said in the panel, not silence
                if not worker.is_cancelled:
                    self.app.post_message(ReplanFinished(index, overrides, None, f"{type(exc).__name__}: {exc}"))
                return
            if not worker.is_cancelled:
                self.app.post_message(ReplanFinished(index, overrides, trace))

        self.app.run_worker(work, thread=True, exclusive=True, group="replan", exit_on_error=False)

    def simulate(self, overrides: Overrides) -> None:
        """Session-wide what-if. The source polls `cancelled`, so a superseded run stops early."""
        def work() -> None:
            worker = get_current_worker()
            try:
                report = self.source.simulate(overrides, cancelled=lambda: worker.is_cancelled)
            except SimulationCancelled:
                return
            except Exception as exc:  # an unknown model or setting is a message in the panel, not a crash
                if not worker.is_cancelled:
                    self.app.post_message(SimulationFinished(overrides, None, f"{type(exc).__name__}: {exc}"))
                return
            if not worker.is_cancelled:
                self.app.post_message(SimulationFinished(overrides, report))

        self.app.run_worker(work, thread=True, exclusive=True, group="simulate", exit_on_error=False)

    def why_missed(self, index: int, turn: int) -> None:
        """Turn `turn`'s request against the previous one (two re-plans), for the Why miss tab."""
        def work() -> None:
            worker = get_current_worker()
            try:
                why = self.source.why_missed(turn)
            except Exception as exc:  # a turn that cannot be rebuilt is a line in the panel, not a crash
                why = {"turn": turn, "previous": turn - 1, "engine": None, "as_sent": None, "diagnostics": {},
                       "error": f"{type(exc).__name__}: {exc}"}
            if not worker.is_cancelled:
                self.app.post_message(WhyMissed(index, why))

        self.app.run_worker(work, thread=True, exclusive=True, group="why", exit_on_error=False)

    def shadow(self) -> None:
        """The session's shadow rollout summary (None: no shadow), for the Shadow tab. Asked for again
        while it runs (each batch of live turns asks), it runs once more when done, on the newest
        events. A new worker each time, in an exclusive group, cancelled the one running, which ran on
        to its end all the same (a thread cannot be stopped): at 50,000 turns five or more summaries of
        the whole session waited on the source's lock at once, taking the CPU the history's fill needed."""
        with self._shadow_lock:
            if self._shadow_running:
                self._shadow_again = True
                return
            self._shadow_running = True

        def work() -> None:
            try:
                while True:
                    try:
                        summary = self.source.shadow_summary()
                    except Exception:  # a damaged shadow record must not take the app down: no tab
                        summary = None
                    self.app.post_message(ShadowLoaded(summary))
                    with self._shadow_lock:
                        if not self._shadow_again or get_current_worker().is_cancelled:
                            self._shadow_running = False
                            return
                        self._shadow_again = False
            except BaseException:
                with self._shadow_lock:
                    self._shadow_running = False
                raise

        self.app.run_worker(work, thread=True, group="shadow", exit_on_error=False)
