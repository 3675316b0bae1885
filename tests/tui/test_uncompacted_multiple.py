"""The pressure head's uncompacted figure reads as a multiple of the window (demo27).

A new-user pass read the live demo's "uncompacted 15.52" beside "raw 0.37" as a pressure gone wrong. The
figure is right (the whole conversation over the window; the demo's grep of every `def` in the
repository is 13 windows on its own, and the engine sends it spilled), so the head now says what it
is: "uncompacted 15.5× the window", shortened to "× window" and then "×" as the panel narrows."""

from __future__ import annotations

import pytest

from inspector.app import InspectorApp
from inspector.sources.file import FileSource
from panels.pressure import PressurePanel
from tests.tui.conftest import settle
from tests.tui.test_hardening import DEMO


@pytest.mark.parametrize(
    "size, says",
    [((80, 24), "uncompacted 7.77×"), ((120, 40), "uncompacted 7.77× window"),
     ((200, 60), "uncompacted 7.77× the window")],
)  # fmt: skip
async def test_the_uncompacted_figure_says_it_is_a_multiple_of_the_window(
    size: tuple[int, int], says: str
) -> None:
    # Turn 18 of the recorded demo: the grep output of turn 17 joined the conversation (7.77 windows
    # of it), sent spilled (raw 0.13).
    app = InspectorApp(FileSource(DEMO), start_turn=18)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        panel = app.query_one("#pressure", PressurePanel)
        assert panel.trace is not None and panel.trace["pressure"]["raw_history"] == 7.7674
        head = panel.render_line(0).text.rstrip()
        assert head.startswith("raw 0.13  pred") and says in head, head
        # The longest wording that fits, and only it.
        assert head.split("  ")[2] == says, head
        assert len(head) <= panel.size.width and "┃" in panel.render_line(1).text  # one line, bar below


def test_the_multiple_keeps_four_characters_at_most() -> None:
    from panels.pressure import times_window, uncompacted

    assert [times_window(x) for x in (0.954, 1.5, 9.996, 15.5501, 91.43, 99.96, 152.4, 999.4)] == [
        "0.95", "1.50", "10.0", "15.6", "91.4", "100", "152", "999"
    ]  # fmt: skip
    assert uncompacted(None, 0.3, 8, None, 80) == (None, "predictive")
    assert uncompacted(0.302, 0.3, 8, None, 80) == (None, "predictive")  # nothing compacted away
    assert uncompacted(15.5501, 0.37, 8, None, 38) == ("uncompacted 15.6×", "predictive")
