"""The cost_aware policy in the TUI: each compaction on the timeline carries its pay-back, and the
pressure gauge reads pressure over what is sent with the uncompacted figure beside it."""

from __future__ import annotations

from engine.pipeline import Pipeline
from engine.tokens import CharTokenizer, TokenCounter
from inspector.timeline import summarize


def _traces() -> list[dict]:  # type: ignore[type-arg]
    pipe = Pipeline(
        "m",
        "anthropic",
        8_000,
        counter=TokenCounter(CharTokenizer()),
        serve=False,
        default_response_reserve=0,
    )
    pipe.identity("You are a careful agent. " * 20)
    pipe.user("task")
    out = []
    for k in range(60):
        req = pipe.next_request()
        out.append(req.trace)
        pipe.record_usage({"input_tokens": req.trace["final_tokens"], "output_tokens": 10})
        calls = pipe.assistant(f"s{k}", tool_calls=[{"id": f"c{k}", "name": "bash", "arguments": "{}"}])
        pipe.tool_result(calls[0].id, "y" * 3200)
    return out


def test_compaction_turns_keep_their_payback_in_the_timeline_summary() -> None:
    traces = _traces()
    compacted = [t for t in traces if t["compaction"]["decision"] == "compacted"]
    assert compacted
    for t in compacted:
        s = summarize(t)
        assert s["compaction"]["text"].startswith("saves ") and "uncached" in s["compaction"]["text"]
        assert {"step": "compact_history"} in s["actions"]
    held = next(t for t in traces if t["compaction"]["decision"] == "held")
    assert "compaction" not in summarize(held)


async def test_strip_and_gauge_show_payback_and_uncompacted_pressure() -> None:
    from textual.app import App, ComposeResult

    from panels.pressure import PressurePanel
    from panels.timeline_strip import TimelineStrip

    traces = _traces()
    k = next(i for i, t in enumerate(traces) if t["compaction"]["decision"] == "compacted")

    class Host(App[None]):
        def compose(self) -> ComposeResult:
            yield TimelineStrip(id="strip")
            yield PressurePanel(id="pressure")

    app = Host()
    async with app.run_test(size=(200, 20)) as pilot:
        strip = app.query_one(TimelineStrip)
        strip.traces = [summarize(t) for t in traces]
        strip.count = len(traces)
        strip.current = k
        gauge = app.query_one(PressurePanel)
        gauge.trace = traces[-1]  # type: ignore[assignment]
        await pilot.pause()
        assert f"compaction: {traces[k]['compaction']['text']}" in str(strip.render())
        head = str(gauge.render()).splitlines()[0]
        assert "uncompacted" in head and traces[-1]["pressure"]["raw"] <= 1.0


def test_strip_marks_compactions_not_every_turn_with_a_spilled_result() -> None:
    """On the demo recording (two compactions in 40 turns, a large tool output spilled from turn 13 on)
    the strip's event row marks the compaction turns, and no turn whose only rewrite is a spill."""
    from pathlib import Path

    from inspector.sources.file import FileSource
    from panels.timeline_strip import TimelineStrip

    demo = Path(__file__).resolve().parents[2] / "demo_sessions" / "scout-anthropic.cpsession"
    traces = FileSource(demo).load_initial()
    compacted = {t["turn"] for t in traces if (t.get("compaction") or {}).get("decision") == "compacted"}
    spilled_only = {
        t["turn"] for t in traces
        if {a["step"] for a in t.get("actions") or []} & {"spill"} and not t.get("cache_break")
        and t["turn"] not in compacted
    }
    assert compacted and len(spilled_only) > 10
    strip = TimelineStrip()
    strip.traces = traces
    strip.set_reactive(TimelineStrip.count, len(traces))
    cols, _ = strip._summary(len(traces))  # one column per turn
    events = {rng.start: ev for rng, _b, _t, _h, ev, _s in cols}
    # A compaction breaks the cache by rewriting the history: that break is its own (priced in its pay-back),
    # drawn "c" as the legend says; the break mark had won, so neither of the two compactions showed.
    broke_by_itself = {t["turn"] for t in traces if t["turn"] in compacted and t.get("cache_break")}
    assert broke_by_itself
    for turn in compacted:
        assert events[turn] == "c", (turn, events[turn])
    # A break with any other cause is still a break: the latch flip at turn 15.
    others = {t["turn"] for t in traces if t.get("cache_break") and t["turn"] not in compacted}
    assert others and all(events[turn] == "✖" for turn in others)
    # The same marks from the summaries a long recording keeps.
    strip.traces = [summarize(t) for t in traces]
    strip._cache_key = None
    cols, _ = strip._summary(len(traces))
    assert {rng.start: ev for rng, _b, _t, _h, ev, _s in cols} == events
    assert all(events[turn] == " " for turn in spilled_only)


def test_a_long_payback_label_is_cut_and_the_pointer_stays_on_its_turn() -> None:
    from panels.timeline_strip import TimelineStrip

    traces = [summarize(t) for t in _traces()]
    strip = TimelineStrip()
    strip.traces = traces
    strip.set_reactive(TimelineStrip.count, len(traces))
    k = next(i for i, t in enumerate(traces) if "compaction" in t)
    for width in (40, 60, 90, 200):
        for current in (0, k, len(traces) - 1):
            strip.set_reactive(TimelineStrip.current, current)
            axis = str(strip.lines(width)[3])
            assert len(axis) <= width, (width, current, axis)
            assert axis.index("▲") == strip._column(current, width)
            if current == k and width >= 90:
                assert "compaction: saves " in axis
