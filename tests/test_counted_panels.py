"""Counts in the panels and in the engine texts they show read right at one and at many: "1 marker",
"3 markers", "2 units appended", where they read "1 marker(s)" and "2 unit(s)" (one prefix under the model's
minimum, and four: tests/test_marker_reasons.py and tests/tui/test_cut_lines.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from engine import Pipeline
from engine.optimize.markers import note_of
from engine.request_diff import diff_requests
from inspector.timeline import interesting_reasons
from panels.cache_layout import _summary
from panels.tier import TierPanel
from tests.test_request_diff import build

PARAMS = {"type": "object", "properties": {"cmd": {"type": "string"}}}


def _trace(identity: str = "You are careful.") -> dict[str, Any]:
    p = Pipeline("claude-sonnet-4", provider="anthropic", serve=False)
    p.identity(identity)
    p.add_tool("bash", "Run a shell command", PARAMS)
    p.user("Fix the failing test.")
    trace = dict(p.next_request().trace)
    p.close()
    return trace


@pytest.mark.parametrize("n,alerts,actions", [(1, "1 alert", "1 action"), (2, "2 alerts", "2 actions")])
def test_the_tier_panel_counts_alerts_and_actions(n: int, alerts: str, actions: str) -> None:
    trace = _trace()
    trace["alerts"] = [{"rule": f"r{k}", "message": "m"} for k in range(n)]
    trace["actions"] = [{"step": f"s{k}"} for k in range(n)]
    panel = TierPanel()
    panel.set_reactive(TierPanel.trace, trace)
    text = "\n".join(line.plain for line in panel.lines(120)) + "\n"
    assert f"  {alerts}\n" in text and text.count("(s)") == 0, text
    assert f"), {actions}  provider's tokens\n" in text, text  # the scale follows, where the row holds it


def test_the_cache_line_counts_markers() -> None:
    assert _summary(1, "≈5.9k", "5.7k", "6.2k", "92%", "", False, None, 120).plain.startswith("▲ 1 marker  ─ prefix ≈5.9k")
    assert _summary(0, "0", "0", "382", "0%", "", False, None, 120).plain.startswith("▲ 0 markers  ─ prefix 0")
    assert _summary(3, "≈17k", "17k", "17k", "99%", "", False, None, 120).plain.startswith("▲ 3 markers  ─ prefix ≈17k")


def test_a_turns_reasons_to_stop_count_its_alerts() -> None:
    trace = _trace()
    assert interesting_reasons({**trace, "alerts": [{"rule": "a"}]}, None) == ["1 alert"]
    assert interesting_reasons({**trace, "alerts": [{"rule": "a"}, {"rule": "b"}]}, None) == ["2 alerts"]


def _openai(*texts: str) -> dict[str, Any]:
    return {"model": "gpt-4o", "messages": [{"role": "user", "content": t} for t in texts]}


def test_request_diff_counts_units_appended_and_dropped_and_tools_removed() -> None:
    one, three = _openai("a"), _openai("a", "b", "c")
    assert diff_requests(one, _openai("a", "b")).detail.startswith("1 unit appended after the shared prefix")
    assert diff_requests(one, three).detail.startswith("2 units appended after the shared prefix")
    assert diff_requests(_openai("a", "b"), one).detail.startswith("1 unit dropped from the end")
    assert diff_requests(three, one).detail.startswith("2 units dropped from the end")
    base = build(tools=("bash", "read", "grep"))
    d = diff_requests(base, build(tools=("bash", "read")))
    assert d.cause == "tool_removed" and d.detail == "tool removed: ['grep']", d.detail
    d = diff_requests(base, build(tools=("bash",)))
    assert d.cause == "tool_removed" and d.detail == "tools removed: ['read', 'grep']", d.detail


def test_a_recording_journaled_before_the_wording_reads_as_now() -> None:
    """The demo recordings' marker steps say "4 prefix(es) under" (journaled so): the cache layout and
    explain read the note through note_of, which words the count as a new trace's."""
    from typer.testing import CliRunner

    from inspector.cli import app

    demo = Path(__file__).resolve().parents[1] / "demo_sessions" / "scout-anthropic.cpsession"
    res = CliRunner().invoke(app, ["explain", str(demo), "--turn", "39"])
    assert res.exit_code == 0, res.output
    assert "markers left out: 4 prefixes under the model's 1024-token minimum" in res.output, res.output
    steps = [
        {"step": "place_markers", "status": "applied", "detail": "2 markers; 1 prefix(es) under the model's"}
    ]
    assert note_of(steps) == "1 prefix under the model's"
