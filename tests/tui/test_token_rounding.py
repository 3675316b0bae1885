"""One rule for token counts in every panel (panels/fmt.tok): a count is rounded once, at the precision of
the size it rounds to, so a figure just under a step never prints with more digits than the one above it."""

from __future__ import annotations

from pathlib import Path

from engine.recording.journal import trace_of
from inspector.cli import load_events
from panels.fmt import signed, tok
from panels.line_panel import content_of
from panels.pressure import PressurePanel

DEMO = Path(__file__).resolve().parents[2] / "demo_sessions" / "scout-anthropic.cpsession"


def test_a_count_just_under_a_step_rounds_to_the_steps_precision() -> None:
    # 9,996 printed "10.0k" (one decimal chosen before rounding) beside 10,200 printed "10k".
    assert [tok(n) for n in (9_949, 9_996, 10_000, 10_200)] == ["9.9k", "10k", "10k", "10k"]
    assert [tok(n) for n in (99_499, 99_500, 999_499, 999_960, 1_049_999)] == [
        "99k",
        "100k",
        "999k",
        "1.0M",
        "1.0M",
    ]
    assert [tok(n) for n in (None, 0, 999, 1_000, 1_050, 32_768)] == ["-", "0", "999", "1.0k", "1.1k", "33k"]
    assert (signed(-9_996), signed(9_996), signed(0)) == ("−10k", "+10k", "±0")


def test_the_pressure_panel_prints_usable_and_limit_at_one_precision() -> None:
    # The demo's window: 10,200 tokens, 9,996 usable after the margin. The panel read "of 10.0k usable / 10k".
    events, _, _ = load_events(str(DEMO))
    trace = next(trace_of(e) for e in events if e.get("k") == "turn")
    assert (trace["usable"], trace["limit"]) == (9_996, 10_200)
    panel = PressurePanel()
    panel.set_reactive(PressurePanel.trace, trace)
    head = content_of(panel.lines(100)[0]).plain
    assert "of 10k usable / 10k" in head, head
