"""What `simulate --policies` reports for the peer policies means what its headers say (sim23).

On the demo recording: a peer's compactions are its own (the paper baseline never compacts, whatever
the session changes in its system prompt), its cache breaks name its own step, a summarizing call is
billed as a call of its own, and the prices line names the minimum cacheable prefix of the model it
simulated."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.sim.cachesim import Block, CacheSimulator, Call, min_cacheable_tokens
from engine.sim.simulate import SimSettings, simulate_events
from engine.sim.simulate_read import load_recording_events

DEMO = Path(__file__).resolve().parents[1] / "demo_sessions" / "scout-anthropic.cpsession"


@pytest.fixture(scope="module")
def demo() -> list:
    return load_recording_events(DEMO)[0]


def test_paper_never_compacts_and_peer_breaks_name_their_own_step(demo: list) -> None:
    r = simulate_events(demo, SimSettings(policies=["paper", "sliding_window", "clear_tool_uses"]))
    paper = r.policies["paper"]
    assert paper is not None
    # The session itself changes the prefix (a latch flips, a section appears): breaks, not compactions.
    assert paper.compactions == 0 and paper.cache_breaks and paper.cache_breaks > 0
    assert paper.cache_break_causes is not None and "latch flipped: permissions" in paper.cache_break_causes
    sw = r.policies["sliding_window"]
    assert sw is not None and sw.cache_break_causes is not None
    assert sw.cache_break_causes.get("history rewritten by trim_messages", 0) > 0
    # A compaction is a turn whose trim dropped something the previous request had sent.
    assert sw.compactions == sum(1 for t in sw.turns if t.compaction)
    assert 0 < sw.compactions <= sum(1 for t in sw.turns if t.cache_break)
    ctu = r.policies["clear_tool_uses"]
    assert ctu is not None and ctu.compactions and ctu.compactions > 0


def test_a_summarizing_call_is_billed_as_a_call_of_its_own(demo: list) -> None:
    r = simulate_events(demo, SimSettings(policies=["server_compaction", "threshold_compaction"]))
    for name in ("server_compaction", "threshold_compaction"):
        f = r.policies[name]
        assert f is not None and f.compactions
        calls = f.to_json()["calls"]
        # One call per turn, plus one summarizing call per compaction.
        assert calls == r.simulated_turns + sum(1 for t in f.turns if t.compaction)
        assert calls > r.simulated_turns
        # Each call's figures add up to the column's.
        assert sum(t.prompt_tokens for t in f.turns) == f.totals.input_tokens
        assert sum(t.output_tokens for t in f.turns) == f.output_tokens
        assert sum(t.cost_usd for t in f.turns) == pytest.approx(f.cost_usd, rel=1e-9)
        # The summarizing call bills the summary as its output, the turn's call the reply.
        by_turn: dict[int, list] = {}
        for t in f.turns:
            by_turn.setdefault(t.turn, []).append(t)
        pipe = r.policies["pipeline"]
        assert pipe is not None
        replies = {t.turn: t.output_tokens for t in pipe.turns}
        for turn, ts in by_turn.items():
            assert ts[-1].output_tokens == replies[turn]
            if len(ts) == 2:
                assert ts[1].compaction and 0 < ts[0].output_tokens <= 2_000


def test_prices_line_names_the_models_minimum_and_the_1_hour_price(demo: list) -> None:
    r = simulate_events(demo, SimSettings(model="claude-haiku-4-5"))
    line = r.prices_line()
    assert "prefixes >= 4,096 tokens for claude-haiku-4-5" in line and ">=1,024" not in line
    assert "(1-hour $2.0/M)" in line
    assert r.to_json()["prices"]["cache_write_1h"] == 2.0
    sonnet = simulate_events(demo, SimSettings()).prices_line()
    assert "prefixes >= 1,024 tokens for claude-sonnet-4" in sonnet


def test_claude_opus_4_7_caches_from_2048_tokens() -> None:
    # Anthropic's prompt-caching docs ("Cache limitations", read 2026-12-04): 2,048 tokens for Opus 4.7
    # (an earlier edition gave 4,096, with Opus 4.6 and 4.5, which stay at 4,096).
    assert min_cacheable_tokens("anthropic", "claude-opus-4-7") == 2048
    short = [Call((Block("a" * 64, 1_500, breakpoint=True),), t) for t in (0.0, 10.0)]
    res = CacheSimulator("anthropic", "claude-opus-4-7").simulate(short)
    assert [c.cache_read for c in res] == [0, 0] and [c.cache_write for c in res] == [0, 0]
    res = CacheSimulator("anthropic", "claude-sonnet-4").simulate(short)
    assert [c.cache_read for c in res] == [0, 1_500]
    calls = [Call((Block("a" * 64, 3_000, breakpoint=True),), t) for t in (0.0, 10.0)]
    assert [c.cache_read for c in CacheSimulator("anthropic", "claude-opus-4-7").simulate(calls)] == [0, 3_000]
    assert [c.cache_read for c in CacheSimulator("anthropic", "claude-opus-4-6").simulate(calls)] == [0, 0]


def test_policies_table_over_recordings_of_different_rules_says_each(demo: list) -> None:
    # Two recordings of one model through two providers, no --model: one is simulated under Anthropic's
    # cache rules, the other under OpenAI's. The table sums them, so it must say both, each with the
    # recording it applies to (it printed the first recording's line alone).
    from inspector.simulate_command import render_policies

    other = load_recording_events(DEMO.with_name("scout-openai.cpsession"))[0]
    s = SimSettings(policies=["paper"])
    reports = [
        simulate_events(demo, s, source="a.cpsession"),
        simulate_events(other, s, source="b.cpsession"),
    ]
    assert [r.cache_rules for r in reports] == ["anthropic", "openai"]
    out = render_policies(reports)
    rules = [ln for ln in out.splitlines() if ln.startswith("  prices:")]
    assert len(rules) == 2
    assert "cache rules: anthropic" in rules[0] and rules[0].endswith("(a.cpsession)")
    assert "cache rules: openai" in rules[1] and rules[1].endswith("(b.cpsession)")
    # A note both share is said once and names neither (it applies to every recording); the mismatch note
    # names only the recording it is about.
    lines = out.splitlines()
    shared = [ln for ln in lines if "paper: rebuilt from the uncompacted conversation" in ln]
    assert len(shared) == 1 and "a.cpsession" not in shared[0] and "b.cpsession" not in shared[0], shared
    assert any("openai cache rules applied at" in ln and ln.endswith("(b.cpsession)") for ln in lines)
    # One recording: no names, as before.
    one = render_policies(reports[:1])
    assert "(a.cpsession)" not in one.split("\n")[1] and "cache rules: anthropic" in one


def test_requests_larger_than_the_window_are_said(demo: list) -> None:
    # The demo's conversation outgrows its 10,200-token window: the rebuilt paper baseline (no
    # compaction) sends requests no provider would accept, and every peer keeps the newest round whole,
    # even a round larger than the window. The figures stand, with a note saying so.
    r = simulate_events(demo, SimSettings(policies=["paper", "sliding_window", "cost_aware"]))
    note = next(n for n in r.notes if n.startswith("requests larger than their window"))
    paper = r.policies["paper"]
    assert paper is not None
    over = sum(1 for t in paper.turns if t.prompt_tokens > 10_200)
    assert over > 0 and f"paper {over} of {len(paper.turns)} calls (window 10,200)" in note
    assert "sliding_window" in note and "cost_aware" not in note


def test_a_section_that_appears_is_named_not_read_as_history_rewritten(demo: list) -> None:
    # Turn 20 of the demo adds an `emergent` system section between the system prompt and the
    # history: the cache breaks there, and the cause is the new section, not the history after it.
    from engine.feedback import attribute_cache_break
    from engine.providers.base import Block as EBlock

    sys_b, new = (
        EBlock("identity", "system", "a" * 64, 10, False),
        EBlock("emergent", "system", "e" * 64, 5, False),
    )
    hist = [EBlock("history", "messages", c * 64, 20, False) for c in "mn"]
    why = attribute_cache_break(
        [sys_b, *hist], [sys_b, new, *hist], 3, model_changed=False, flipped_latches=[], actions=[]
    )
    assert why == {"section": "emergent", "cause": "section emergent content changed"}
    # Removed, it still names the block that vanished.
    why = attribute_cache_break(
        [sys_b, new, *hist], [sys_b, *hist], 4, model_changed=False, flipped_latches=[], actions=[]
    )
    assert why == {"section": "emergent", "cause": "section emergent content changed"}
    paper = simulate_events(demo, SimSettings(policies=["paper"])).policies["paper"]
    assert paper is not None and paper.cache_break_causes is not None
    assert "history rewritten" not in paper.cache_break_causes
    assert [t.cache_break for t in paper.turns if t.turn == 20] == ["section emergent content changed"]


def test_json_gives_each_column_the_tables_billed_new_tokens(demo: list) -> None:
    # `simulate --policies --json` of one recording: every column carries the table's "billed new"
    # figure (the multi-recording total had it, the per-recording columns did not).
    r = simulate_events(demo, SimSettings(policies=["paper", "cost_aware"]))
    for name, f in r.to_json()["policies"].items():
        if f is None:
            continue
        assert f["billed_new_tokens"] == f["uncached_tokens"] + f["cache_write_tokens"], name
        assert f["prompt_tokens"] == f["billed_new_tokens"] + f["cache_read_tokens"], name
