"""cost_aware on a turn where the agent broke its own cache (issue 12): an agent that edits an earlier
message (SWE-agent's last_n_observations truncating old tool outputs) re-sends everything from that
message on whatever the policy does, so a compaction cutting at or past the edit re-sends nothing more
that turn: its pay-back is immediate and it rides on the agent's break. A cut whose kept part holds
the edit re-sends only what lies before it. Each decision says so in the trace, with its numbers.
"""

from __future__ import annotations

from typing import Any

from engine.policy.cachecost import CacheRules, payback
from engine.recording.replay import Replayer
from tests.test_policy_cost_aware import COUNTER, make, turn

ANTHROPIC = CacheRules("anthropic", 0.1, 1.25)


def test_a_cut_at_or_past_the_agents_edit_re_sends_nothing_more() -> None:
    # 13,000 tokens: a 2,000-token stable prefix, a cut of 5,000, 8,000 kept.
    plain = payback(ANTHROPIC, 5_000, 8_000, 2_000, horizon=100)
    assert plain.resend_uncached == 6_000 and plain.agent_resends is None
    # The agent edited at token 4,000 (inside the cut part): the uncut request re-sends 9,000 anyway.
    inside = payback(ANTHROPIC, 5_000, 8_000, 2_000, horizon=100, broken_at=4_000)
    assert inside.resend_uncached == 0 and inside.one_off == 0 and inside.payback_turns == 0
    assert inside.worth and inside.agent_resends == 9_000
    assert inside.text() == (
        "saves 5.0k/turn, re-sends 0 uncached (the agent's own edit re-sends 9.0k anyway), pays back after 0 turns"
    )
    assert inside.to_dict()["agent_resends"] == 9_000
    # ... at 10,000 (in the kept part): only the kept tokens before it, 10,000 - 2,000 - 5,000.
    kept = payback(ANTHROPIC, 5_000, 8_000, 2_000, horizon=100, broken_at=10_000)
    assert kept.resend_uncached == 3_000 and kept.agent_resends == 3_000
    assert 0 < kept.payback_turns < plain.payback_turns
    # A session the agent never edits traces as before: no new key.
    assert "agent_resends" not in plain.to_dict()


def _session(edit: str | None, turns: int = 30, at: int = 25) -> tuple[list[dict[str, Any]], Any]:
    """make(12_000)'s steady session (over the target from turn 22, where an early cut does not pay
    yet); with `edit`, the agent truncates that call's result before turn `at`'s request."""
    pipe = make(12_000)
    decisions = []
    for k in range(turns):
        if edit is not None and k == at:
            assert pipe.edit_result(edit, "[old output omitted]")
        decisions.append(turn(pipe, k, 400)["compaction"])
    return decisions, pipe


def test_the_compaction_rides_on_the_agents_break_and_replays() -> None:
    never, _ = _session(None)
    assert never[25]["decision"] == "held" and never[25]["reason"].startswith("not worth it:")
    edited, pipe = _session("c1")  # turn 1's result: in the part a cut to the target drops
    d = edited[25]
    assert d["decision"] == "compacted" and not d["forced"]
    (ev,) = [e for e in pipe.journal.events if e["k"] == "edit"]
    assert ev["at"] < d["cut"]
    assert d["reason"] == "the agent's own edit breaks the cache this turn: the cut re-sends nothing else"
    assert d["resend_uncached"] == 0 and d["payback_turns"] == 0 and d["agent_resends"] > 0
    assert d["sent_tokens"] < d["tokens"]
    assert "the agent's own edit re-sends" in d["text"]
    # The turns before the edit decided as in the session never edited; after it, appends again.
    assert edited[:25] == never[:25]
    assert all(x["decision"] == "held" and "agent_resends" not in x for x in edited[26:])
    report = Replayer(pipe.journal.events, COUNTER).verify()
    assert report.ok, report.mismatches[:1]


def test_an_edit_in_what_a_cut_keeps_is_priced_only_before_it() -> None:
    d = _session("c22")[0][25]  # turn 22's result: kept by a cut to the target
    assert d["decision"] == "held"
    assert 0 < d["agent_resends"] < d["resend_uncached"] < d["tokens"]
    assert "(the agent's own edit re-sends" in d["reason"]


def _two_edits(second: bool) -> list[dict[str, Any]]:
    pipe = make(12_000)
    ds = []
    for k in range(30):
        if k == 25:
            assert pipe.edit_result("c1", "[old output omitted]")
        if k == 27 and second:
            assert pipe.edit_result("c2", "[old output omitted]")
        ds.append(turn(pipe, k, 400)["compaction"])
    return ds


def test_an_edit_of_a_message_already_cut_is_no_break() -> None:
    # After the agent's break turned into a compaction, turn 2's result (message 6: the task, then a
    # reply and its result's message a turn) lies behind the cut, where the note stands for it: its edit
    # changes nothing sent, and nothing is priced for it.
    once, twice = _two_edits(False), _two_edits(True)
    assert once[25]["decision"] == "compacted" and once[25]["cut"] > 6
    assert once[27]["decision"] == "held" and "agent_resends" not in once[27]
    assert twice[:27] == once[:27]
    for a, b in zip(once[27:], twice[27:], strict=True):
        # The same request and cut weighed the same way; only the raw history (what the agent holds) is
        # shorter, and with it the growth the horizon is estimated from.
        same = ("decision", "cut", "tokens", "sent_tokens", "saves_per_turn", "resend_uncached")
        assert [a[k] for k in same] == [b[k] for k in same] and "agent_resends" not in b
        assert b["raw_tokens"] < a["raw_tokens"]
