"""The footer of key bindings, composed again only when what it shows changes, and showing whole keys only.

Textual's Footer recomposes its keys on every "bindings updated" signal of its screen. While the app
starts, focus moves and the tabs settle, and that signal comes three times with the same keys each time:
every recompose removes and re-creates the ~13 key widgets and restyles each one (~30 ms of CPU each on
this machine, two of the three spent before the first complete screen; BENCHMARKS.md, Start-up).
What is compared is what the keys show, not the bindings: focus moving between widgets whose bindings
differ only in what the footer never shows (hidden ones, or `app.step(1)` where the app has `step(1)`,
both shown as "→") composes nothing. So the keys are composed with the footer itself, from the screen's
bindings before anything has focus: Textual's first recompose, asked for once the app has focus, ran on
the footer's queue after the first turn's frames, one recompose (~30 ms) before the screen was complete,
and now finds the same keys on screen.

Textual's Footer cuts its keys at its right edge wherever that falls: a narrow terminal showed a key
without its label ("q" alone in the bottom-right cell at 55 columns, "w W" at 40, "q Qui" at 59), which
reads as a stray letter. Keys past the edge (or under the right-docked "^p palette" hint) are hidden
whole instead; `?` lists them all. (Under the hint, a key drawn beneath it showed one letter in the
row's last cell, the hint's compact margin, which the hint does not paint: "▏^p palettei".)
"""

from __future__ import annotations

from collections.abc import Hashable

from textual.app import ComposeResult
from textual.containers import HorizontalGroup
from textual.events import Resize
from textual.widgets import Footer, Label


class KeysFooter(Footer):
    """Footer that skips a recompose when the keys it would show are the ones it shows, and hides keys
    it has no room for rather than cutting them."""

    def __init__(self, *, compact: bool = False) -> None:
        super().__init__(compact=compact)
        self._shown: Hashable | None = None  # what the keys on screen were composed from
        self._fit_tries = 0  # fit_keys waiting for new keys to be laid out
        self._spans: list[tuple[int, int]] | None = None  # each key's columns in the row (fit_keys)

    def compose(self) -> ComposeResult:
        # Textual's Footer composes nothing until the screen first signals its bindings; they can be read
        # already (the footer is attached to its screen when it composes), and shown keys are never
        # composed twice (recompose), so the keys on the first complete screen are these.
        self.set_reactive(Footer._bindings_ready, True)
        self._shown = self._what_it_shows()
        self.call_after_refresh(self.fit_keys)
        return super().compose()

    def _what_it_shows(self) -> Hashable:
        """Everything Footer.compose puts on screen: for each key shown, in order, its key, how it is
        displayed, its description, enabled state, tooltip and group (a group's keys are shown together
        when it has more than one action), the command palette's key, and the footer's own settings.
        An action is compared only as Footer groups by it, by the order it first comes in: a key runs
        its binding through the app (FooterKey simulates the key), not the action it was composed with."""
        app = self.app
        actions: dict[str, int] = {}
        keys = tuple((actions.setdefault(binding.action, len(actions)), binding.key, app.get_key_display(binding),
                      binding.description, enabled, tooltip, binding.group)
                     for _node, binding, enabled, tooltip in self.screen.active_bindings.values() if binding.show)
        palette = None
        if self.show_command_palette and app.ENABLE_COMMAND_PALETTE:
            found = self.screen.active_bindings.get(app.COMMAND_PALETTE_BINDING)
            if found is not None:
                _node, binding, enabled, _tooltip = found
                palette = (binding.key, app.get_key_display(binding), binding.description, enabled,
                           binding.tooltip)
        return keys, palette, self.combine_groups

    async def recompose(self) -> None:
        if not self.is_attached:
            return
        shown = self._what_it_shows()
        if shown == self._shown and self.children:
            return
        self._shown = shown
        self._spans = None  # new keys, all shown: their places are read again
        await super().recompose()
        self.call_after_refresh(self.fit_keys)  # the new keys' places are known once laid out

    def on_resize(self, _event: Resize) -> None:
        self.call_after_refresh(self.fit_keys)

    def fit_keys(self) -> None:
        """Show the keys that fit whole left of the edge (or the palette hint), in order; hide the rest.

        A key's place in the row does not depend on the footer's width (they are laid out from the left,
        the hint is docked): the places are read once per composition, while every key is shown (a hidden
        widget has no region), and each resize compares them with the new edge."""
        if not self.is_attached:
            return
        children = list(self.children)
        keys = [c for c in children if not c.has_class("-command-palette")]
        origin = self.content_region.x - int(self.scroll_x)
        if self._spans is None or len(self._spans) != len(keys):
            if any(not c.region for c in keys):  # keys just composed are laid out a refresh or two later
                if self._fit_tries < 20:
                    self._fit_tries += 1
                    self.call_after_refresh(self.fit_keys)
                return
            self._spans = [(c.region.x - origin, c.region.right - origin) for c in keys]
        self._fit_tries = 0
        right = self.content_region.right - origin
        for child in children:
            if child.has_class("-command-palette") and child.region:
                right = min(right, child.region.x - origin)
        fits = [end <= right for _start, end in self._spans]
        for i, child in enumerate(keys):
            # A group's keys ("←→") and its label ("Turn") go together: keys without the label say nothing.
            # (Footer composes a group as a HorizontalGroup of keys, then a Label: its classes are private.)
            if isinstance(child, Label) and i and isinstance(keys[i - 1], HorizontalGroup) and not fits[i]:
                fits[i - 1] = False
        cut = False
        for child, fit in zip(keys, fits, strict=True):
            cut = cut or not fit  # in order: a later, shorter key never shows past a hidden one
            if child.visible == cut:
                child.visible = not cut
