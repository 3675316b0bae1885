"""pressure.raw_history (the uncompacted history's pressure, shown beside `raw` in the TUI and exported as
contextpipe.pressure.raw_history) is over the same window as `raw`: the window as the engine's tokenizer
sees it, after the calibration the provider's usage taught. It was over the bare window, so once the
provider counted more than the engine (calibration > 1) the uncompacted figure read lower than the
compacted one it stands beside."""

from __future__ import annotations

from typing import Any

from engine.pipeline import Pipeline
from engine.recording.replay import Replayer
from engine.tokens import CharTokenizer, TokenCounter
from engine.whatif import Overrides

COUNTER = TokenCounter(CharTokenizer())
SCHEMA = {"type": "object", "properties": {"cmd": {"type": "string"}}}


def _session(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    # The default journal: its turns' traces are built when read (engine/trace_lazy.py).
    pipe = Pipeline("test-model", "anthropic", 20_000, counter=COUNTER, serve=False,
                    clock=lambda: 1_700_000_000.0, policy="cost_aware", default_response_reserve=0)
    pipe.identity("IDENTITY: you are a careful agent. " * 20)
    pipe.add_tool("bash", "Run a command", SCHEMA)
    pipe.user("TASK: fix the failing test.")
    traces = []
    for k in range(8):
        req = pipe.next_request()
        # The provider counts half as many tokens again as the engine: calibration 1.5 after 3 calls.
        pipe.record_usage({"input_tokens": int(req.trace["final_tokens"] * 1.5), "output_tokens": 50})
        calls = pipe.assistant(f"step {k}", tool_calls=[{"id": f"c{k}", "name": "bash", "arguments": "{}"}])
        pipe.tool_result(calls[0].id, f"r{k} " + "y" * 300)
        traces.append(req.trace)
    events.extend(pipe.journal.events)
    pipe.close()
    return traces


def _agree(t: dict[str, Any]) -> None:
    p = t["pressure"]
    assert t["compaction"]["raw_tokens"] == t["final_tokens"]  # nothing compacted: the same request
    # The same tokens over the same window; the few tokens of framing the plan's total leaves out apart.
    assert abs(p["raw_history"] - p["raw"]) < 0.002, (t["turn"], p, t["calibration"])


def test_uncompacted_pressure_is_over_the_calibrated_window() -> None:
    events: list[dict[str, Any]] = []
    traces = _session(events)
    assert traces[-1]["calibration"] == 1.5
    for t in traces:
        _agree(t)  # the live trace (engine/trace_lazy.py)
    # A what-if re-plan builds its trace in Pipeline.build: the same figure.
    replanned = Replayer(events).replan(7, Overrides(window=24_000)).trace
    assert replanned["calibration"] == 1.5
    _agree(replanned)
