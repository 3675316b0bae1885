"""The Skipped tab's figures say their unit, and a step that saves no tokens says nothing of saving."""

from __future__ import annotations

from pathlib import Path
from typing import cast

from engine.recording.journal import trace_of
from engine.trace_schema import Trace
from inspector.cli import load_events
from panels.fmt import tok
from panels.skipped import SkippedPanel

DEMOS = Path(__file__).resolve().parents[2] / "demo_sessions"


def _shown(trace: Trace) -> list[str]:
    panel = SkippedPanel()
    panel.set_reactive(SkippedPanel.trace, trace)
    return panel.render().plain.splitlines()


def test_applied_and_skipped_steps_give_tokens_and_no_saved_0() -> None:
    # "✓ reorder  moved 4 sections into scope order  saved 0" on every turn (and place_markers too) read
    # as a step that failed; "would save 3856" and "saved 2866" gave no unit.
    seen_skip = seen_saving = False
    for name in ("scout-anthropic.cpsession", "scout-gates-closed.cpsession"):
        events, _, _ = load_events(str(DEMOS / name))
        for t in (cast(Trace, trace_of(e)) for e in events if e.get("k") == "turn"):
            rows = _shown(t)
            for a in t.get("actions") or []:
                row = next(r for r in rows if r.startswith(f"  ✓ {a['step']}  "))
                if a.get("tokens_saved"):
                    seen_saving = True
                    assert row.endswith(f"{a.get('detail', '')}  (saved {tok(a['tokens_saved'])} tokens)"), row
                else:
                    assert "saved" not in row.split(a.get("detail", ""), 1)[-1], row
            for s in t.get("skipped") or []:
                row = next(r for r in rows if r.startswith(f"✗ {s['step']}  "))
                if s.get("tokens_saved"):
                    seen_skip = True
                    # in parentheses after the reason: run on, it read as the reason's own figure
                    want = f"{s.get('reason', '')}  (would save {tok(s['tokens_saved'])} tokens)"
                    assert row.endswith(want), row
    assert seen_skip and seen_saving


def test_the_tokens_saved_say_they_are_the_engines() -> None:
    # "saved 82k tokens" beside the tier's provider-scale "sent" said nothing of which tokens: the steps
    # measure with the engine's tokenizer. Said once, last, where a figure of tokens saved is shown, and
    # not on a turn that shows none.
    events, _, _ = load_events(str(DEMOS / "scout-anthropic.cpsession"))
    traces = [cast(Trace, trace_of(e)) for e in events if e.get("k") == "turn"]
    saving = [t for t in traces if any(s.get("tokens_saved") for s in (t.get("actions") or []) + (t.get("skipped") or []))]
    assert saving and len(saving) < len(traces)
    for t in traces:
        rows = _shown(t)
        if t in saving:
            assert rows[-1] == "tokens saved: the engine's (cl100k), as the sections manifest counts", rows
        else:
            assert not any("engine's" in r for r in rows), rows
