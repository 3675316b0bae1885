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


def multiple(x: float) -> str:
    """A multiple of the window as the head prints it, worked out here (not by the panel's own code):
    two decimals below 10, one from 10 on."""
    return f"{x:.2f}" if round(x, 2) < 10 else f"{x:.1f}"


@pytest.mark.parametrize(
    "size, wording",
    [((80, 24), "uncompacted {}×"), ((120, 40), "uncompacted {}× window"),
     ((200, 60), "uncompacted {}× the window")], ids=["80x24", "120x40", "200x60"],
)  # fmt: skip
async def test_the_uncompacted_figure_says_it_is_a_multiple_of_the_window(
    size: tuple[int, int], wording: str
) -> None:
    # Turn 18 of the recorded demo: the grep output of turn 17 joined the conversation (about 8 windows
    # of it), sent spilled (raw 0.13). The figures are the recording's (re-recording the demo moved
    # 7.77 to 8.22): the head must show what the trace holds.
    pressure = FileSource(DEMO).full_trace(18)["pressure"]
    raw, raw_history = pressure["raw"], pressure["raw_history"]
    assert raw_history is not None and raw_history > 2 * raw  # still a turn whose history was compacted away
    says = wording.format(multiple(raw_history))
    app = InspectorApp(FileSource(DEMO), start_turn=18)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        panel = app.query_one("#pressure", PressurePanel)
        assert panel.trace is not None and panel.trace["pressure"]["raw_history"] == raw_history
        head = panel.render_line(0).text.rstrip()
        assert head.startswith(f"raw {raw:.2f}  pred") and says in head, head
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
    assert [multiple(x) for x in (7.7674, 8.2169, 9.996, 10.2515, 10.856)] == [
        times_window(x) for x in (7.7674, 8.2169, 9.996, 10.2515, 10.856)
    ]  # the test's own reading agrees with the panel's on figures the demo recordings held
