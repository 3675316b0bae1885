"""The app's actions: stepping, play/pause, tabs, save, help and the command palette entries."""

from __future__ import annotations

from collections.abc import Iterable

from textual import on, work
from textual.app import SystemCommand
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Switch, TabbedContent

from inspector.app_state import SPEEDS, AppState
from inspector.screens import GoToTurnScreen, HelpScreen, SaveScreen
from panels.navigation import JumpToTurn


class ActionsMixin(AppState):
    # ---- stepping -----------------------------------------------------------------------------

    def action_step(self, delta: int) -> None:
        self._go(self.timeline.step(delta))

    def action_first(self) -> None:
        self._go(self.timeline.go(0))

    def action_last(self) -> None:
        self._go(self.timeline.go(self.timeline.last))

    def action_next_interesting(self) -> None:
        if self.timeline.next_interesting() is None:
            self.notify("no later interesting turn", timeout=2)
        self._go(self.timeline.current)

    def action_prev_interesting(self) -> None:
        if self.timeline.prev_interesting() is None:
            self.notify("no earlier interesting turn", timeout=2)
        self._go(self.timeline.current)

    @on(JumpToTurn)
    def _jump(self, message: JumpToTurn) -> None:
        self._go(self.timeline.go(message.index))

    def action_goto(self) -> None:
        if not len(self.timeline):
            return
        first, last = self.timeline.traces[0]["turn"], self.timeline.traces[-1]["turn"]

        def done(turn: int | None) -> None:
            if turn is not None:
                self._go(self.timeline.go(self.timeline.index_of_turn(turn) or 0))

        self.push_screen(GoToTurnScreen(first, last), done)

    # ---- play ---------------------------------------------------------------------------------

    def action_play(self) -> None:
        self.playing = not self.playing

    def watch_playing(self, playing: bool) -> None:
        if self._play_timer is not None:
            self._play_timer.stop()
            self._play_timer = None
        if playing:
            if self.timeline.current >= self.timeline.last:
                self.timeline.go(0)  # play from the start, as a media player does at the end
                self.index = 0
            self._play_timer = self.set_interval(1 / SPEEDS[self.speed], self._tick)
        self._update_status()

    def _tick(self) -> None:
        if self.timeline.current >= self.timeline.last:
            self.playing = False
        else:
            self.action_step(1)

    def action_speed(self, delta: int) -> None:
        self.speed = min(max(0, self.speed + delta), len(SPEEDS) - 1)
        if self.playing:
            self.watch_playing(True)
        self._update_status()

    # ---- tabs and views -----------------------------------------------------------------------

    def action_tab(self, tab: str) -> None:
        self.query_one("#details", TabbedContent).active = tab
        if tab == "tab-whatif":
            self.query_one("#budget").focus()  # arrows now move the slider; Esc goes back to stepping

    def action_session_whatif(self) -> None:
        self.query_one("#details", TabbedContent).active = "tab-whatif"
        self.query_one("#session", Switch).toggle()

    def action_focus_manifest(self) -> None:
        self.query_one("#manifest").focus()

    def action_request_body(self) -> None:
        self._show_request = True
        self.action_tab("tab-content")
        self._load_content(None)

    # ---- save, help, palette ------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "save":
            return self.source.kind == "live"
        return True

    def action_save(self) -> None:
        pid = self.source.header.get("pid", "session")
        self.push_screen(SaveScreen(f"cp-{pid}.cpsession", len(self.timeline)), self._save_to)

    def _save_to(self, path: str | None) -> None:
        if path:
            self.save_worker(path)

    @work(thread=True, group="save", exit_on_error=False)
    def save_worker(self, path: str) -> None:
        try:
            self.source.save(path)
        except OSError as exc:
            self.call_from_thread(self.notify, f"could not save to {path}: {exc}", severity="error")
            return
        self.call_from_thread(self.notify, f"saved {len(self.timeline)} turns to {path}")

    def action_help(self) -> None:
        self.push_screen(HelpScreen([b for b in self.BINDINGS if isinstance(b, Binding)]))

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        for binding in self.BINDINGS:
            assert isinstance(binding, Binding)
            if binding.action in ("quit",) or not binding.tooltip:
                continue
            title = binding.tooltip[0].upper() + binding.tooltip[1:]
            yield SystemCommand(title, f"key: {binding.key}",
                                lambda a=binding.action: self.call_later(self.run_action, a))
