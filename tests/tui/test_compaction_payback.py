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
