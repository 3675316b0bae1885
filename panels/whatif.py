"""What-if: budget and threshold sliders, a switch per OptimizeLimits gate, a provider selector,
and the re-planned turn beside the actual one.

The panel only collects settings and posts `ReplanRequested`; the app runs the re-plan in an
exclusive thread worker (a newer request cancels an older one) and hands back both traces."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from textual import events, on
from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.content import Content
from textual.message import Message
from textual.reactive import reactive
from textual.widget import MountError, Widget
from textual.widgets import Button, Label, Select, Static, Switch

from engine.trace_schema import Trace
from engine.whatif import GATE_KEYS, PROVIDERS, THRESHOLD_KEYS, Overrides
from panels.fmt import literal, tok
from panels.keys import STEP_KEYS
from panels.slider import Slider
from panels.whatif_compare import NOTE_HEAD, compare
from panels.whatif_session import session_view

SHORT = {"trim_schemas": "trim", "compact_history": "compact", "aggressive_prune": "prune"}


@dataclass
class ReplanRequested(Message):
    """The what-if's settings changed: re-plan the turn (or, with `session`, the whole session)."""
    overrides: Overrides
    session: bool = False  # session-wide what-if: re-run the whole session, not the selected turn


# Gate labels short enough for a third of the What-if pane at 80 columns (the full name is the tooltip).
GATE_SHORT = {"reorder": "reorder", "trim_schemas": "trim", "clear_tool_results": "clear", "spill": "spill",
              "llm_summary": "summary", "drop_rounds": "drop"}


class ResultText(Static):
    """The what-if answer. Says when its laid-out size changes: Textual lays a changed text out in a later
    screen refresh, and only from then on is the widget's region the new answer's."""

    class Resized(Message):
        pass

    def on_resize(self) -> None:
        self.post_message(self.Resized())


class ProviderSelect(Select[str]):
    """The provider selector. It is mounted after the first frame (WhatIfPanel.add_controls), so the app
    may close while it is being mounted: Select's own mount handler queries its overlay, which is gone by
    then, and raised NoMatches on the way out. Then there is nothing to set up."""

    def _on_mount(self, event: events.Mount) -> None:
        if not self.query("SelectOverlay"):  # (Select's handler runs next, unless prevented here)
            event.prevent_default()


# What the pane says until a re-plan: how to reach the sliders too. From the manifest a first Tab stops at
# the tab strip, where ←/→ change tabs: "w, Tab, ←" left the What-if tab for the Content tab.
HINT = "w again for the sliders (←/→ move one, Esc steps turns again); a gate or a provider re-plans this turn too"


class WhatIfPanel(VerticalScroll, can_focus=False):
    """The What-if tab's scrolling pane. Not a focus stop of its own: Tab from the tab strip went first to
    the pane (where only ↑/↓ scroll it) and a second Tab reached the first slider. Reading needs no such
    stop: ↑/↓ scroll the pane from any of its controls (none of them binds them; the pane's scroll
    bindings answer for its children), and the mouse wheel scrolls it as before."""

    BINDINGS = STEP_KEYS
    DEFAULT_CSS = """
    WhatIfPanel { height: 1fr; }
    /* No gutter and 4-cell switches (a switch is a coloured block: it sets each gate apart): at 120x40
       a third of the pane then holds "off summary", which was cut to "off summ…" (and "on  reor…"). */
    WhatIfPanel #gates { height: auto; layout: grid; grid-size: 3; grid-rows: 1; grid-gutter: 0 0; }
    WhatIfPanel .gate { height: 1; width: 1fr; }
    /* One-line switches: the default tall ones would take 6 rows of an 80x24 screen. */
    WhatIfPanel .gate Switch { border: none; height: 1; width: 4; padding: 0; }
    /* A label longer than its column is cut with an ellipsis: wrapped, its name went to a second row
       that the one-row switch hid ("on" and nothing else in a 17-column third at 120x40). */
    WhatIfPanel .gate Label { padding: 0 0 0 1; width: 1fr; text-wrap: nowrap; text-overflow: ellipsis; }
    WhatIfPanel #whatif-row { height: auto; margin-top: 1; }
    WhatIfPanel #provider { width: 1fr; }
    WhatIfPanel #reset { min-width: 9; height: 1; border: none; margin-left: 1; }
    WhatIfPanel #whatif-result { padding: 1 0 0 0; height: auto; }
    WhatIfPanel #session-row { height: 1; }
    WhatIfPanel #session { border: none; height: 1; width: 5; padding: 0; }
    WhatIfPanel #session-label { padding: 0 0 0 1; width: 1fr; text-wrap: nowrap; text-overflow: ellipsis; }
    """
    # (actual, what-if) traces for the current turn; None until the first re-plan.
    result: reactive[tuple[Trace, Trace] | None] = reactive(None)
    # Session-wide mode: the simulation report (None while running), and whether the mode is on.
    session: reactive[bool] = reactive(False, init=False)
    session_result: reactive[dict | None] = reactive(None, init=False)
    # The panel draws nothing itself (its controls do): a repaint of it behind another tab would only
    # make the compositor map the whole screen again on every step.
    trace: reactive[Trace | None] = reactive(None, repaint=False)

    class ControlsReady(Message):
        """The sliders and switches are mounted and follow the turn (the app's start-up ends with it)."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._touched_gates: set[str] = set()
        # The turn whose compaction made the cut the shown result's history carries (set with `result`
        # by the app, which has the timeline): the answer names it when the re-plan keeps that cut.
        self.compacted_at: int | None = None
        self._last = Overrides()  # last settings sent, so spurious Changed events don't re-plan
        self._gate_labels: dict[str, str] = {}
        # The sliders, switches and the provider row (~40 widgets) are mounted once the app's first
        # screen is drawn, in pieces between key presses (add_controls), or at once when the pane is
        # first shown if that comes sooner: the pane is hidden behind the Content tab when the app
        # opens, and styling and mounting them was about a fifth of the CPU to a long recording's
        # first frame (BENCHMARKS.md, Start-up); the provider row alone (a Select is a Static, an
        # overlay and an option list; Button's stylesheet is the largest of any widget's) ~10%. Until
        # then nothing is touched, so what the panel is asked (overrides) and told (trace) needs no
        # controls. The result line is composed at once (the hint says how to reach the controls).
        self._controls_wanted = False  # add_controls was called
        self._controls_ready = False  # the controls are mounted
        self._toggle_session = False  # `W` came before the controls: toggle once they are there
        self._pace: Callable[[Callable[[], None]], None] | None = None  # add_controls
        self._pieces: list[tuple[Widget, str | None, str | None]] | None = None  # still to mount
        self._piece_turn = 0  # the go-ahead a piece must carry (an older one was superseded)
        self._mounting = False  # a piece is being mounted
        self._stale = False  # a step set `trace` while the panel was hidden: `sync` catches up
        self._reveal_pending = False  # a new answer is shown and its laid-out size not seen yet
        self._shown: Content | None = None  # the re-plan's comparison shown (None: the hint, or session mode)
        self._received: int | None = None  # the turns the app holds (set_received)

    def add_controls(self, pace: Callable[[Callable[[], None]], None] | None = None) -> None:
        """Mount the sliders and switches (once; they are there a moment later). They go in small
        pieces: with `pace` (the app's, at start-up) each piece waits for its go-ahead, so a person's
        first key presses never queue behind the whole set; without it (the pane is being shown, or
        `W`) the rest go at once."""
        if not self._controls_wanted:
            self._controls_wanted = True
            self._pace = pace
            self._next_piece()
        elif pace is None and self._pace is not None:  # wanted now: the rest are not paced any more
            self._pace = None
            if not self._mounting:  # (else the piece being mounted goes on with the next at once)
                self._next_piece()  # supersedes the go-ahead still awaited

    def _next_piece(self) -> None:
        self._piece_turn += 1
        turn = self._piece_turn
        if self._pace is None:
            self.call_later(self._mount_piece, turn)
        else:
            # The go-ahead comes from the app's loop: the panel's own queue stays free meanwhile (a Show,
            # which makes the rest urgent, must not wait behind it).
            def go() -> None:
                self.call_later(self._mount_piece, turn)

            self._pace(go)

    def _control_pieces(self) -> list[tuple[Widget, str | None, str | None]]:
        """(widget, before, after) in mounting order: the provider row above the result line, the sliders
        and the gates above the provider row, the session switch below it."""
        row = Horizontal(ProviderSelect([(p, p) for p in PROVIDERS], prompt="provider (as recorded)",
                                        id="provider", compact=True),
                         Button("Reset", id="reset", variant="default"), id="whatif-row")
        sliders = [Slider("budget", 4000, 200_000, 1000, 32000, fmt=lambda v: tok(v), id="budget")]
        sliders += [Slider(SHORT[key], 0.30, 1.00, 0.01, 0.6, fmt=lambda v: f"{v:.2f}", id=f"th-{key}")
                    for key in THRESHOLD_KEYS]
        gates = Horizontal(*(Horizontal(Switch(value=True, id=f"gate-{gate}", animate=False, tooltip=f"gate {gate}"),
                                        Label(GATE_SHORT[gate], id=f"gate-label-{gate}"), classes="gate")
                             for gate in GATE_KEYS), id="gates")
        session = Horizontal(Switch(value=False, id="session", animate=False),
                             Label("session-wide: re-run the session, priced", id="session-label"),
                             id="session-row")
        return [(row, "#whatif-result", None), *((w, "#whatif-row", None) for w in [*sliders, gates]),
                (session, None, "#whatif-row")]

    async def _mount_piece(self, turn: int) -> None:
        if turn != self._piece_turn or self._mounting or not self.is_attached:
            return  # superseded (the rest became urgent), or the app closed
        if self._pieces is None:
            self._pieces = self._control_pieces()
        if self._pieces:
            widget, before, after = self._pieces.pop(0)
            self._mounting = True
            try:
                await self.mount(widget, before=before, after=after)
            except MountError:  # the app closed meanwhile
                return
            finally:
                self._mounting = False
            if self._pieces:
                self._next_piece()
                return
        if not self.is_attached or not self.display:  # (`display` is False once the app prunes the panel)
            return
        self._controls_ready = True
        self.watch_trace(self.trace)  # the turn shown meanwhile: untouched controls follow it
        if self._toggle_session:
            self.toggle_session()
        self.post_message(self.ControlsReady())

    @property
    def controls_ready(self) -> bool:
        """The sliders and switches are mounted (ControlsReady was posted)."""
        return self._controls_ready

    def toggle_session(self) -> None:
        """Session-wide mode on or off, as the `session` switch does (`W`)."""
        if self._controls_ready:
            self.query_one("#session", Switch).toggle()
        else:
            self._toggle_session = True
            self.add_controls()

    def compose(self) -> ComposeResult:
        # (the provider row, the sliders, the gates and the session row: add_controls)
        # The answer is scrolled into view when it changes and too little of it shows (at 80x24 this
        # pane has ~6 rows): see _reveal_result.
        yield ResultText(HINT, id="whatif-result")

    def overrides(self) -> Overrides:
        """Only what the person touched; everything else stays as recorded."""
        if not self._controls_ready:
            return Overrides()  # no controls yet: nothing touched
        recorded = self.trace["provider"] if self.trace is not None else None
        budget = self.query_one("#budget", Slider)
        thresholds = {k: round(s.value, 2) for k in THRESHOLD_KEYS
                      if (s := self.query_one(f"#th-{k}", Slider)).touched}
        gates = {g: sw.value for g in sorted(self._touched_gates)
                 if (sw := self.query_one(f"#gate-{g}", Switch)).value != self._recorded_gate(g)}
        provider = self.query_one("#provider", Select).value
        chosen = provider if isinstance(provider, str) and provider != recorded else None
        return Overrides(window=int(budget.value) if budget.touched else None,
                         thresholds=thresholds or None, gates=gates or None, provider=chosen)

    def _recorded_gate(self, gate: str) -> bool:
        """A gate is on in the recording unless the trace lists it as skipped because it was off."""
        skipped = self.trace["skipped"] if self.trace is not None else []
        return not any(s.get("step") == gate and "off" in s.get("reason", "") for s in skipped)

    def watch_trace(self, trace: Trace | None) -> None:
        """New turn: untouched controls follow the recorded settings, without triggering a re-plan.
        Behind another tab this waits until the panel is shown (`sync`): every step set five sliders
        and six switches nobody could see. `overrides()` reads the trace, not the controls' values,
        for what was recorded, so a re-plan asked for meanwhile is the same."""
        if trace is None:
            return
        if not self._controls_ready:  # (the app adds them once its first screen is drawn)
            return
        if self._hidden():
            self._stale = True
            return
        self._follow_recorded(trace)

    def _follow_recorded(self, trace: Trace) -> None:
        self._stale = False
        budget = self.query_one("#budget", Slider)
        if not budget.touched:
            budget.set_quietly(trace["limit"])
        for k in THRESHOLD_KEYS:
            s = self.query_one(f"#th-{k}", Slider)
            if not s.touched:
                s.set_quietly(trace["thresholds"][k])
        self._sync_gates()
        if self.overrides().is_empty():
            self.result = None

    def _hidden(self) -> bool:
        """Behind another tab: a tab's pane (an ancestor) is not displayed."""
        return any(not node.display for node in self.ancestors_with_self if isinstance(node, Widget))

    def sync(self) -> None:
        """Bring the controls up to the current turn if a step left them behind while hidden; the app
        calls it before showing the tab, so the tab's first frame already shows this turn's settings."""
        if self._stale and self._controls_ready and self.trace is not None:
            self._follow_recorded(self.trace)

    def focus_first_slider(self) -> bool:
        """Focus the budget slider (the app's `w` while this tab shows); False when the controls are not
        mounted yet or a slider already has focus."""
        if not self._controls_ready or isinstance(self.app.focused, Slider):
            return False
        self.query_one("#budget", Slider).focus()
        return True

    def on_show(self) -> None:
        self.add_controls()
        self.sync()  # shown some other way than the app's tab switch (a click on the tab)

    def _label_gates(self) -> None:
        """Spell the state out: a switch's on/off is colour only, which not everyone can see."""
        for g in GATE_KEYS:
            on = self.query_one(f"#gate-{g}", Switch).value
            mark = "*" if g in self._touched_gates else ""
            # State first, then a short name: in a narrow column a cut keeps what matters.
            text = f"[b]{'on ' if on else 'off'}[/b] {GATE_SHORT[g]}{mark}"
            if self._gate_labels.get(g) != text:  # stepping turns rarely changes a gate: skip the redraw
                self._gate_labels[g] = text
                self.query_one(f"#gate-label-{g}", Label).update(text, layout=False)

    def _sync_gates(self) -> None:
        self._label_gates()
        for g in GATE_KEYS:
            if g in self._touched_gates:
                continue
            sw = self.query_one(f"#gate-{g}", Switch)
            with sw.prevent(Switch.Changed):
                sw.value = self._recorded_gate(g)
        self._label_gates()

    def watch_result(self, result: tuple[Trace, Trace] | None) -> None:
        if self.session:
            return
        text = compare(*result, self.compacted_at) if result else HINT
        shown = self.query_one("#whatif-result", Static)
        shown.update(text)
        self._shown = text if isinstance(text, Content) else None
        self._reveal_pending = bool(result)
        if result:
            # After the next refresh, and again once the answer is laid out (ResultText.Resized): the
            # refresh that runs this callback can come before the screen has laid out the new text (a
            # refresh already due, for the slider say, runs its callbacks ahead of the layout the text
            # asked for), and then the old text's region was measured, the pane scrolled to the wrong
            # place and the answer left cut (the test_hardening 80x24 flake: 1 run in 4).
            self.call_after_refresh(self._reveal_result)

    @on(ResultText.Resized)
    def _result_laid_out(self) -> None:
        if self._reveal_pending and not self.session:
            self._reveal_pending = False
            self._reveal_result()

    def _reveal_result(self) -> None:
        """Scroll the answer into view only when too little of it shows (a short pane): with room to spare
        the sliders stay where the person is adjusting them."""
        shown = self.query_one("#whatif-result", Static)
        note = self._note_rows(shown.size.width)
        if note is not None:
            # "tokens sent ±0" and the note under it that says why, in view together: at 80x24 (a pane of
            # ~6 rows) the answer's top showed the tokens sent and left the note below the fold.
            start, end = note
            y = shown.virtual_region.y + shown.styles.padding.top  # the answer's first row, in the pane
            top, bottom, rows = y + start - 1, y + end, self.scrollable_content_region.height
            if not self.scroll_y <= top < bottom <= self.scroll_y + rows:  # not all in view: the note's end
                # at the pane's foot, as much above it as fits (the tokens sent row at least)
                self.scroll_to(y=max(0, min(top, bottom - rows)), animate=False, immediate=True)
            return
        visible = self.region.intersection(shown.region).height
        if visible < min(shown.region.height, 8):
            self.scroll_to_widget(shown, animate=False, top=True)

    def _note_rows(self, width: int) -> tuple[int, int] | None:
        """The rows of the answer (laid out `width` cells wide) the carried-cut note takes, from its first
        to the one after its last; None when the answer has no such note."""
        if self._shown is None or width <= 0:
            return None
        lines = [line.plain for line in self._shown.wrap(width)]
        start = next((i for i, line in enumerate(lines) if line.startswith(NOTE_HEAD)), None)
        if start is None:
            return None
        end = next((i for i in range(start, len(lines)) if not lines[i].strip()), len(lines))
        return start, end

    def watch_session(self, session: bool) -> None:
        # The comparison goes first in session mode, so a short terminal shows it without scrolling.
        result = self.query_one("#whatif-result", Static)
        if session:
            self._reveal_pending = False
            self.move_child(result, before=0)
            self.session_result = None
            self.watch_session_result(None)
        else:
            self.move_child(result, after=self.query_one("#session-row"))
            self.watch_result(self.result)
        self.scroll_home(animate=False)

    def watch_session_result(self, report: dict | None) -> None:
        if not self.session:
            return
        static = self.query_one("#whatif-result", Static)
        if report is None:
            static.update("[$text-muted]simulating the whole session under these settings…[/]")
        else:
            static.update(session_view(report, self.scrollable_content_region.width or 60, self._received))

    def set_received(self, turns: int) -> None:
        """The turns received so far (a live agent's go on arriving): a session-wide result shown says
        how many arrived after its run."""
        self._received = turns
        report = self.session_result
        if self.session and report is not None and turns > int(report.get("turns") or turns):
            self.watch_session_result(report)

    def show_error(self, message: str) -> None:
        """Why the what-if has no answer (a damaged recording, an unknown model), where the answer goes."""
        self.query_one("#whatif-result", Static).update(f"[$error]{literal(message)}[/]")

    def _session_changed(self, value: bool) -> None:
        self.session = value
        self._last = self.overrides()
        self.post_message(ReplanRequested(self._last, session=self.session))

    @on(Switch.Changed)
    def _gate_changed(self, event: Switch.Changed) -> None:
        if event.switch.id == "session":
            self._session_changed(event.value)
            return
        self._touched_gates.add((event.switch.id or "").removeprefix("gate-"))
        self._label_gates()
        self._settings_changed()

    @on(Slider.Changed)
    @on(Select.Changed)
    def _settings_changed(self) -> None:
        overrides = self.overrides()
        if overrides != self._last:
            self._last = overrides
            if self.session:
                self.session_result = None  # "simulating…" until the newest settings come back
            self.post_message(ReplanRequested(overrides, session=self.session))

    @on(Button.Pressed, "#reset")
    def reset(self) -> None:
        for s in self.query(Slider):
            s.touched = False
        self._touched_gates.clear()
        with self.query_one("#provider", Select).prevent(Select.Changed):
            self.query_one("#provider", Select).clear()
        self.watch_trace(self.trace)
        for s in self.query(Slider):
            s.refresh()
        self._settings_changed()
