"""The What-if pane's switch labels stay on their one row at every width: a label too long for its
column is cut, never wrapped onto a second row that the row's height hides."""

from __future__ import annotations

import pytest
from textual.widgets import Label

from engine.whatif import GATE_KEYS
from inspector.app import InspectorApp
from inspector.sources.synthetic import SyntheticSource
from panels.whatif import GATE_SHORT
from tests.tui.conftest import settle


def _row(label: Label) -> str:
    """What the label's one visible row shows."""
    return label.render_line(0).text.strip()


@pytest.mark.parametrize("size", [(80, 24), (100, 30), (120, 40), (200, 60)])
async def test_every_switch_shows_its_name_on_its_row(size: tuple[int, int]) -> None:
    # At 120x40 the pane's thirds are 17 columns: "on  reorder" and "on  summary" wrapped after "on", so
    # those two switches read "on" with no name (and the session switch lost "price it").
    app = InspectorApp(SyntheticSource(40), start_turn=30)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        await pilot.press("w")
        await settle(pilot)
        for gate in GATE_KEYS:
            label = app.query_one(f"#gate-label-{gate}", Label)
            shown = _row(label)
            name = GATE_SHORT[gate]
            # The whole name, or as much as fits with an ellipsis, after the state.
            state, _, rest = shown.partition(" ")
            assert state in ("on", "off"), (gate, shown)
            rest = rest.strip()
            assert rest == name or (rest.endswith("…") and name.startswith(rest[:-1]) and len(rest) >= 4), \
                (gate, shown)
            # Whole from 120 columns: there "reor…" and "summ…" were cut (4-cell switches, no gutter).
            assert rest == name or size[0] < 120, (gate, shown)
        session = _row(app.query_one("#session-label", Label))
        assert session.startswith("session-wide") and (session.endswith("priced") or session.endswith("…")), \
            session
        # Whole from 100 columns: "session-wide: re-run the whole session an…" at 120x40 said not what it did.
        assert session == "session-wide: re-run the session, priced" or size[0] < 100, session
