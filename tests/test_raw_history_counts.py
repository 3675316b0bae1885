"""The trace's `raw_history` (the "uncompacted" figure) is the whole conversation as the agent holds it,
counted once: a spilled tool output counts its body and not its stub as well, a compacted stretch
counts its messages and not the summary too (demo27: the live demo's figure jumps from 1.50 to 15.55
windows in one turn, and the question was whether that is right; it is, the demo's grep of every
`def` in the repository being 135,460 tokens)."""

from __future__ import annotations

from engine.optimize import OptimizeLimits
from engine.pipeline import Pipeline
from engine.tokens import MESSAGE_OVERHEAD_TOKENS, CharTokenizer, TokenCounter

WINDOW = 8_000
SCHEMA = {"type": "object", "properties": {"cmd": {"type": "string"}}}


def chars(text: str) -> int:
    return CharTokenizer().count(text)


def test_raw_history_is_the_conversation_counted_directly_through_spills_and_compaction() -> None:
    pipe = Pipeline(
        "test-model", "anthropic", WINDOW, counter=TokenCounter(CharTokenizer()), serve=False,
        clock=lambda: 1_700_000_000.0, default_response_reserve=0,
        limits=OptimizeLimits(spill_threshold=500, max_clear_tokens=2000),
    )  # fmt: skip
    pipe.identity("IDENTITY: you are a careful agent. " * 20)
    pipe.add_tool("bash", "Run a command", SCHEMA)
    pipe.user("TASK: fix the failing test.")
    first = pipe.next_request().trace
    start = first["pressure"]["raw_history"] * WINDOW  # the sections and the task
    added = 0  # the conversation since, counted here: per message its overhead, per part its text
    steps: set[str] = set()
    for k in range(45):
        huge = k == 40  # 50,000 tokens: six windows in one tool output
        out = f"r{k} " + ("def f(x): return x\n" * 10_527 if huge else "y" * 800)
        calls = pipe.assistant(f"step {k}", tool_calls=[{"id": f"c{k}", "name": "bash", "arguments": "{}"}])
        pipe.tool_result(calls[0].id, out)
        added += MESSAGE_OVERHEAD_TOKENS + chars(f"step {k}") + chars("bash {}") + 4
        added += MESSAGE_OVERHEAD_TOKENS + chars(out) + 4
        trace = pipe.next_request().trace
        steps |= {a["step"] for a in trace["actions"]}
        # raw_history is rounded to four places of the window: 0.4 tokens at most.
        assert abs(trace["pressure"]["raw_history"] * WINDOW - (start + added)) < 1, (k, added)
        assert trace["pressure"]["raw"] <= 1.0
        if huge:
            assert trace["pressure"]["raw_history"] > 6
    assert {"spill", "compact_history"} <= steps, steps
