"""Token figures say their scale where a person reads them, at every size: the compact manifest (80
columns, no border for the note the full one has) and the Content tab's omission markers, whose counts are
the engine's tokens beside panels that show the provider's."""

from __future__ import annotations

from inspector.app import InspectorApp
from inspector.sources.file import FileSource
from panels.content_viewer import ContentViewer
from panels.manifest import ManifestPanel
from panels.markup_line import MarkupLine
from tests.tui.conftest import settle
from tests.tui.test_hardening import DEMO
from tests.tui.test_odd_content import select_section, settled


async def test_the_compact_manifest_says_its_scale_after_the_column_names() -> None:
    # At 80x24 the manifest has no border, and its budget, plan and sent columns were unlabelled beside the
    # timeline's and tier's provider-scale figures. The header says it in the cells the columns leave.
    app = InspectorApp(FileSource(DEMO), start_turn=5)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        manifest = app.query_one("#manifest", ManifestPanel)
        assert manifest.compact
        header = manifest.render_line(0).text
        assert header.split()[:8] == ["section", "scope", "prio", "budget", "plan", "sent", "form", "Δ"]
        assert header.rstrip().endswith("Δ  engine tokens"), header
        await pilot.press("right")  # the same words on the next turn
        await settle(pilot)
        assert manifest.render_line(0).text == header
        # A trimmed section's form ("trimmed −16k") widens its column past the room: left out, never cut.
        await pilot.press("end")
        await settle(pilot)
        await pilot.press("left")
        await settle(pilot)
        header = manifest.render_line(0).text
        assert header.rstrip().endswith("Δ") and "engine" not in header, header
    # wider, the full manifest's border says it at length; the header is the column names alone
    app = InspectorApp(FileSource(DEMO))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        manifest = app.query_one("#manifest", ManifestPanel)
        assert not manifest.compact and "engine" not in manifest.render_line(0).text
        assert manifest.border_subtitle == "the engine's tokens (cl100k); the provider's ≈×1.06, learned"


async def test_the_content_tab_says_the_omission_markers_count_the_engines_tokens() -> None:
    # "[...15996 tokens omitted (28 earlier rounds dropped)...]" in the history counts the engine's tokens
    # (cl100k), beside the tier's "sent" in the provider's: said under the title when the text holds one.
    for size in ((120, 40), (80, 24)):
        app = InspectorApp(FileSource(DEMO))
        async with app.run_test(size=size) as pilot:
            await settle(pilot)
            await select_section(pilot, "history")
            await settled(pilot)
            viewer = app.query_one("#content", ContentViewer)
            note = app.query_one("#content-note", MarkupLine)
            assert "tokens omitted" in viewer.text and viewer.note == ""
            assert note.display and note.render_line(0).text.rstrip() == "tokens omitted: the engine's tokens (cl100k)"
            await pilot.press("up")  # the section above (the goal's): no marker in it, nothing said
            await settled(pilot)
            assert viewer.key is not None and viewer.key[0] != "history" and "tokens omitted" not in viewer.text
            assert not note.display
