"""Long-context and peak-rate prices (sim25's pricing leftovers).

Claude Sonnet 4 and 4.5 bill a call whose input passes 200K tokens (possible only with the 1M-context
beta) at $6 input / $22.50 output, every token of it, cache reads and writes counting towards the line
and billed at the caching multipliers of the $6 rate. Before, every such call was billed at the 200K
rates ($3 / $15): a 250K-token prompt read half its price.

DeepSeek's V4 lineup (deepseek-flash, whose legacy name is deepseek-v4-flash, and deepseek-v4-pro) had no
rows: simulate refused a V4 recording unless given --model. Its rows are the peak (list) rates, and
simulate says that off-peak hours halve them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.errors import ConfigError
from engine.importers import load
from engine.importers.ingest import ingest
from engine.sim.cachesim import CallCache
from engine.sim.pricing import PriceTable, cost, crosses_long_context, load_prices
from engine.sim.simulate import SimSettings, simulate_file


@pytest.mark.parametrize("model", ["claude-sonnet-4-5-20250929", "claude-sonnet-4", "anthropic/claude-sonnet-4-5"])
def test_a_call_past_200k_input_tokens_bills_every_token_at_the_long_context_rates(model: str) -> None:
    # 250K uncached in, 2K out: $6 x 0.25 + $22.50 x 0.002 (it was $3 x 0.25 + $15 x 0.002).
    assert cost(model, CallCache(250_000, 0, 0, 250_000, 0), 2_000) == pytest.approx(1.545)
    # At the line itself the standard rates stand.
    assert cost(model, CallCache(200_000, 0, 0, 200_000, 0), 2_000) == pytest.approx(0.63)


def test_cache_reads_and_writes_count_towards_the_line_and_bill_at_the_long_rates() -> None:
    # 150K read + 40K written (10K of them for an hour) + 20K uncached = 210K: past the line.
    c = CallCache(210_000, 150_000, 40_000, 20_000, 10_000)
    usd = cost("claude-sonnet-4-5", c, 1_000)
    expected = (150_000 * 0.6 + 30_000 * 7.5 + 10_000 * 12.0 + 20_000 * 6.0 + 1_000 * 22.5) / 1e6
    assert usd == pytest.approx(expected)
    assert crosses_long_context(load_prices().get("claude-sonnet-4-5"), c)


def test_totals_of_several_calls_are_billed_at_the_base_rates() -> None:
    # Ten calls of 30K are 300K in all, but none of them is a long-context call.
    tot = CallCache(300_000, 0, 0, 300_000, 0)
    assert cost("claude-sonnet-4-5", tot, 0, totals=True) == pytest.approx(0.9)


def test_other_claude_rows_have_no_long_context_rates() -> None:
    # Opus 4.6 and Sonnet 4.6 serve 1M tokens at their standard rates (no premium since the window's GA).
    for m in ("claude-sonnet-4-6", "claude-opus-4-6", "claude-haiku-4-5", "claude-3-7-sonnet"):
        assert load_prices().get(m).long_context is None, m


def test_deepseek_v4_rows_are_the_peak_rates_and_say_so() -> None:
    t = load_prices()
    flash = t.get("deepseek-v4-flash")  # the legacy name, billed as deepseek-flash
    assert (flash.model, flash.input, flash.cache_read, flash.cache_write, flash.output) == (
        "deepseek-flash", 0.3, 0.006, 0.3, 1.2,
    )
    pro = t.get("deepseek-v4-pro")
    assert (pro.input, pro.cache_read, pro.cache_write, pro.output) == (1.32, 0.044, 1.32, 3.96)
    for row in (flash, pro):
        assert "peak rate" in row.note and "01:00-04:00 and 06:00-10:00 UTC" in row.note
    # deepseek-chat keeps the V3.2 prices its recordings were billed at.
    assert t.get("deepseek-chat").input == 0.28


@pytest.mark.parametrize(
    "lc,msg",
    [
        ({"input": 6, "output": 22.5, "cache_read": 0.6, "cache_write": 7.5}, "lacks above_input_tokens"),
        ({"above_input_tokens": "200k", "input": 6, "output": 22.5, "cache_read": 0.6, "cache_write": 7.5},
         "above_input_tokens must be a whole number"),
        ({"above_input_tokens": 200000, "input": -6, "output": 22.5, "cache_read": 0.6, "cache_write": 7.5},
         "negative price"),
        ("6.0", "long_context is not an object"),
    ],
)
def test_a_bad_long_context_object_is_a_config_error_naming_the_row(lc: object, msg: str) -> None:
    row = {"provider": "x", "input": 3, "output": 15, "cache_read": 0.3, "cache_write": 3.75,
           "as_of": "2026-12-04", "source": "test", "long_context": lc}
    with pytest.raises(ConfigError, match=f"row 'm.*{msg}"):
        PriceTable.from_dict({"models": {"m": row}})


def _big_session(path: Path) -> Path:
    """An OpenHands-shaped trajectory whose prompt passes 200K tokens on its last calls."""
    tool = {"type": "function", "function": {"name": "execute_bash", "description": "Run a command.",
                                             "parameters": {"type": "object",
                                                            "properties": {"command": {"type": "string"}}}}}
    msgs: list[dict[str, object]] = [
        {"role": "system", "content": "You are a careful engineer. " * 60},
        {"role": "user", "content": "Read the logs and fix the crash. " * 40},
    ]
    for k in range(4):
        args = json.dumps({"command": f"cat log{k}.txt"})
        msgs.append({"role": "assistant", "content": "Reading the next log.",
                     "tool_calls": [{"id": f"c{k}", "type": "function",
                                     "function": {"name": "execute_bash", "arguments": args}}]})
        # ~80K tokens of distinct lines a call: the prompt passes 200K from the fourth call on.
        msgs.append({"role": "tool", "tool_call_id": f"c{k}",
                     "content": "".join(f"log{k} line {i} status ok value {i * 7 % 1000}\n" for i in range(8000))})
    msgs.append({"role": "assistant", "content": "Found it."})
    path.write_text(json.dumps({"messages": msgs, "tools": [tool], "run_id": "claude-sonnet-4-5_maxiter_30_N_v1"}))
    return path


def test_simulate_bills_long_context_calls_whole_and_says_so(tmp_path: Path) -> None:
    pipe, _ = ingest(load(_big_session(tmp_path / "big.json")), tmp_path / "big.cpsession")
    pipe.close()
    r = simulate_file(
        tmp_path / "big.cpsession",
        SimSettings(provider="anthropic", model="claude-sonnet-4-5", window=1_000_000, policies=["paper"]),
    )
    row = load_prices().get("claude-sonnet-4-5")
    # The pipeline column trims the logs well under the line; the others send them whole.
    assert r.policies["pipeline"] is not None and r.policies["pipeline"].long_context_calls == 0
    for name in ("gates_closed", "as_sent", "paper"):
        col = r.policies[name]
        assert col is not None
        long_turns = [t for t in col.turns if t.uncached_tokens + t.cache_read_tokens + t.cache_write_tokens > 200_000]
        assert long_turns, name  # the session does pass the line
        assert col.long_context_calls == len(long_turns)
        for t in long_turns:
            lc = row.long_context
            assert lc is not None
            # cache_write_1h is 0 here: the simulator's marks are 5-minute ones
            expected = (t.uncached_tokens * lc.input + t.cache_read_tokens * lc.cache_read
                        + t.cache_write_tokens * lc.cache_write + t.output_tokens * lc.output) / 1e6
            assert t.cost_usd == pytest.approx(expected), name
        # The column's cost is its calls' costs, not its totals at the 200K rates.
        assert col.cost_usd == pytest.approx(sum(t.cost_usd for t in col.turns)), name
    note = next(n for n in r.notes if n.startswith("calls over 200,000 input tokens"))
    assert "claude-sonnet-4-5's long-context rates ($6.0/M input" in note and "as_sent 2 of 5" in note
