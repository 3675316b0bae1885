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
        assert "01:00-04:00 and 06:00-10:00 UTC" in row.note
        assert row.peak_hours == ((1, 4), (6, 10)) and row.peak_weekdays_only
        assert row.off_peak is not None and row.off_peak.input == row.input / 2
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


# ------------------------------------------------------------------------------------------ off-peak


def _at(iso: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(iso).timestamp()


@pytest.mark.parametrize(
    "iso,off",
    [
        ("2026-12-04T09:30:00+00:00", False),  # a Friday, in the 06:00-10:00 UTC peak
        ("2026-12-04T02:00:00+00:00", False),  # in the 01:00-04:00 peak
        ("2026-12-04T05:00:00+00:00", True),  # between the two
        ("2026-12-04T10:00:00+00:00", True),  # the peak ends at 10:00
        ("2026-12-05T09:00:00+00:00", True),  # a Saturday
        ("2026-04-10T05:00:00+00:00", False),  # before off-peak billing began (2026-08-16 16:00 UTC)
        ("1970-01-01T05:00:00+00:00", False),  # no real time (an import without timestamps)
    ],
)
def test_a_deepseek_v4_call_bills_by_its_hour(iso: str, off: bool) -> None:
    from engine.sim.pricing import rates_at

    row = load_prices().get("deepseek-flash")
    assert (rates_at(row, _at(iso)) is row.off_peak) is off
    assert rates_at(row, None) is row


def _deepseek_session(path: Path, start: float, turns: int = 6) -> Path:
    from engine import Pipeline

    clock = iter(range(int(start), int(start) + 100_000, 30))
    p = Pipeline("deepseek-flash", provider="openai", window=64_000, record=path, clock=lambda: next(clock))
    p.identity("You are a careful coding agent. Read before you edit; run the tests after. " * 40)
    p.user("The test fails with a KeyError.")
    for t in range(turns):
        req = p.next_request()
        p.record_usage({"input_tokens": req.trace["final_tokens"], "output_tokens": 20})
        p.assistant(f"step {t}")
        p.user(f"output {t}\n" * 20)
    p.close()
    return path


def test_simulate_bills_off_peak_calls_at_half_and_says_how_many(tmp_path: Path) -> None:
    row = load_prices().get("deepseek-flash")
    off = simulate_file(_deepseek_session(tmp_path / "sat.cpsession", _at("2026-12-05T09:00:00+00:00")))
    peak = simulate_file(_deepseek_session(tmp_path / "fri.cpsession", _at("2026-12-04T07:00:00+00:00")))
    for name in ("pipeline", "gates_closed", "as_sent", "actual"):
        a, b = off.policies[name], peak.policies[name]
        assert a is not None and b is not None
        assert a.off_peak_calls == len(a.turns) and b.off_peak_calls == 0, name
        # The same calls, half the price: every rate off-peak is half the list one.
        assert a.cost_usd == pytest.approx(b.cost_usd / 2), name
        assert a.cost_usd == pytest.approx(sum(t.cost_usd for t in a.turns))
    note = next(n for n in off.notes if n.startswith("deepseek-flash: calls made off-peak"))
    assert "pipeline 6 of 6" in note and "01:00-04:00 and 06:00-10:00 UTC on weekdays" in note
    assert any(n.startswith("deepseek-flash: calls made off-peak") and "pipeline 0 of 6" in n for n in peak.notes)
    assert row.off_peak is not None


@pytest.mark.parametrize(
    "op,msg",
    [
        ({"input": 1, "output": 1, "cache_read": 0.1, "cache_write": 1, "peak_hours_utc": [[1, 4]]}, "lacks since"),
        ({"input": 1, "output": 1, "cache_read": 0.1, "cache_write": 1, "peak_hours_utc": [[4, 1]],
          "since": "2026-08-16T16:00:00Z"}, "peak_hours_utc must be a list of \\[start, end\\) UTC hours"),
        ({"input": 1, "output": 1, "cache_read": 0.1, "cache_write": 1, "peak_hours_utc": [[1, 4]],
          "since": "2026-08-16 16:00"}, "since must be an ISO time with its zone"),
        ({"input": -1, "output": 1, "cache_read": 0.1, "cache_write": 1, "peak_hours_utc": [[1, 4]],
          "since": "2026-08-16T16:00:00Z"}, "negative price"),
    ],
)
def test_a_bad_off_peak_object_is_a_config_error_naming_the_row(op: object, msg: str) -> None:
    row = {"provider": "deepseek", "input": 2, "output": 2, "cache_read": 0.2, "cache_write": 2,
           "as_of": "2026-12-04", "source": "test", "off_peak": op}
    with pytest.raises(ConfigError, match=f"row 'm.*{msg}"):
        PriceTable.from_dict({"models": {"m": row}})
