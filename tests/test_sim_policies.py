"""Peer policies in the simulator (engine/sim/policies/) and `cp-inspect simulate --policies`.

A synthetic coding-agent session (engine.Pipeline, recorded) is replayed under every peer at a tight
window; each peer is checked against its documented behaviour. Real-data checks import one DeepSeek
trajectory and skip, saying why, when ../shared/trajectories is absent.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from engine.artifacts import Message, Text, ToolCall, ToolResult
from engine.assembly import Measure
from engine.providers.base import Block
from engine.sim.policies import ALL, PEERS, TurnView
from engine.sim.policies.clear_tool_uses import PLACEHOLDER, ClearToolUses
from engine.sim.policies.compaction import server_compaction, threshold_compaction
from engine.sim.policies.sliding_window import SlidingWindow
from engine.sim.simulate import SimSettings, simulate_events
from engine.sim.simulate_settings import SimulateError
from engine.tokens import CharTokenizer, TokenCounter
from tests.test_simulate import COUNTER, DEEPSEEK_FILE, TRAJ, _synthetic

M = Measure(TokenCounter(CharTokenizer()))
SYSTEM = (Block("identity", "system", "s" * 64, 100, True),)


def convo(rounds: int, result_chars: int = 400, tool: str = "bash") -> tuple[Message, ...]:
    msgs = [Message("user", (Text("the task"),))]
    for k in range(rounds):
        msgs.append(Message("assistant", (ToolCall(f"c{k}", tool, "{}"),)))
        msgs.append(Message("user", (ToolResult(f"c{k}", f"{k} " + "r" * result_chars),)))
    return tuple(msgs)


def view(msgs: tuple[Message, ...], window: int, turn: int = 0) -> TurnView:
    return TurnView(turn, SYSTEM, msgs, window, int(window * 0.9), True, M)


def tokens(blocks: list[Block]) -> int:
    return sum(b.tokens for b in blocks)


def test_sliding_window_keeps_the_newest_whole_rounds_within_the_window() -> None:
    msgs = convo(40)
    out = SlidingWindow().request(view(msgs, 2_000))
    assert tokens(out.blocks) <= 1_800
    kept = [b.sha for b in out.blocks[1:]]
    assert kept == [m.sha for m in msgs[len(msgs) - len(kept) :]]  # a tail of the conversation
    assert out.blocks[1].sha == msgs[len(msgs) - len(kept)].sha and len(kept) % 2 == 0  # whole rounds
    assert out.blocks[-1].marker  # the rolling breakpoint on the newest message
    small = SlidingWindow().request(view(convo(2), 2_000))
    assert len(small.blocks) == 1 + 5 and not small.actions


def test_clear_tool_uses_defaults_trigger_at_half_the_window_and_keep_three() -> None:
    peer = ClearToolUses()
    below = peer.request(view(convo(4), 20_000))
    assert not below.actions
    msgs = convo(30)  # ~3,200 tokens of results: over half of a 6,000 window
    out = peer.request(view(msgs, 6_000))
    assert out.actions[0] == "clear_tool_uses"
    # The 3 newest results are intact, every older one is the placeholder; calls stay.
    shas = [b.sha for b in out.blocks[1:]]
    assert shas[-6:] == [m.sha for m in msgs[-6:]]
    assert len(shas) == len(msgs)
    placeholder_msg = Message("user", (ToolResult("c0", PLACEHOLDER, False, "cleared"),))
    assert shas[2] == placeholder_msg.sha
    assert ClearToolUses(clear_at_least=10**9).request(view(msgs, 6_000)).actions in (
        [],
        ["drop_oldest_rounds"],
    )


def test_clear_tool_uses_exclude_tools_are_never_cleared() -> None:
    msgs = convo(30, tool="read")
    out = ClearToolUses(exclude_tools=("read",)).request(view(msgs, 6_000))
    assert "clear_tool_uses" not in out.actions


def test_server_compaction_bills_both_iterations_then_drops_history_before_the_summary() -> None:
    # compact_20260112 (docs): over the trigger, the API summarizes the current conversation (the
    # compaction iteration: the whole prompt in, the summary out), continues the response from the
    # compacted context (the message iteration: system prompt and summary in), and on later requests
    # drops every message before the compaction block.
    peer = server_compaction()
    peer.reset()
    window = 6_000
    seen = []
    for n in range(5, 60):
        msgs = convo(n)
        out = peer.request(view(msgs, window, n))
        seen.append((msgs, out))
        assert tokens(out.blocks) <= int(window * 0.9)
    k = next(i for i, (_, o) in enumerate(seen) if "compact" in o.actions)
    msgs, out = seen[k]
    prev_msgs, prev = seen[k - 1]
    assert out.compaction and len(out.side_calls) == 1
    whole = out.side_calls[0]
    # The compaction iteration reads the request as it would have gone out: the previous one, extended.
    assert [b.sha for b in whole.blocks] == [b.sha for b in SYSTEM] + [m.sha for m in msgs]
    assert tokens(whole.blocks) > int(window * 0.75) >= tokens(prev.blocks)
    assert 0 < whole.output_tokens <= tokens(whole.blocks) // 10
    # The message iteration: system prompt and the summary, nothing else.
    assert [b.sha for b in out.blocks[:1]] == [SYSTEM[0].sha] and len(out.blocks) == 2
    assert out.blocks[1].tokens == whole.output_tokens
    # Next request: the summary, then only what came after the crossing request (its reply on).
    nxt_msgs, nxt = seen[k + 1]
    assert [b.sha for b in nxt.blocks[:2]] == [b.sha for b in out.blocks]
    assert [b.sha for b in nxt.blocks[2:]] == [m.sha for m in nxt_msgs[len(msgs) :]]
    assert not nxt.side_calls and not nxt.compaction


def test_server_compaction_keeps_the_documented_150k_trigger_in_a_large_window() -> None:
    # A 1M window: the documented default (150,000 input tokens) applies, not 3/4 of the window.
    msgs = convo(200, result_chars=4_000)  # ~800k characters: ~160k tokens of CharTokenizer counts
    assert 150_000 < sum(M.item(m) for m in msgs) < 400_000
    out = server_compaction().request(view(msgs, 1_000_000))
    assert "compact" in out.actions
    # In a window too small for it (the request would overflow first), 3/4 of the window.
    small = convo(30)
    size = 100 + sum(M.item(m) for m in small)
    assert "compact" in server_compaction().request(view(small, int(size / 0.76))).actions
    assert "compact" not in server_compaction().request(view(small, int(size / 0.74))).actions


def test_clear_tool_uses_keeps_the_documented_100k_trigger_where_it_fits() -> None:
    # At a 128k window the documented trigger (100,000 input tokens) fires before the request
    # outgrows the window: it applies as documented, not scaled to half the window (64k).
    msgs = convo(40, result_chars=8_000)  # ~320k characters
    size = 100 + sum(M.item(m) for m in msgs)
    assert 64_000 < size < 100_000
    assert "clear_tool_uses" not in ClearToolUses().request(view(msgs, 128_000)).actions
    assert "clear_tool_uses" in ClearToolUses(trigger=64_000).request(view(msgs, 128_000)).actions


def test_threshold_compaction_bills_the_summarizing_call_at_95_percent() -> None:
    peer = threshold_compaction()
    window = 6_000
    seen = [(convo(n), peer.request(view(convo(n), window, n))) for n in range(5, 60)]
    k = next(i for i, (_, o) in enumerate(seen) if "compact" in o.actions)
    msgs, out = seen[k]
    assert len(out.side_calls) == 1 and out.compaction
    asked = out.side_calls[0]
    # The summarizing call reads the conversation as it would have been sent (its newest whole rounds
    # within the window: this turn's round took it past the ceiling), and writes the summary.
    sent = [b.sha for b in asked.blocks[1:]]
    assert asked.blocks[0] == SYSTEM[0] and sent == [m.sha for m in msgs[len(msgs) - len(sent) :]]
    assert window * 0.8 < tokens(asked.blocks) <= window * 0.9 and asked.output_tokens > 0
    # Then the summary and the newest round.
    assert out.blocks[1].tokens == asked.output_tokens and tokens(out.blocks) < window * 0.5
    assert [b.sha for b in out.blocks[2:]] == [m.sha for m in msgs[-2:]]
    assert all(tokens(o.blocks) <= window * 0.95 for _, o in seen)


@pytest.fixture(scope="module")
def synth() -> list[dict[str, Any]]:
    return list(_synthetic(turns=24).journal.events)


def test_simulate_policies_all_gives_every_column_deterministically(synth: list[dict[str, Any]]) -> None:
    s = SimSettings(window=5_000, policies=["all"])
    a = simulate_events(synth, s, counter=COUNTER)
    b = simulate_events(synth, s, counter=COUNTER)
    for name in ALL:
        fa, fb = a.policies[name], b.policies[name]
        assert fa is not None and fb is not None
        assert fa.to_json(per_turn=True) == fb.to_json(per_turn=True)
    # The tight-window policies all send fewer tokens than the paper baseline, which never compacts.
    paper = a.policies["paper"]
    assert paper is not None and paper.compactions == 0
    for name in ("sliding_window", "cost_aware", "wave1"):
        f = a.policies[name]
        assert f is not None and f.totals.input_tokens < paper.totals.input_tokens
    assert set(PEERS) | {"wave1", "cost_aware"} == set(ALL)


def test_unknown_policy_is_one_clear_error(synth: list[dict[str, Any]]) -> None:
    with pytest.raises(SimulateError, match="known policies: all, paper"):
        simulate_events(synth, SimSettings(policies=["nope"]), counter=COUNTER)


def test_cli_policies_table_and_json(tmp_path: Path) -> None:
    from inspector.cli import app

    rec = tmp_path / "s.cpsession"
    _synthetic(rec, turns=20).close()
    # Two recordings (one given twice is refused: it was counted twice in the totals).
    rec2 = tmp_path / "s2.cpsession"
    shutil.copy(rec, rec2)
    runner = CliRunner()
    res = runner.invoke(app, ["simulate", str(rec), str(rec2), "--window", "5000", "--policies", "all"])
    assert res.exit_code == 0, res.output
    assert "prices: claude-sonnet-4" in res.output and "cache rules: anthropic" in res.output
    for name in ALL:
        assert name in res.output
    for col in ("prompt tokens", "billed new", "hit rate", "cost (USD)", "compactions", "breaks"):
        assert col in res.output
    res = runner.invoke(app, ["simulate", str(rec), "--window", "5000", "--policies", "all", "--json"])
    j = json.loads(res.output)
    assert set(ALL) <= set(j["policies"]) and j["prices"]["model"] == "claude-sonnet-4"
    bad = runner.invoke(app, ["simulate", str(rec), "--policies", "bogus"])
    assert bad.exit_code != 0 and "known policies" in bad.output and "Traceback" not in bad.output


def test_rules_and_prices_mismatch_is_said(synth: list[dict[str, Any]]) -> None:
    r = simulate_events(synth, SimSettings(provider="anthropic", model="deepseek-chat"), counter=COUNTER)
    assert any("anthropic cache rules applied at deepseek-chat prices" in n for n in r.notes)


def test_real_calibration_is_applied_and_reported(tmp_path: Path) -> None:
    if not DEEPSEEK_FILE.exists():
        pytest.skip(f"real trajectories not found at {TRAJ} (set CONTEXTPIPE_TRAJECTORIES)")
    from engine.importers import load
    from engine.importers.ingest import ingest

    rec = tmp_path / "r.cpsession"
    pipe, _ = ingest(load(DEEPSEEK_FILE), rec, counter=COUNTER)
    events = list(pipe.journal.events)
    pipe.close()
    on = simulate_events(events, SimSettings(), counter=COUNTER)
    off = simulate_events(events, SimSettings(calibrate=False), counter=COUNTER)
    assert 1.0 < on.calibration < 1.3  # DeepSeek counts more tokens than cl100k
    pon, poff = on.policies["pipeline"], off.policies["pipeline"]
    assert pon is not None and poff is not None
    assert pon.totals.input_tokens == pytest.approx(poff.totals.input_tokens * on.calibration, rel=0.01)
    # Calibrated, the engine's own figure comes within a few percent of the provider's real count.
    actual = on.policies["actual"]
    assert actual is not None
    assert abs(pon.totals.input_tokens / actual.totals.input_tokens - 1) < abs(
        poff.totals.input_tokens / actual.totals.input_tokens - 1
    )


def test_engine_policies_weigh_compactions_at_the_simulated_rules_and_named_prices(
    synth: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    # An Anthropic recording simulated at DeepSeek: the engine's compaction decisions must weigh the
    # cache rules and prices the column is billed by, not the recorded model's (issue 12, item 4).
    from engine.policy import cost_aware

    seen: list[tuple[str, float, float]] = []
    real = cost_aware.run

    def spy(*a: Any, **kw: Any) -> Any:
        c = kw["cache"]
        seen.append((c.rules, round(c.read_ratio, 3), round(c.write_ratio, 3)))
        return real(*a, **kw)

    monkeypatch.setattr(cost_aware, "run", spy)
    r = simulate_events(
        synth,
        SimSettings(window=5_000, provider="deepseek", model="deepseek-chat", policies=["cost_aware"]),
        counter=COUNTER,
    )
    assert seen and set(seen) >= {("deepseek", 0.1, 1.0)}
    # Only the recorded column (none here: the recording was made by the engine, so as_sent is the
    # engine under the recorded settings) may weigh by the recorded model's rules.
    assert sum(1 for s in seen if s != ("deepseek", 0.1, 1.0)) <= r.turns
    assert any("weigh compactions by deepseek cache rules" in n and "deepseek-chat" in n for n in r.notes)


def test_calibration_note_says_where_it_applies_and_whose_tokens(tmp_path: Path) -> None:
    if not DEEPSEEK_FILE.exists():
        pytest.skip(f"real trajectories not found at {TRAJ} (set CONTEXTPIPE_TRAJECTORIES)")
    from engine.importers import load
    from engine.importers.ingest import ingest

    pipe, _ = ingest(load(DEEPSEEK_FILE), tmp_path / "r.cpsession", counter=COUNTER)
    events = list(pipe.journal.events)
    pipe.close()
    same = simulate_events(events, SimSettings(), counter=COUNTER)
    note = next(n for n in same.notes if n.startswith("token counts scaled"))
    assert "as_sent included" in note and "no recorded usage" not in note
    other = simulate_events(events, SimSettings(provider="anthropic", model="claude-sonnet-4"), counter=COUNTER)
    note = next(n for n in other.notes if n.startswith("token counts scaled"))
    assert "claude-sonnet-4 has no recorded usage here" in note


def test_sliding_window_is_langchains_trim_messages_with_start_on_ai_once_it_trims() -> None:
    # The real trim_messages (langchain_core, installed): strategy="last", include_system=True,
    # allow_partial=False, max_tokens = the request's ceiling, counted with the same token counts. When
    # everything fits nothing is trimmed (the task stays); once it trims, start_on="ai" keeps every tool
    # result with its call (without it the kept history may open on an orphaned ToolMessage).
    from langchain_core.messages import (
        AIMessage,
        BaseMessage,
        HumanMessage,
        SystemMessage,
        ToolMessage,
        trim_messages,
    )

    for rounds, window in ((3, 2_000), (40, 2_000), (40, 5_000), (25, 3_300), (60, 9_000)):
        msgs = convo(rounds, result_chars=137 + rounds)
        v = view(msgs, window)
        sizes = {"sys": SYSTEM[0].tokens} | {str(i): M.item(m) for i, m in enumerate(msgs)}
        lc: list[BaseMessage] = [SystemMessage("system", id="sys")]
        for i, m in enumerate(msgs):
            if m.role == "assistant":
                lc.append(AIMessage("", id=str(i), tool_calls=[{"name": "bash", "args": {}, "id": f"c{i}"}]))
            elif i == 0:
                lc.append(HumanMessage("the task", id=str(i)))
            else:
                lc.append(ToolMessage("result", id=str(i), tool_call_id=f"c{i - 1}"))

        def count(ms: list[BaseMessage], sizes: dict[str, int] = sizes) -> int:
            return sum(sizes[str(x.id)] for x in ms)

        kw: dict[str, Any] = {"strategy": "last", "include_system": True, "allow_partial": False}
        want = trim_messages(lc, max_tokens=v.ceiling, token_counter=count, **kw)
        if count(want) < count(lc):  # it trimmed: the kept history opens on an AI message
            want = trim_messages(lc, max_tokens=v.ceiling, token_counter=count, start_on="ai", **kw)
        got = SlidingWindow().request(v)
        shas = {m.sha: str(i) for i, m in enumerate(msgs)}
        assert ["sys"] + [shas[b.sha] for b in got.blocks[1:]] == [str(x.id) for x in want], (rounds, window)
