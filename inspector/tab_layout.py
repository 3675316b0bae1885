"""Which detail tab shows, and the screen laid out for the terminal's size (InspectorApp.tabs_layout):
the tab keys (`w` again focuses the first slider), `c` and `b` (a section's content or the request
body in the Content tab), narrow terminals (stacked), short ones (a detail tab chosen by its key takes
the screen until Esc), and the footer's palette hint where there is room for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from inspector.app import InspectorApp


from textual.widgets import TabbedContent

from inspector.session_view import NARROW_BELOW
from panels.manifest import ManifestPanel
from panels.whatif import WhatIfPanel

# Rows below which the detail tabs get no room to show anything beside the overview, strips and manifest
# (stacked: 16 fixed rows, and the tab strip takes 2 of what is left; side by side: 22 fixed rows). There a
# detail tab chosen by its key takes the screen (`zoom`) until Esc brings the overview back.
SHORT_BELOW_NARROW = 24
SHORT_BELOW_WIDE = 30


class TabLayout:
    def __init__(self, app: InspectorApp) -> None:
        self.app = app
        self.short = False  # too few rows for the detail tabs beside the rest (apply_size)
        self.zoom = False  # a detail tab has the screen (short terminals only)

    def show(self, tab: str) -> None:
        app = self.app
        if tab == "tab-shadow" and not app.whatif_tabs.shadow_tab:
            app.notify("this session has no shadow rollout (Pipeline(..., shadow=...))", timeout=3)
            return
        # Showing a tab never moves focus: ←/→/Home/End keep stepping turns. A slider takes the arrows
        # only once focused (Tab or a click), and the footer then says so and how to leave (Esc).
        details = app.query_one("#details", TabbedContent)
        if tab == "tab-whatif":  # its controls skip the steps taken while it was hidden: catch up first
            app.whatif.warm()  # the tokenizer, before the first slider move needs it
            whatif = app.query_one("#whatif", WhatIfPanel)
            if details.active == tab and whatif.focus_first_slider():
                return  # `w` on the shown What-if tab: its first slider takes the arrows (Esc gives them back)
            whatif.sync()
        focused = app.focused
        if tab != details.active and focused is not None and details.get_pane(details.active) in focused.ancestors:
            # A control of the pane about to be hidden (a What-if slider) has focus: hidden, Textual gave
            # focus to the next control of that pane and the tabs showed that pane again, so `m` (or c, k,
            # a) with a slider focused only moved to the next slider. The manifest takes focus first, as
            # Esc gives it (←/→ step turns again).
            if app.manifest.display:
                app.manifest.focus()
            else:
                app.set_focus(None)
        details.active = tab
        if self.short:  # the tab has no rows beside the rest on a short terminal: it takes the screen
            self.set_zoom(True)

    def section(self, delta: int) -> None:
        # The manifest's own cursor move: it posts SectionSelected for the new row, which loads its content.
        app = self.app
        app.manifest.action_cursor(delta)
        if app.query_one("#details", TabbedContent).active != "tab-content" or app.content.show_request:
            app.content.show_request = False
            self.show("tab-content")  # the section is what Content shows: the zoomed tab follows
            app.pane.load(app.manifest.selected_section())

    def content(self) -> None:
        # The Content tab also shows the request body (`b`): `c` after `b` showed the tab with the body
        # still in it, and the section came back only with Enter on the manifest. `c` is the section's.
        app = self.app
        if app.content.show_request:
            app.content.show_request = False
            app.pane.load(app.manifest.selected_section())
        self.show("tab-content")

    def request_body(self) -> None:
        app = self.app
        app.content.show_request = True
        self.show("tab-content")
        app.pane.load(None)

    def apply_size(self, width: int, height: int) -> None:
        app = self.app
        narrow = width < NARROW_BELOW
        show_hint = width >= app.PALETTE_HINT_MIN_WIDTH
        footer = app.footer
        if footer is not None and footer.show_command_palette != show_hint:
            footer.show_command_palette = show_hint
            footer.refresh(recompose=True)  # a plain reactive: Footer does not recompose for it
        self.short = height < (SHORT_BELOW_NARROW if narrow else SHORT_BELOW_WIDE)
        root = app.query_one("#root")
        root.set_class(narrow, "narrow")
        app.query_one("#manifest", ManifestPanel).set_compact(narrow)
        if not self.short:  # grown tall enough: everything fits again, and Esc means what it did
            self.set_zoom(False)
        root.set_class(self.short and self.zoom, "zoom")

    def set_zoom(self, zoom: bool) -> None:
        app = self.app
        if zoom == self.zoom:
            return
        self.zoom = zoom
        app.query_one("#root").set_class(zoom and self.short, "zoom")
        if not zoom:  # ↑/↓ moved the hidden manifest's cursor: its row is brought into view once laid out
            app.call_after_refresh(app.manifest.show_cursor)
        app.refresh_bindings()  # the footer's "esc Back" comes and goes with it
