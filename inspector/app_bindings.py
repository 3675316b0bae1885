"""InspectorApp's key bindings (InspectorApp.BINDINGS), in the order the footer shows them: its keys, what
each does (its action, on the app), the footer's label and the tooltip that help and the command
palette list. Which ones show where is the app's (check_action)."""

from __future__ import annotations

from textual.binding import Binding, BindingType

from panels.keys import SECTION_GROUP, TURN_GROUP

APP_BINDINGS: list[BindingType] = [
    # First, so that the footer (in binding order) shows it even at 40 columns while a tab is zoomed;
    # hidden otherwise (check_action), when Esc goes on to focus the manifest.
    Binding("escape", "unzoom", "Back", tooltip="short terminal: leave the detail tab for the overview"),
    Binding("left", "step(-1)", "Prev", tooltip="previous turn", group=TURN_GROUP),
    Binding("right", "step(1)", "Next", tooltip="next turn", group=TURN_GROUP),
    Binding("home", "first", "First", show=False, tooltip="first turn"),
    Binding("end", "last", "Last", show=False, tooltip="last turn (and follow the newest, live)"),
    # While a tab is zoomed the manifest is hidden (and loses focus), so ↑/↓ had nothing to move: here
    # they move its selection and the Content tab shows the section (hidden otherwise: check_action).
    Binding(
        "up",
        "section(-1)",
        "Prev section",
        tooltip="short terminal, tab zoomed: the previous section",
        group=SECTION_GROUP,
    ),
    Binding(
        "down",
        "section(1)",
        "Next section",
        tooltip="short terminal, tab zoomed: the next section",
        group=SECTION_GROUP,
    ),
    Binding("g", "goto", "Go to", tooltip="go to turn N"),
    # n/N are the interesting turns': the search's next/previous are f/F (shown in its bar and in help).
    Binding(
        "f",
        "find(1)",
        "Next match",
        show=False,
        tooltip="next turn the searched text enters or leaves the prompt",
    ),
    Binding(
        "F",
        "find(-1)",
        "Previous match",
        show=False,
        tooltip="previous turn the searched text enters or leaves the prompt",
    ),
    Binding("space", "play", "Play", tooltip="play / pause"),
    Binding("plus,equals_sign", "speed(1)", "Faster", show=False, tooltip="play faster"),
    Binding("minus", "speed(-1)", "Slower", show=False, tooltip="play slower"),
    Binding(
        "n,right_square_bracket",
        "next_interesting",
        "Next ★",
        tooltip="next interesting turn (tier change, cache break, alert)",
    ),
    Binding(
        "N,left_square_bracket", "prev_interesting", "Prev ★", show=False, tooltip="previous interesting turn"
    ),
    Binding("c", "content", "Content", show=False, tooltip="show the Content tab"),
    Binding(
        "w", "tab('tab-whatif')", "What-if", tooltip="show the What-if tab (again: focus its first slider)"
    ),
    Binding(
        "W",
        "session_whatif",
        "Session what-if",
        show=False,
        tooltip="session-wide what-if: re-run and price the whole session (toggle)",
    ),
    Binding("k", "tab('tab-skipped')", "Skipped", show=False, tooltip="show the Skipped tab"),
    Binding("a", "tab('tab-alerts')", "Alerts", show=False, tooltip="show the Alerts tab"),
    Binding(
        "r",
        "tab('tab-shadow')",
        "Shadow",
        show=False,
        tooltip="shadow rollout: the candidate configuration beside the live one (when recorded)",
    ),
    Binding(
        "m",
        "tab('tab-why')",
        "Why miss",
        show=False,
        tooltip="why the cache missed: this request against the previous one",
    ),
    Binding("b", "request_body", "Request", show=False, tooltip="show the serialized request body"),
    Binding("s", "save", "Save", tooltip="save the received turns (live)"),
    # `s` in a replay (check_action hides the one above there): it did nothing, silently. No tooltip:
    # help and the palette list `s` once, by the binding above.
    Binding("s", "save_replay", show=False),
    # While a search runs Esc stops it; once it has answered, Esc puts the search away (check_action:
    # with no search, Esc goes on to focus the manifest).
    Binding("escape", "search_escape", "Stop search", show=False),
    Binding("escape", "focus_manifest", "Sections", show=False, tooltip="focus the section manifest"),
    Binding("question_mark", "help", "Help", tooltip="this help"),
    Binding("q", "quit", "Quit", tooltip="quit"),
    # After Quit: the footer shows keys in this order and hides those it has no room for, and an 80-column
    # live footer (s Save) has none left for it; Quit stays. `?` and the palette list it.
    Binding(
        "slash",
        "search",
        "Find",
        key_display="/",
        tooltip="search what each turn sent: the turns a text enters or leaves the prompt",
    ),
]
