"""The footer composes its keys with itself at start-up and never again for the same keys shown (Textual's
recomposes on each of the three "bindings updated" signals of the start, and on every focus change), and
still follows a real change of the keys."""

from __future__ import annotations

import pytest
from textual.widgets import Footer
from textual.widgets._footer import FooterKey, FooterLabel

from inspector.app import InspectorApp
from inspector.sources.synthetic import SyntheticSource
from panels.slider import Slider
from tests.tui.conftest import settle


def _shown(app: InspectorApp) -> list[str]:
    return [f"{k.key}:{k.description}" for k in app.query_one(Footer).query(FooterKey)]


async def test_the_keys_are_composed_once_at_start_up_and_follow_a_change(monkeypatch: pytest.MonkeyPatch) -> None:
    composed: list[str] = []
    original = Footer.recompose

    async def counting(self: Footer) -> None:
        composed.append(type(self).__name__)
        await original(self)

    monkeypatch.setattr(Footer, "recompose", counting)
    app = InspectorApp(SyntheticSource(40))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert composed == []  # composed with the footer, before focus (three recomposes, then one)
        keys = _shown(app)
        assert "g:Go to" in keys and "q:Quit" in keys
        await pilot.press("w")
        await settle(pilot)
        app.query_one("#budget", Slider).focus()  # a slider's own key joins the footer
        await settle(pilot)
        assert any(k.startswith("escape:Done") for k in _shown(app)) and len(composed) == 1
        await pilot.press("escape")  # back to the manifest: the keys as they were
        await settle(pilot)
        assert _shown(app) == keys


async def test_a_focus_change_that_shows_the_same_keys_composes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    # The manifest's ←/→ are `app.step(...)`, the content's and the app's `step(...)`; each has hidden keys
    # of its own (↑/↓, PgUp/PgDn): the footer shows the same "←→ Turn" and the same keys for all of them,
    # and recomposed its ~13 key widgets on each such focus change (and once more at start-up, ~30 ms).
    composed: list[str] = []
    original = Footer.recompose

    async def counting(self: Footer) -> None:
        composed.append(type(self).__name__)
        await original(self)

    monkeypatch.setattr(Footer, "recompose", counting)
    app = InspectorApp(SyntheticSource(40))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        keys = _shown(app)
        footer = app.query_one(Footer)
        widgets = list(footer.children)
        for target in ("#content-body", "#manifest", "#content-body", "#manifest"):
            app.query_one(target).focus()
            await settle(pilot)
            assert _shown(app) == keys, target
        app.set_focus(None)  # the app's own bindings only: the same keys again
        await settle(pilot)
        assert _shown(app) == keys
        assert composed == [] and list(footer.children) == widgets  # (old code: 1 at start, 1 a change)


@pytest.mark.parametrize("tab", ["c", "w", "a"])
async def test_the_stepping_keys_are_in_the_footer_wherever_they_step(tab: str) -> None:
    """←/→ step turns from every focus stop but a slider (there they move it, and the footer says so)
    and the tab strip (there they switch tabs): the footer showed neither key while the manifest (the
    start's focus), the content, the alerts or the What-if pane and its switches had focus, because a
    hidden binding of the focused widget (or of the What-if pane's scroll container) stood for the key."""
    from textual.widgets import Tabs

    app = InspectorApp(SyntheticSource(40))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press(tab)
        await settle(pilot)
        seen: set[str] = set()
        visited: list[object] = []
        for _ in range(20):  # every focus stop of this tab, Tab by Tab, once round
            focused = app.focused
            assert focused is not None
            if focused in visited:
                break
            visited.append(focused)
            seen.add(type(focused).__name__)
            keys = _shown(app)
            footer = app.query_one(Footer)
            actions = {k.key: k.action for k in footer.query(FooterKey)}
            if isinstance(focused, Slider):
                assert "left:Less" in keys and "right:More" in keys
            elif not isinstance(focused, Tabs):
                # one "←→ Turn" entry: the two keys grouped under the group's label
                assert actions.get("left", "").endswith("step(-1)"), (type(focused).__name__, keys)
                assert actions.get("right", "").endswith("step(1)"), (type(focused).__name__, keys)
                assert "Turn" in [str(label.render()) for label in footer.query(FooterLabel)]
                before = app.index
                await pilot.press("left")  # and it does what the footer says
                await settle(pilot)
                assert app.index == before - 1, type(focused).__name__
                await pilot.press("right")
                await settle(pilot)
                assert app.index == before
            await pilot.press("tab")
            await settle(pilot)
        expected = {"c": {"ContentBody"}, "w": {"Switch", "Slider"}, "a": {"AlertsPanel"}}[tab]
        assert expected | {"ManifestPanel"} <= seen


def _footer_row(app: InspectorApp) -> str:
    return app.screen._compositor.render_strips()[-1].text


@pytest.mark.parametrize("width", range(40, 80, 3))
async def test_a_narrow_footer_shows_whole_keys_only(width: int) -> None:
    # Footer cut its keys at the right edge: a key without its label ("q" alone in the bottom-right cell
    # at 55 columns, "w W" at 40) read as a stray letter. Every key shown now has its whole label.
    app = InspectorApp(SyntheticSource(40))
    async with app.run_test(size=(width, 24)) as pilot:
        await settle(pilot)
        row = _footer_row(app)
        shown = [k for k in app.query_one(Footer).query(FooterKey) if k.visible and not k.has_class("-grouped")]
        assert shown, row
        for key in shown:
            assert f"{key.key_display} {key.description}" in row, (key.key, row)
        last = shown[-1]
        assert row.rstrip().endswith(f"{last.key_display} {last.description}"), row  # nothing cut after it
        labels = [str(label.render()) for label in app.query_one(Footer).query(FooterLabel) if label.visible]
        assert "Turn" in labels  # the "←→ Turn" group fits even at 40 columns


async def test_the_palette_hint_covers_the_last_cell_of_the_row() -> None:
    # A zoomed tab at 80x20 has a longer footer: keys ran under the right-docked hint, cut ("q Qui▏"), and
    # the hint's compact margin (the row's last cell, which it does not paint) showed a letter of the key
    # beneath it ("▏^p palettei"). Keys under the hint are hidden whole.
    app = InspectorApp(SyntheticSource(40))
    async with app.run_test(size=(80, 20)) as pilot:
        await settle(pilot)
        await pilot.press("a")
        await settle(pilot)
        row = _footer_row(app)
        assert row.endswith("^p palette "), row
        assert "q Qui" not in row or "q Quit" in row.split("▏")[0], row


async def test_keys_hidden_at_a_narrow_width_come_back_when_it_grows() -> None:
    # A hidden key has no region: read at the new width, the keys hidden at 40 columns stayed hidden at
    # 55-79 (in tmux, resizing from 40 to 70 left the footer at 'n Next ★').
    app = InspectorApp(SyntheticSource(40))
    async with app.run_test(size=(40, 24)) as pilot:
        await settle(pilot)
        assert "q Quit" not in _footer_row(app)
        await pilot.resize_terminal(70, 24)
        await settle(pilot)
        # (`/ Find` comes after Quit: the key a narrow footer gives up first)
        assert _footer_row(app).rstrip().endswith("? Help q Quit / Find"), _footer_row(app)
        await pilot.resize_terminal(55, 24)
        await settle(pilot)
        assert _footer_row(app).rstrip().endswith("? Help"), _footer_row(app)
