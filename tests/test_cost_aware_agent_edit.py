"""cost_aware on a turn where the agent broke its own cache (issue 12): an agent that edits an earlier
message (SWE-agent's last_n_observations truncating old tool outputs) re-sends everything from that
message on whatever the policy does, so a compaction cutting at or past the edit re-sends nothing more
that turn: its pay-back is immediate and it rides on the agent's break. A cut whose kept part holds
the edit re-sends only what lies before it. Each decision says so in the trace, with its numbers.
And a cache breakpoint after the newest message the agent edited, which the next turn reads.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any, Literal

from engine.artifacts import Message, Text
from engine.importers.ingest import ingest
from engine.importers.model import CallRec, ImportedSession, MessageRec, ToolCallRec
from engine.optimize.markers import edit_item
from engine.policy.cachecost import CacheRules, payback
from engine.recording.replay import Replayer
from engine.sim.simulate import simulate_file
from engine.sim.simulate_settings import SimSettings
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


# ------------------------------------------------------------------ a breakpoint after the agent's edit
# SWE-agent's last_n_observations replaces the output that ages out with a line, one a turn, oldest
# first: each request breaks the cache at that output. With breakpoints on the task and the tail only,
# every later turn read the prefix through the task and wrote the rest again; a breakpoint after the
# newest message the agent edited is the next turn's read (markers.edit_marker).

BIG = "".join(f"collected test {i} ... ok\n" for i in range(60))
CUT = "Old environment output: (60 lines omitted)"


def _elides(calls: int = 12, keep: int = 2) -> ImportedSession:
    """A run whose agent sends only its last `keep` outputs whole: from call keep + 1 on, each call
    elides one more old output where it stood (a system prompt over Anthropic's 1,024-token minimum)."""
    system = MessageRec("system", "You are a careful coding agent. " * 200)
    task = MessageRec("user", "Fix the test.")
    say = "I will run the tests again and read what fails. " * 4
    replies = [
        MessageRec("assistant", f"Step {k}: {say}", (ToolCallRec(f"c{k}", "bash", '{"command": "pytest"}'),))
        for k in range(calls)
    ]
    recs = []
    for k in range(calls):
        msgs: list[MessageRec] = [system, task]
        for j in range(k):
            msgs += [replies[j], MessageRec("tool", CUT if j < k - keep else BIG, tool_call_id=f"c{j}")]
        recs.append(CallRec(tuple(msgs), replies[k], (), None, float(k), "claude-sonnet-4"))
    return ImportedSession(
        source="synthetic", format="swe-agent", calls=recs, model="claude-sonnet-4", provider="anthropic"
    )


def test_the_prefix_through_the_agents_newest_edit_is_read_the_next_turn(tmp_path: Path) -> None:
    rec = tmp_path / "elides.cpsession"
    ingest(_elides(), rec)
    r = simulate_file(rec, SimSettings(calibrate=False, policies=("paper", "cost_aware")))
    mine, paper = r.policies["cost_aware"], r.policies["paper"]
    assert mine is not None and paper is not None and mine.compactions == 0
    reads = [t.cache_read_tokens for t in mine.turns]
    task_prefix = reads[1]  # (turn 1 reads turn 0's request: the system prompt and the task)
    # Turn 3 is the first edit (turn 1's output): the prefix through the task. From turn 4 on, each
    # turn reads through the output the agent elided the turn before: more every turn.
    assert reads[3] == task_prefix
    assert all(b > a for a, b in zip(reads[3:], reads[4:], strict=False)), reads
    # The agent's own breakpoints (the paper column, as sent) read only through the task, or nothing.
    assert all(t.cache_read_tokens <= task_prefix for t in paper.turns[3:])
    assert mine.totals.cache_read > paper.totals.cache_read and mine.cost_usd < paper.cost_usd
    # Every request is the agent's as sent, its content unchanged (only its breakpoints differ).
    assert [t.prompt_tokens for t in mine.turns] == [t.prompt_tokens for t in paper.turns]


def _msg(role: Literal["user", "assistant"], text: str) -> Message:
    return Message(role, (Text(text),))


def test_edit_item_is_the_edited_message_where_it_is_sent() -> None:
    task, note = _msg("user", "Fix the test."), _msg("user", "[3 earlier rounds dropped]")
    conv = [task]
    for k in range(3):
        conv += [_msg("assistant", f"step {k}"), _msg("user", f"output {k}")]
    # The agent edited output 0 (message 2 of 7): counted from the conversation's end, 5.
    ctx = SimpleNamespace(edit_back=5, task_marker=True)
    assert edit_item(conv, ctx) == 2  # type: ignore[arg-type]
    # Compacted (the task, the note, the kept tail): kept from step 0 on, it is still sent; cut past it,
    # it is not, whatever the cut kept.
    assert edit_item([task, note, *conv[1:]], ctx) == 3  # type: ignore[arg-type]
    assert edit_item([task, note, *conv[3:]], ctx) == -1  # type: ignore[arg-type]
    assert edit_item([task, note, *conv[5:]], ctx) == -1  # type: ignore[arg-type]
    # The newest message (the tail's breakpoint is there), no edit, or a policy other than cost_aware's
    # revision 2 (no task breakpoint either): none.
    assert edit_item(conv, SimpleNamespace(edit_back=1, task_marker=True)) == -1  # type: ignore[arg-type]
    assert edit_item(conv, SimpleNamespace(edit_back=0, task_marker=True)) == -1  # type: ignore[arg-type]
    assert edit_item(conv, SimpleNamespace(edit_back=5, task_marker=False)) == -1  # type: ignore[arg-type]


def _marks_and_decisions(policy: str, edits: dict[int, str]) -> list[tuple[int, str, bool]]:
    """Turn by turn from 24: (the request's cache breakpoints, the decision, its agent_resends said)."""
    pipe = make(12_000, policy)
    out = []
    for k in range(30):
        if k in edits:
            assert pipe.edit_result(edits[k], "[old output omitted]")
        req = pipe.next_request()
        d = req.trace["compaction"]
        out.append((req.bytes.count(b'"cache_control"'), d["decision"], "agent_resends" in d))
        pipe.record_usage({"input_tokens": req.trace["final_tokens"], "output_tokens": 50})
        (call,) = pipe.assistant(f"step {k}", tool_calls=[{"id": f"c{k}", "name": "bash", "arguments": "{}"}])
        pipe.tool_result(call.id, f"r{k} " + "y" * 400)
    return out[24:]


def test_a_revision_2_recording_decides_as_it_did_before_these_rules() -> None:
    # Recordings keep the revision of the decision rules they ran (engine/policy/settings.py): one made
    # with revision 2 holds at the agent's edit and places no breakpoint after it, as when it was made.
    edits = {25: "c1", 27: "c24"}
    old = _marks_and_decisions("cost_aware:revision=2", edits)
    assert old == _marks_and_decisions("cost_aware:revision=2", {})  # the same breakpoints and decisions
    assert all(d == "held" and not said for _, d, said in old)
    new = _marks_and_decisions("cost_aware", edits)  # revision 3, the default
    assert new[1][1:] == ("compacted", True)
    assert new[3][0] == old[3][0] + 1  # turn 27: the breakpoint after turn 24's edited result
