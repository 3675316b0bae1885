"""A small append-only agent session for the turn-cost tests: a deepseek-chat pipeline on the OpenAI wire
with a character tokenizer and a fixed clock (so turns are deterministic and cheap to count), and one tool
round (an assistant call to `bash`, then its output)."""

from __future__ import annotations

import json

from engine.pipeline import Pipeline
from engine.tokens import CharTokenizer, TokenCounter


def char_pipe(window: int, model: str = "deepseek-chat", provider: str = "openai") -> Pipeline:
    return Pipeline(
        model,
        provider,
        window,
        counter=TokenCounter(CharTokenizer()),
        serve=False,
        clock=lambda: 0.0,
    )


def tool_round(pipe: Pipeline, t: int, output: str) -> None:
    """Turn `t`'s assistant message calling bash, and the call's result `output`."""
    calls = pipe.assistant(f"step {t}", [{"id": f"c{t}", "name": "bash", "arguments": json.dumps({"n": t})}])
    pipe.tool_result(calls[0].id, output)


def coding_task(pipe: Pipeline) -> Pipeline:
    """`pipe` given a coding agent's start: its identity, the `bash` tool and the task."""
    pipe.identity("You are a careful coding agent.")
    pipe.add_tool(
        "bash", "Run a shell command", {"type": "object", "properties": {"cmd": {"type": "string"}}}
    )
    pipe.user("Fix the failing test.")
    return pipe
