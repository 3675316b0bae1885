"""A small append-only agent session for the turn-cost tests: a deepseek-chat pipeline on the OpenAI wire
with a character tokenizer and a fixed clock (so turns are deterministic and cheap to count), and one tool
round (an assistant call to `bash`, then its output)."""

from __future__ import annotations

import json

from engine.pipeline import Pipeline
from engine.tokens import CharTokenizer, TokenCounter


def char_pipe(window: int) -> Pipeline:
    return Pipeline(
        "deepseek-chat",
        "openai",
        window,
        counter=TokenCounter(CharTokenizer()),
        serve=False,
        clock=lambda: 0.0,
    )


def tool_round(pipe: Pipeline, t: int, output: str) -> None:
    """Turn `t`'s assistant message calling bash, and the call's result `output`."""
    calls = pipe.assistant(f"step {t}", [{"id": f"c{t}", "name": "bash", "arguments": json.dumps({"n": t})}])
    pipe.tool_result(calls[0].id, output)
