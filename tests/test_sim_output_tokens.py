"""Output tokens of turns the source kept no usage for.

OpenHands, SWE-smith and SWE-agent trajectories carry the replies but no provider usage. Their replies
were generated all the same, so every simulated column bills them: counted from the recorded reply with
the engine's tokenizer. Before the twenty-first session they were priced at 0 output tokens, which left
the output price (4-5x the input price) out of every column's cost (OpenHands python__mypy-15976 at
gpt-4o: $0.180 where its replies add $0.026).
"""

from __future__ import annotations

import json
from pathlib import Path

from engine.artifacts import Text, ToolCall
from engine.assembly import Measure
from engine.importers import load
from engine.importers.ingest import ingest
from engine.sim.pricing import load_prices
from engine.sim.simulate import SimSettings, simulate_file
from engine.tokens import TokenCounter

REPLY_TEXT = "I will look at the failing test first, then at the module it imports."
ARGS = '{"command": "pytest -x tests/test_fields.py"}'


def _openhands(path: Path) -> Path:
    tool = {
        "type": "function",
        "function": {
            "name": "execute_bash",
            "description": "Run a bash command.",
            "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
        },
    }
    msgs: list[dict[str, object]] = [
        {"role": "system", "content": "You are a careful engineer. " * 60},
        {"role": "user", "content": "Fix the failing test in tests/test_fields.py. " * 40},
    ]
    for k in range(3):
        msgs.append(
            {
                "role": "assistant",
                "content": REPLY_TEXT,
                "tool_calls": [
                    {
                        "id": f"call_{k}",
                        "type": "function",
                        "function": {"name": "execute_bash", "arguments": ARGS},
                    }
                ],
            }
        )
        msgs.append({"role": "tool", "tool_call_id": f"call_{k}", "content": f"output {k}\n" * 30})
    msgs.append({"role": "assistant", "content": "Done: the test passes now."})
    path.write_text(
        json.dumps({"messages": msgs, "tools": [tool], "run_id": "gpt-4o-2024-08-06_maxiter_30_N_v1"})
    )
    return path


def test_turns_without_usage_bill_their_recorded_replies(tmp_path: Path) -> None:
    pipe, _ = ingest(load(_openhands(tmp_path / "oh.json")), tmp_path / "oh.cpsession")
    pipe.close()
    r = simulate_file(tmp_path / "oh.cpsession", SimSettings(policies=["paper", "sliding_window"]))
    m = Measure(TokenCounter())
    call_reply = m.part(Text(REPLY_TEXT)) + m.part(ToolCall("call_0", "execute_bash", ARGS))
    expected = [call_reply, call_reply, call_reply, m.part(Text("Done: the test passes now."))]
    price = load_prices(None).get("gpt-4o")
    for name in ("pipeline", "gates_closed", "as_sent", "paper", "sliding_window"):
        col = r.policies[name]
        assert col is not None
        assert [t.output_tokens for t in col.turns] == expected, name
        assert col.output_tokens == sum(expected)
        prompt_cost = (
            sum(t.uncached_tokens * price.input + t.cache_read_tokens * price.cache_read for t in col.turns)
            / 1e6
        )
        assert abs(col.cost_usd - prompt_cost - sum(expected) * price.output / 1e6) < 1e-9, name
    assert r.policies["actual"] is None  # no provider usage: no actual column
    assert any("without recorded usage counted from the recorded replies" in n for n in r.notes)


def test_recorded_usage_wins_over_the_count(tmp_path: Path) -> None:
    # A proxy log whose second call has usage and whose first has none: only the first is counted.
    def line(msgs: list[dict[str, object]], reply: str, usage: dict[str, int] | None) -> str:
        resp: dict[str, object] = {
            "model": "gpt-4o",
            "choices": [{"message": {"role": "assistant", "content": reply}}],
        }
        if usage is not None:
            resp["usage"] = usage
        return json.dumps(
            {"request": {"model": "gpt-4o", "messages": msgs}, "response": resp, "provider": "openai"}
        )

    sys_msg = {"role": "system", "content": "You answer briefly. " * 80}
    u1 = {"role": "user", "content": "What is two plus two?"}
    a1 = {"role": "assistant", "content": "Four."}
    u2 = {"role": "user", "content": "And three plus three?"}
    log = tmp_path / "p.jsonl"
    log.write_text(
        line([sys_msg, u1], "Four.", None)
        + "\n"
        + line(
            [sys_msg, u1, a1, u2], "Six.", {"prompt_tokens": 400, "completion_tokens": 7, "total_tokens": 407}
        )
        + "\n"
    )
    pipe, _ = ingest(load(log), tmp_path / "p.cpsession")
    pipe.close()
    r = simulate_file(tmp_path / "p.cpsession", SimSettings(calibrate=False))
    col = r.policies["as_sent"]
    assert col is not None
    assert [t.output_tokens for t in col.turns] == [Measure(TokenCounter()).part(Text("Four.")), 7]
    actual = r.policies["actual"]
    assert actual is not None and actual.output_tokens == 7  # the provider's figure alone
