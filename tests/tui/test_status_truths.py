"""What the status line and the keys tell a person new to the inspector (ux27's pass): a live view
following the newest turn is not shown paused; at 120 columns a disconnected agent's banner gives way
before the turn and the play state; `s` in a replay says why it does nothing; `?` lists each key once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from inspector.app import InspectorApp
from inspector.screens import HelpScreen
from inspector.screens.save import SaveScreen
from inspector.sources.file import FileSource
from inspector.sources.synthetic import SyntheticSource
from panels.markup_line import MarkupLine
from tests.tui.conftest import settle
from tests.tui.test_hardening import DEMO, where_text


def _drawn(app: InspectorApp) -> str:
    return app.query_one("#status", MarkupLine).render_line(0).text.rstrip()


async def test_a_live_view_following_the_newest_turn_is_not_shown_paused() -> None:
    app = InspectorApp(SyntheticSource(30, live=True, initial=20, delay=0.01, disconnect=False))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert app.disconnected is None and app.timeline.follow
        drawn = _drawn(app)
        # It said "⏸ 1×  following newest": a pause sign on a view that moves with every turn.
        assert "following newest" in drawn and "⏸" not in drawn, drawn
        await pilot.press("left")
        await settle(pilot)
        drawn = _drawn(app)
        assert "⏸ 1×" in drawn and "stepped back (End to follow)" in drawn, drawn  # now it is paused
        await pilot.press("end")
        await settle(pilot)
        assert "following newest" in _drawn(app) and "⏸" not in _drawn(app), _drawn(app)


async def test_a_disconnected_agents_banner_gives_way_to_the_turn_and_play_state_at_120_columns() -> None:
    """`cp-inspect demo` at 120x40 after the agent ended, Home then space: the line kept the whole
    banner and cut after "turn 0" (no count, no play state)."""
    src = SyntheticSource(12, live=True, initial=12, delay=0.01)
    src.header |= {"pid": 24251, "recording": "/tmp/cp-demo-op4d99m9/demo.cpsession"}
    app = InspectorApp(src)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert app.disconnected is not None
        await pilot.press("home")
        await settle(pilot)
        drawn = _drawn(app)
        assert "turn 0 (1/12)  ⏸ 1×" in drawn, drawn  # (the model after it is cut at the edge)
        await pilot.press("space")
        await pilot.pause()
        drawn = _drawn(app)
        assert "(1/12)  ▶ playing 1×" in drawn or "(2/12)  ▶ playing 1×" in drawn, drawn
        # the banner still says the agent is gone, and where its recording is is on the line under it,
        # whole (the line shortened the path in the middle), as in the tooltip and `?`
        assert "Agent disconnected — 12 turns kept" in drawn, drawn
        assert where_text(app) == "Recording kept at /tmp/cp-demo-op4d99m9/demo.cpsession"
        # and the line no longer calls it live (it read "● LIVE pid 24251  Agent disconnected ...")
        assert drawn.startswith("○ ENDED ") and "LIVE" not in drawn, drawn
        assert "recording kept at /tmp/cp-demo-op4d99m9/demo.cpsession" in "\n".join(app.status_whole())


async def test_s_in_a_replay_says_it_is_for_live_sessions_and_help_lists_each_key_once() -> None:
    app = InspectorApp(FileSource(DEMO))
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await settle(pilot)
        await pilot.press("s")
        await pilot.pause()
        told = [n.message for n in app._notifications]
        assert "s: live sessions only (this is a replay)" in told, told  # it did nothing, silently
        assert not isinstance(app.screen, SaveScreen)
        await pilot.press("question_mark")
        await settle(pilot)
        assert isinstance(app.screen, HelpScreen)
        rows = app.screen.compose_rows()
        for key in ("`esc`", "`s`"):
            listed = [row for row in rows if row.startswith(f"| {key} |")]
            assert len(listed) == 1, listed  # `esc` was listed twice
        esc = next(row for row in rows if row.startswith("| `esc` |"))
        assert "leave the detail tab" in esc and "focus the section manifest" in esc, esc


async def test_s_in_a_live_session_still_opens_the_save_prompt() -> None:
    app = InspectorApp(SyntheticSource(30, live=True, initial=20, delay=0.01, disconnect=False))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("s")
        await pilot.pause()
        assert isinstance(app.screen, SaveScreen)


async def test_a_deepseek_sessions_provider_is_named_as_the_wire_it_used() -> None:
    """The status line said "deepseek-chat · openai", as if DeepSeek's model ran at OpenAI: the provider
    setting is the engine's request format ("deepseek" is its alias of "openai")."""
    src = SyntheticSource(12)
    src.header |= {"model": "deepseek-chat", "provider": "openai"}
    app = InspectorApp(src)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        assert _drawn(app).endswith("deepseek-chat · openai wire"), _drawn(app)
        await pilot.press("question_mark")
        await settle(pilot)
        assert isinstance(app.screen, HelpScreen)
        assert "`openai wire`" in "\n".join(str(w._markdown) for w in app.screen.query("Markdown"))


def test_a_providers_own_model_is_named_with_the_provider_alone() -> None:
    from inspector.status import provider_label

    assert provider_label("claude-sonnet-4", "anthropic") == "anthropic"
    assert provider_label("gpt-4o-mini", "openai") == "openai"
    assert provider_label("openai/o3-mini", "openai") == "openai"
    assert provider_label("claude-sonnet-4", "openai") == "openai wire"  # (scout-openai.cpsession)
    assert provider_label("deepseek-reasoner", "openai") == "openai wire"
    assert provider_label("anthropic.claude-3-5-sonnet", "bedrock") == "bedrock"
    assert provider_label("qwen3-coder", "prefix") == "prefix wire"


async def test_a_skipped_tab_entry_that_wraps_hangs_under_its_own_text() -> None:
    """Replay scout-anthropic at turn 17, `k`: compact_history's entry wrapped to the panel's edge, under
    its ✓ ("  ✓ compact_history  pays back within the 1 / turns it is expected to last; ...")."""
    from panels.skipped import SkippedPanel

    app = InspectorApp(FileSource(DEMO), start_turn=17)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("k")
        await settle(pilot)
        panel = app.query_one(SkippedPanel)
        rows = [panel.render_line(y).text.rstrip() for y in range(panel.content_region.height)]
        at = next(i for i, row in enumerate(rows) if "✓ compact_history" in row)
        after = rows[at + 1 : next(i for i, row in enumerate(rows) if "✓ place_markers" in row)]
        assert after and all(row.startswith(" " * 4) and row[4] != " " for row in after), rows
        assert "saved 7.3k tokens" in after[-1], rows  # the whole entry, and nothing cut
        assert " ".join(row.strip() for row in [rows[at], *after]).startswith(
            "✓ compact_history  pays back"
        ), rows


async def test_a_file_name_with_a_bracket_is_shown_as_it_is(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """`cp-inspect replay 'x[.cpsession'`: textual's escape() leaves a lone "[" (it escapes what reads as a
    tag), which opened a tag across the rest of the status line: MarkupError, and the app ended with
    Textual's traceback (exit 1). The name is shown as it is, at 120 and at 80 columns."""
    import shutil

    for name in ("x[.cpsession", "run[1] [b.cpsession", "a[b]c.cpsession"):
        path = tmp_path / name
        shutil.copy(DEMO, path)
        for size in ((120, 40), (80, 24)):
            app = InspectorApp(FileSource(path))
            async with app.run_test(size=size) as pilot:
                await settle(pilot)
                drawn = _drawn(app)
                assert drawn.startswith(f"REPLAY {name[:8]}"), drawn
                assert app.is_running
            assert app.return_code in (None, 0), (name, size)


async def test_a_routed_model_shows_the_model_that_ran_and_a_bracket_is_no_route() -> None:
    """A model named through a router ("openrouter/anthropic/claude-3.5-sonnet") was cut at the edge of an
    80-column line as "openrouter/anthropic/cla…": the router shown, the model not. Its routing prefix now
    goes first ("…/claude-3.5-sonnet"); at 120 columns it is whole. "gpt-4o[/]" was judged by its last
    piece ("]"): not OpenAI's own, so "openai wire"."""
    from inspector.status import provider_label

    routed = "openrouter/anthropic/claude-3.5-sonnet"
    for model, size, shown in (
        # (and the empty state's gap gives two cells to the provider: "· op…" was all there was of it)
        (routed, (80, 24), "⏸ 1×  …/claude-3.5-sonnet · openai wire"),
        (routed, (120, 40), f"⏸ 1×    {routed} · openai wire"),
        ("gpt-4o[/]", (80, 24), "⏸ 1×    gpt-4o[/] · openai"),
    ):
        src = SyntheticSource(12)
        src.header |= {"model": model, "provider": "openai"}
        app = InspectorApp(src)
        async with app.run_test(size=size) as pilot:
            await settle(pilot)
            drawn = _drawn(app)
            assert shown in drawn and len(drawn) <= size[0], (model, size, drawn)
            assert "openai wire" not in drawn or model == routed, drawn
    assert provider_label("gpt-4o[/]", "openai") == "openai"
    assert provider_label(routed, "anthropic") == "anthropic"


async def test_a_run_whose_agent_finished_says_exited_not_disconnected() -> None:
    # `cp-inspect run`'s agent exiting with status 0 showed the red "Agent disconnected" banner, which
    # read as a failure; a failed or killed agent's banner says how it ended (it too said "disconnected",
    # though the run knew the agent's exit status).
    from inspector.messages import SourceDisconnected
    from inspector.proxy_cli import agent_ended
    from inspector.status import FINISHED

    src = SyntheticSource(12, live=True, initial=12, delay=0.01, disconnect=False)
    src.header |= {"recording": "/tmp/rec/run.cpsession"}
    app = InspectorApp(src)
    async with app.run_test(size=(200, 40), notifications=True) as pilot:
        await settle(pilot)
        app.post_message(SourceDisconnected(FINISHED))
        await settle(pilot)
        drawn = _drawn(app)
        assert "Agent exited — 12 turns kept; recording kept at /tmp/rec/run.cpsession" in drawn, drawn
        assert "disconnected" not in drawn, drawn
        told = [n.message for n in app._notifications]
        assert told == ["The agent exited with status 0. 12 turns kept; the agent's recording is kept at "
                        "/tmp/rec/run.cpsession."], told
        app.disconnected = "the agent exited with status 1 (its output: agent.log)"
        await settle(pilot)
        drawn = _drawn(app)
        assert "Agent exited with status 1 — 12 turns kept; recording kept at /tmp/rec/run.cpsession" in drawn
        assert "disconnected" not in drawn and "agent.log" not in drawn, drawn  # (the toast names the log)
        app.disconnected = "the agent was ended by SIGKILL (its output: agent.log)"
        await settle(pilot)
        assert "Agent ended by SIGKILL — 12 turns kept" in _drawn(app), _drawn(app)

    class Done:
        def poll(self) -> int:
            return 0

    assert agent_ended(Done(), None) == FINISHED  # type: ignore[arg-type]


async def _went_away(code: int, tmp_path: Path) -> tuple[str, list[str]]:
    """A live agent the app's command started (as `cp-inspect demo` starts its agent) closes its socket a
    moment before its process ends: what the status line and the notifications say once it has ended."""
    from inspector.messages import SourceDisconnected
    from inspector.proxy_cli import agent_ended

    log = tmp_path / "agent.log"
    child = subprocess.Popen([sys.executable, "-c", f"import sys, time; time.sleep(0.5); sys.exit({code})"])
    src = SyntheticSource(12, live=True, initial=12, delay=0.01, disconnect=False)
    src.header |= {"recording": "/tmp/rec/demo.cpsession"}
    app = InspectorApp(src)
    app.agent_ended = lambda: agent_ended(child, log)
    try:
        async with app.run_test(size=(200, 40), notifications=True) as pilot:
            await settle(pilot)
            app.post_message(SourceDisconnected(f"agent pid {child.pid} disconnected"))
            for _ in range(100):  # the app asks a few times a second, up to 5 s
                await pilot.pause(0.1)
                if app.agent_ended is None:
                    break
            await settle(pilot)
            return _drawn(app), [n.message for n in app._notifications]
    finally:
        child.wait(10)


async def test_a_demo_whose_agent_ran_to_its_end_says_exited_not_disconnected(tmp_path: Path) -> None:
    # `cp-inspect demo` ran to its end under the red "Agent disconnected" banner, which read as a failure.
    drawn, told = await _went_away(0, tmp_path)
    assert "Agent exited — 12 turns kept; recording kept at /tmp/rec/demo.cpsession" in drawn, drawn
    assert "Agent disconnected" not in drawn, drawn
    assert not any("failed" in t for t in told), told


async def test_a_demo_whose_agent_failed_says_how_and_where_its_output_is(tmp_path: Path) -> None:
    drawn, told = await _went_away(3, tmp_path)
    assert "Agent exited with status 3 — 12 turns kept" in drawn, drawn
    assert "disconnected" not in drawn, drawn
    # one toast: how it ended, where its output is, the turns kept and where
    assert told == [f"The agent exited with status 3 (its output: {tmp_path / 'agent.log'}). 12 turns kept; "
                    "the agent's recording is kept at /tmp/rec/demo.cpsession."], told


@pytest.mark.parametrize("width", [80, 100])
async def test_the_demos_end_at_80_and_100_columns_names_its_recording(width: int) -> None:
    """`cp-inspect demo` run to its end at 80 columns read "Agent exited; recording kept at /tm…psession":
    a path cut to nothing; then "kept at …/demo.cpsession", the file's name without the directory a person
    needs to open it again. The path is whole on the line under the status line."""
    from inspector.messages import SourceDisconnected
    from inspector.status import FINISHED

    kept = "/tmp/cp-demo-h4lvdcny/demo.cpsession"
    src = SyntheticSource(12, live=True, initial=12, delay=0.01, disconnect=False)
    src.header["recording"] = kept
    app = InspectorApp(src)
    async with app.run_test(size=(width, 24)) as pilot:
        await settle(pilot)
        app.post_message(SourceDisconnected(FINISHED))
        await settle(pilot)
        drawn = _drawn(app)
        assert "turn 11 (12/12)" in drawn, drawn
        if width == 100:  # room for it whole in the short banner
            assert f"Agent exited; kept at {kept} " in drawn and where_text(app) == "", drawn
        else:
            assert "Agent exited — 12 turns kept" in drawn and "kept at" not in drawn, drawn
            assert where_text(app) == f"Recording kept at {kept}"


async def test_a_session_whose_serving_process_ended_says_session_ended() -> None:
    """`attach PID.N` to a proxy's conversation: when the proxy stops, it is the session that ended (the
    agent may have exited long before), said in the neutral colour; "Agent exited" was the proxy's."""
    from inspector.messages import SourceDisconnected
    from inspector.status import SESSION_ENDED

    src = SyntheticSource(12, live=True, initial=12, delay=0.01, disconnect=False)
    src.header |= {"recording": "/tmp/rec/s1.cpsession", "session": 1}
    app = InspectorApp(src)
    app.agent_ended = lambda: SESSION_ENDED
    async with app.run_test(size=(200, 40)) as pilot:
        await settle(pilot)
        app.post_message(SourceDisconnected("agent pid 7 disconnected"))
        for _ in range(100):
            await pilot.pause(0.05)
            if app.disconnected == SESSION_ENDED:
                break
        await settle(pilot)
        drawn = _drawn(app)
        assert "Session ended — 12 turns kept; recording kept at /tmp/rec/s1.cpsession" in drawn, drawn
        assert "Agent" not in drawn, drawn
