"""What a turn carries over from the last one changes no output.

The engine keeps state between turns only to go faster: the serializer's fragments and the previous
serialization of each section (reused up to the first changed item), the body hash at checkpoints,
section totals and running sums that extend the previous run, planner estimates and unchanged source
sections. A pipeline that keeps all of it must send byte-identical requests with identical traces to
one that throws all of it away before every turn, through compactions, trims, spills, moving cache
markers, latch flips and edited sections.
"""

from __future__ import annotations

import json
import random

import pytest

from engine.pipeline import Pipeline
from engine.tokens import CharTokenizer, TokenCounter


def _session(provider: str, seed: int, forget: bool) -> list[tuple[bytes, str]]:
    rnd = random.Random(seed)
    pipe = Pipeline(
        "deepseek-chat" if provider == "openai" else "claude-sonnet-4",
        provider,
        rnd.choice((2_500, 4_000, 8_000)),
        counter=TokenCounter(CharTokenizer()),
        serve=False,
        clock=lambda: 0.0,
    )
    pipe.identity("You are a careful coding agent.")
    schema = {"type": "object", "properties": {"cmd": {"type": "string"}}}
    pipe.add_tool("bash", "Run a shell command", schema)
    pipe.user("Fix the failing test.")
    out = []
    for t in range(70):
        roll = rnd.random()
        if roll < 0.05:
            pipe.latch("mode", rnd.choice(("plan", "act")))
        elif roll < 0.08:
            pipe.add_tool(f"tool{t}", "Another tool", {"type": "object"})
        elif roll < 0.11:
            pipe.memory(f"notes as of step {t}")
        call = {"id": f"c{t}", "name": "bash", "arguments": json.dumps({"n": t})}
        calls = pipe.assistant(f"step {t}", [call])
        size = rnd.choice((1, 5, 40, 200)) if rnd.random() > 0.03 else 12_000  # now and then one to spill
        pipe.tool_result(calls[0].id, "".join(f"line {t}.{i}: {rnd.random():.4f}\n" for i in range(size)))
        if forget:
            pipe.drop_caches()
        req = pipe.next_request()
        pipe.record_usage({"input_tokens": req.trace["final_tokens"], "output_tokens": 20})
        out.append((req.bytes, json.dumps(req.trace, sort_keys=True)))
    return out


@pytest.mark.parametrize("provider", ["openai", "anthropic", "bedrock"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_carried_caches_change_no_request_or_trace(provider: str, seed: int) -> None:
    kept = _session(provider, seed, forget=False)
    fresh = _session(provider, seed, forget=True)
    assert len(kept) == len(fresh)
    for t, (a, b) in enumerate(zip(kept, fresh, strict=True)):
        assert a[0] == b[0], f"turn {t}: request bytes differ"
        assert a[1] == b[1], f"turn {t}: trace differs"
