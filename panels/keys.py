"""Turn-stepping keys for focusable panels whose base widget would otherwise eat Left/Right/Home/End
(DataTable moves its cursor, scroll views scroll): stepping turns must work wherever focus is."""

from __future__ import annotations

from textual.binding import Binding, BindingType

# Shown, as the app's own are: the focused panel's binding is the footer's for that key, and a hidden one
# here left the footer without ←/→ (the keys a person steps with) whenever one of these panels had focus,
# which it has from the start.
# ← and → as one "←→ Turn" entry: two entries of their own pushed "q Quit"'s label off an 80-column
# footer.
TURN_GROUP = Binding.Group("Turn", compact=True)
TURN_KEYS: list[BindingType] = [
    Binding("left", "app.step(-1)", "Prev", tooltip="previous turn", group=TURN_GROUP),
    Binding("right", "app.step(1)", "Next", tooltip="next turn", group=TURN_GROUP),
    Binding("home", "app.first", "First", show=False),
    Binding("end", "app.last", "Last", show=False),
]

# The detail tabs' strip (focused by one Tab from the manifest) takes ← and → to switch tabs: shown there as
# one "←→ Tab" entry (panels/detail_tabs.py).
TAB_GROUP = Binding.Group("Tab", compact=True)
# ↑ and ↓ as one "↑↓ Section" entry (the app's, while a detail tab is zoomed on a short terminal).
SECTION_GROUP = Binding.Group("Section", compact=True)

# Left/Right only, for a vertical scroll container: its inherited scroll_left/scroll_right bindings
# (hidden) can never scroll it (no horizontal overflow), so the keys already fell through to the app's
# step, but the footer showed the container's hidden binding for them: no ←/→ while it or a switch in
# it had focus. Home/End stay its own (scroll to the top, the bottom).
STEP_KEYS: list[BindingType] = TURN_KEYS[:2]

# Row-cursor keys of the line-drawn list panels (manifest, alerts): each implements action_cursor(delta)
# and action_page(delta); Enter is the panel's own (what selecting a row does differs).
ROW_CURSOR_KEYS: list[BindingType] = [
    Binding("up", "cursor(-1)", "Up", show=False),
    Binding("down", "cursor(1)", "Down", show=False),
    Binding("pageup", "page(-1)", "Page up", show=False),
    Binding("pagedown", "page(1)", "Page down", show=False),
]
