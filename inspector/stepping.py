"""Moving between turns besides ←/→ (InspectorApp.stepping): the next or previous interesting turn
(`n`/`N`), going to turn N (`g`), and playing the session at a speed (space, `+`/`-`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from inspector.app import InspectorApp


from textual.timer import Timer

from inspector.screens import GoToTurnScreen
from inspector.session_view import SPEEDS


class Stepping:
    def __init__(self, app: InspectorApp) -> None:
        self.app = app
        self.play_timer: Timer | None = None

    def next_interesting(self) -> None:
        app = self.app
        if app.timeline.next_interesting() is None:
            app.notify("no later interesting turn", timeout=2)
        app.go(app.timeline.current)

    def prev_interesting(self) -> None:
        app = self.app
        if app.timeline.prev_interesting() is None:
            app.notify("no earlier interesting turn", timeout=2)
        app.go(app.timeline.current)

    def goto(self) -> None:
        app = self.app
        if not len(app.timeline):
            return
        first, last = app.timeline.traces[0]["turn"], app.timeline.traces[-1]["turn"]

        def done(turn: int | None) -> None:
            if turn is None:
                return
            index = app.timeline.index_of_turn(turn)
            if index is None:
                # Inside first–last but not received (a live session re-synced past dropped events): the
                # next turn there is, and said so. It jumped to the first turn without a word.
                index = app.timeline.index_at_or_after(turn)
                app.notify(
                    f"turn {turn} is not in this session; showing turn {app.timeline.traces[index]['turn']}",
                    severity="warning",
                    timeout=4,
                )
            app.go(app.timeline.go(index))

        app.push_screen(GoToTurnScreen(first, last), done)

    def play(self, playing: bool) -> None:
        app = self.app
        if self.play_timer is not None:
            self.play_timer.stop()
            self.play_timer = None
        if playing:
            if app.timeline.current >= app.timeline.last:
                app.timeline.go(0)  # play from the start, as a media player does at the end
                app.index = 0
            self.play_timer = app.set_interval(1 / SPEEDS[app.speed], self.tick)
        app.update_status()

    def tick(self) -> None:
        app = self.app
        if app.timeline.current >= app.timeline.last:
            app.playing = False
        else:
            app.action_step(1)

    def speed(self, delta: int) -> None:
        app = self.app
        app.speed = min(max(0, app.speed + delta), len(SPEEDS) - 1)
        if app.playing:
            self.play(True)
        app.update_status()
