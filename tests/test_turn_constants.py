"""Per-turn constants the engine remembers (engine/plan.py budget_of) must follow the config.

The planner and the trace read the window's Budget through a memo keyed on (window, margin); a memo
that answered with an earlier config's Budget would plan and report against the wrong window. These
tests change the window and margin mid-session and compare with what `PipelineConfig.budget` says.
"""

from __future__ import annotations

import json
from dataclasses import replace

from engine.config import PipelineConfig
from engine.pipeline import Pipeline
from engine.plan import budget_of
from engine.tokens import Budget, CharTokenizer, TokenCounter


def _round(pipe: Pipeline, t: int) -> None:
    calls = pipe.assistant(f"step {t}", [{"id": f"c{t}", "name": "bash", "arguments": json.dumps({"n": t})}])
    pipe.tool_result(calls[0].id, f"output of step {t}\n" * (3 + t % 7))


def test_budget_of_is_the_configs_budget() -> None:
    for window, margin in ((32_000, 0.02), (32_000, 0.1), (8_000, 0.02), (8_000, 0), (8_000, 0.0), (1, 0.49)):
        cfg = PipelineConfig("m", "openai", window, margin)
        got = budget_of(cfg.window, cfg.margin)
        assert got == cfg.budget
        assert (got.limit, got.usable) == (cfg.budget.limit, cfg.budget.usable)
        assert type(got.margin) is type(margin)  # typed memo: 0 and 0.0 are separate entries
    assert budget_of(32_000, 0.02) is budget_of(32_000, 0.02)
    assert budget_of(100, 0.3) == Budget(100, 0.3)


def test_trace_and_plan_follow_a_changed_window_and_margin() -> None:
    pipe = Pipeline(
        "deepseek-chat",
        "openai",
        32_000,
        counter=TokenCounter(CharTokenizer()),
        serve=False,
        clock=lambda: 0.0,
    )
    pipe.user("fix the bug")
    seen = []
    for t, (window, margin) in enumerate(
        ((32_000, 0.02), (32_000, 0.02), (9_000, 0.02), (9_000, 0.25), (32_000, 0.02))
    ):
        if (window, margin) != (pipe.config.window, pipe.config.margin):
            pipe.set_window(window)
            pipe.fold({"k": "config", "config": replace(pipe.config, margin=margin).to_event()})
        _round(pipe, t)
        req = pipe.next_request()
        pipe.record_usage({"input_tokens": 100, "output_tokens": 10})
        want = Budget(window, margin)
        assert req.trace["limit"] == window
        assert req.trace["usable"] == want.usable
        seen.append((req.trace["usable"], req.trace["ceiling"]))
        assert req.trace["ceiling"] <= want.usable  # the plan's ceiling comes off this config's usable
    assert len({u for u, _ in seen}) == 3  # three distinct usable figures: the memo did not stick
