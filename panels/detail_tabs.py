"""The detail panels' TabbedContent, whose tab strip says in the footer what ← and → do there.

Textual's Tabs binds ← and → (previous / next tab) hidden, so with the strip focused (one Tab from the
manifest) the footer showed nothing for the arrows: not "←→ Turn" (no longer true there), nor what they
did. TabbedContent builds its strip itself, so the shown bindings live here, one level up: priority
bindings (a priority binding wins the footer's slot for its key over the focused strip's hidden one),
enabled only while the strip has focus (check_action), so everywhere else in the tabs (the content
viewer, a slider, the alerts table) the arrows stay what they are there."""

from __future__ import annotations

from typing import ClassVar

from textual.binding import Binding, BindingType
from textual.widgets import TabbedContent, Tabs

from panels.keys import TAB_GROUP


class DetailTabs(TabbedContent):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("left", "previous_tab", "Previous tab", tooltip="previous detail tab", group=TAB_GROUP,
                priority=True),
        Binding("right", "next_tab", "Next tab", tooltip="next detail tab", group=TAB_GROUP, priority=True),
    ]

    def _strip(self) -> Tabs:
        return self.query_one(Tabs)  # (the strip is the only Tabs: panes hold no tabs of their own)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("previous_tab", "next_tab"):
            # False, not None: the key then goes on to the next binding (the strip's own, a slider's, the
            # app's step) and the footer shows that one. Focus changes refresh the footer's bindings.
            return self.is_mounted and self._strip().has_focus
        return True

    def action_previous_tab(self) -> None:
        self._strip().action_previous_tab()

    def action_next_tab(self) -> None:
        self._strip().action_next_tab()
