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
