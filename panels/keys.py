"""Turn-stepping keys for focusable panels whose base widget would otherwise eat Left/Right/Home/End
(DataTable moves its cursor, scroll views scroll): stepping turns must work wherever focus is."""

from __future__ import annotations

from textual.binding import Binding, BindingType

TURN_KEYS: list[BindingType] = [
    Binding("left", "app.step(-1)", "Prev turn", show=False),
    Binding("right", "app.step(1)", "Next turn", show=False),
    Binding("home", "app.first", "First", show=False),
    Binding("end", "app.last", "Last", show=False),
]

# Row-cursor keys of the line-drawn list panels (manifest, alerts): each implements action_cursor(delta)
# and action_page(delta); Enter is the panel's own (what selecting a row does differs).
ROW_CURSOR_KEYS: list[BindingType] = [
    Binding("up", "cursor(-1)", "Up", show=False),
    Binding("down", "cursor(1)", "Down", show=False),
    Binding("pageup", "page(-1)", "Page up", show=False),
    Binding("pagedown", "page(1)", "Page down", show=False),
]
