"""The footer of key bindings, composed again only when what it shows changes.

Textual's Footer recomposes its keys on every "bindings updated" signal of its screen. While the app
starts, focus moves and the tabs settle, and that signal comes three times with the same keys each time:
every recompose removes and re-creates the ~13 key widgets and restyles each one (~30 ms of CPU each on
this machine, two of the three spent before the first complete screen; BENCHMARKS.md, Start-up).
"""

from __future__ import annotations

from collections.abc import Hashable

from textual.widgets import Footer


class KeysFooter(Footer):
    """Footer that skips a recompose when the keys it would show are the ones it shows."""

    def __init__(self, *, compact: bool = False) -> None:
        super().__init__(compact=compact)
        self._shown: Hashable | None = None  # what the keys on screen were composed from

    def _what_it_shows(self) -> Hashable:
        """Everything Footer.compose reads that can change: the screen's active bindings with their
        enabled state and tooltip (a Binding is a frozen dataclass: equal bindings compare equal; the
        hidden ones too, as the command palette's key is one), and the footer's own settings."""
        bindings = tuple((key, binding, enabled, tooltip)
                         for key, (_node, binding, enabled, tooltip) in self.screen.active_bindings.items())
        return bindings, self.app.ENABLE_COMMAND_PALETTE, self.show_command_palette, self.combine_groups, \
            self._bindings_ready

    async def recompose(self) -> None:
        if not self.is_attached:
            return
        shown = self._what_it_shows()
        if shown == self._shown and self.children:
            return
        self._shown = shown
        await super().recompose()
