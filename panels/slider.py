"""A small slider: Textual has none. Keyboard (arrows, shift for big steps, Home/End) and mouse
(click or drag on the track). Posts `Slider.Changed`; the owner decides what a value means."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from textual import events
from textual.binding import Binding
from textual.content import Content
from textual.message import Message
from textual.reactive import reactive
from textual.widget import Widget

from panels.fmt import literal


class Slider(Widget, can_focus=True):
    DEFAULT_CSS = """
    Slider { height: 1; width: 1fr; }
    Slider:focus { background: $boost; }
    """
    # Shown in the footer while a slider has focus: the arrows adjust it, Esc hands them back to stepping.
    BINDINGS = [
        Binding("escape", "app.focus_manifest", "Done (arrows step turns)", key_display="esc"),
        Binding("left", "nudge(-1)", "Less", key_display="←"),
        Binding("right", "nudge(1)", "More", key_display="→"),
        Binding("shift+left,pagedown", "nudge(-10)", "Less ×10", show=False),
        Binding("shift+right,pageup", "nudge(10)", "More ×10", show=False),
        Binding("home", "extreme(0)", "Min", show=False),
        Binding("end", "extreme(1)", "Max", show=False),
    ]
    value: reactive[float] = reactive(0.0)

    @dataclass
    class Changed(Message):
        """The slider moved to `value`."""

        slider: Slider
        value: float

        @property
        def control(self) -> Slider:
            return self.slider

    def __init__(self, label: str, minimum: float, maximum: float, step: float, value: float,
                 fmt: Callable[[float], str] = str, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.label, self.minimum, self.maximum, self.step, self.fmt = label, minimum, maximum, step, fmt
        self.set_reactive(Slider.value, self._clamp(value))
        self.touched = False  # set once the person moves it; untouched sliders track the recorded value

    def _clamp(self, value: float) -> float:
        steps = round((value - self.minimum) / self.step)
        return min(max(self.minimum + steps * self.step, self.minimum), self.maximum)

    def set_quietly(self, value: float) -> None:
        """Follow the recorded value without posting Changed (no re-plan for a turn change)."""
        with self.prevent(Slider.Changed):
            self.value = self._clamp(value)

    def _set_by_user(self, value: float) -> None:
        value = self._clamp(value)
        if value != self.value:
            self.touched = True
            self.value = value

    def watch_value(self, value: float) -> None:
        self.post_message(self.Changed(self, value))

    def action_nudge(self, steps: int) -> None:
        self._set_by_user(self.value + steps * self.step)

    def action_extreme(self, which: int) -> None:
        self._set_by_user(self.maximum if which else self.minimum)

    # Track geometry: "label  [track]  value", the track starts after a fixed label column.
    def _track(self) -> tuple[int, int]:
        start = 10
        return start, max(4, self.size.width - start - 9)

    def _value_at(self, x: int) -> float:
        start, width = self._track()
        frac = min(max((x - start) / max(1, width - 1), 0.0), 1.0)
        return self.minimum + frac * (self.maximum - self.minimum)

    def on_mouse_down(self, event: events.MouseDown) -> None:
        self.capture_mouse()
        self.focus()
        self._set_by_user(self._value_at(event.x))

    def on_mouse_move(self, event: events.MouseMove) -> None:
        if self.app.mouse_captured is self:
            self._set_by_user(self._value_at(event.x))

    def on_mouse_up(self, _: events.MouseUp) -> None:
        self.release_mouse()

    def render(self) -> Content:
        start, width = self._track()
        span = self.maximum - self.minimum or 1
        knob = round((self.value - self.minimum) / span * (width - 1))
        track = "━" * knob + "●" + "─" * (width - knob - 1)
        mark = "*" if self.touched else " "
        return Content.from_markup(
            f"{literal(self.label[: start - 2]):<{start - 2}}{mark} [$primary]{track[:knob + 1]}[/]"
            f"[$text-muted]{track[knob + 1:]}[/] [bold]{literal(self.fmt(self.value))}[/]"
        )
