"""Cache breaks by cause as a person reads them: an agent that truncates an old tool output every turn
(SWE-agent's last_n_observations) broke the cache at each of those turns, one cause a turn ("history
rewritten by the agent: turn 3's tool result truncated"), and `simulate` printed as many causes as
turns. simulate's text and the inspector's session what-if now say one row for the kind, with its
count and turns ("tool result truncated by the agent: 14 turns (3, 5, 8, ... 40)"); --json keeps each.
Also: the one wording of a model without a prompt cache (cachecost.cache_named), in both notes."""

from __future__ import annotations

import json
from pathlib import Path

from engine.importers.history_edits import rewrite_cause
from engine.importers.ingest import ingest
from engine.importers.model import CallRec, ImportedSession, MessageRec, ToolCallRec
from engine.policy.cachecost import CacheRules, cache_named
from engine.sim.break_causes import causes_said
from engine.sim.simulate import simulate_file
from engine.sim.simulate_settings import SimSettings
from inspector.fleet_report import render_table, session_row, totals_row
from inspector.simulate_command import render_text
from panels.whatif_session import session_view

AGENT = "history rewritten by the agent: "
DEMO = Path(__file__).resolve().parents[1] / "demo_sessions" / "scout-anthropic.cpsession"


def test_one_kind_at_many_turns_is_one_row_with_its_count_and_turns() -> None:
    turns = [3, 5, 8, 11, 13, 17, 20, 22, 25, 28, 31, 34, 37, 40]
    causes = {"history rewritten by compact_history": 2}
    causes |= {f"{AGENT}turn {t}'s tool result truncated": 1 for t in turns}
    causes |= {f"{AGENT}turn 6's reply edited": 1, f"{AGENT}turn 0's reply edited, turn 1's tool result truncated": 1}
    assert causes_said(causes) == [
        "history rewritten by compact_history x2",
        "tool result truncated by the agent: 14 turns (3, 5, 8, ... 40)",
        # a kind seen at one turn, and one turn's several edits: as they were
        f"{AGENT}turn 6's reply edited x1",
        f"{AGENT}turn 0's reply edited, turn 1's tool result truncated x1",
    ]
    four = {f"{AGENT}turn {t}'s tool call edited": 1 for t in (9, 2, 4, 7)}
    assert causes_said(four) == ["tool call edited by the agent: 4 turns (2, 4, 7, 9)"]
    # Causes summed over several recordings (`report`): a turn may count more than once.
    summed = {f"{AGENT}turn {t}'s tool result truncated": 2 if t == 1 else 1 for t in range(1, 8)}
    assert causes_said(summed) == ["tool result truncated by the agent: 8 breaks at 7 turns (1, 2, 3, ... 7)"]


def test_the_causes_rewrite_cause_writes_are_the_ones_grouped() -> None:
    # (the wording is rewrite_cause's: a change there that this module does not follow fails here)
    causes = {rewrite_cause({"edited": 1, "edited_parts": [[t, "result", "truncated"]]}): 1 for t in (1, 2, 3)}
    assert causes_said(causes) == ["tool result truncated by the agent: 3 turns (1, 2, 3)"]


BIG = "".join(f"collected test {i} ... ok\n" for i in range(60))
CUT = "Old environment output: (60 lines omitted)"


def _swe_agent_like(calls: int = 10, keep: int = 2) -> ImportedSession:
    """A tool-calling run whose agent sends only its last `keep` outputs whole (last_n_observations):
    from the call after it, every call elides one more old output where it stood (call 3 turn 1's, the
    output first sent in call 1's request; the causes name the turn whose result was truncated)."""
    system, task = MessageRec("system", "You are a coding agent."), MessageRec("user", "Fix the test.")
    replies = [
        MessageRec("assistant", f"Step {k}.", (ToolCallRec(f"c{k}", "bash", '{"command": "pytest"}'),))
        for k in range(calls)
    ]
    recs = []
    for k in range(calls):
        msgs: list[MessageRec] = [system, task]
        for j in range(k):
            out = CUT if j < k - keep else BIG
            msgs += [replies[j], MessageRec("tool", out, tool_call_id=f"c{j}")]
        recs.append(CallRec(tuple(msgs), replies[k], (), None, float(k), "claude-sonnet-4"))
    return ImportedSession(
        source="synthetic", format="swe-agent", calls=recs, model="claude-sonnet-4", provider="anthropic"
    )


def test_simulate_text_and_the_session_what_if_say_one_row(tmp_path: Path) -> None:
    rec = tmp_path / "elides.cpsession"
    ingest(_swe_agent_like(), rec)
    r = simulate_file(rec, SimSettings(calibrate=False))
    sent = r.policies["as_sent"]
    assert sent is not None and sent.cache_break_causes is not None
    each = sorted(sent.cache_break_causes)
    assert len(each) == 7 and all(c.startswith(AGENT) for c in each), each  # --json keeps each
    assert json.loads(json.dumps(r.to_json()))["policies"]["as_sent"]["cache_break_causes"] == sent.cache_break_causes
    text = render_text(r).splitlines()
    line = "cache breaks (as_sent): tool result truncated by the agent: 7 turns (1, 2, 3, ... 7)"
    assert line in text, [x for x in text if x.startswith("cache breaks")]
    assert not any("turn 3's tool result truncated" in x for x in text)
    shown = session_view(r.to_json(per_turn=True), width=80).plain
    assert "cache breaks (closed): tool result truncated by the agent: 7 turns (1, 2, 3, ... 7)" in shown


def test_report_says_one_row_over_the_sessions(tmp_path: Path) -> None:
    rows = []
    for k in range(2):
        rec = tmp_path / f"elides{k}.cpsession"
        ingest(_swe_agent_like(), rec)
        rows.append(session_row(rec, simulate_file(rec, SimSettings(calibrate=False))))
    total = totals_row(rows)
    assert len(total["cache_break_causes"]) == 7  # (each cause, as --json gives them)
    (line,) = [x for x in render_table(rows, total).splitlines() if x.startswith("cache breaks by cause")]
    assert line == "cache breaks by cause: tool result truncated by the agent: 14 breaks at 7 turns (1, 2, 3, ... 7)"


def test_no_prompt_cache_is_said_one_way_in_both_notes() -> None:
    assert cache_named("none") == "no prompt cache" and cache_named("deepseek") == "deepseek cache rules"
    assert CacheRules("anthropic", 0.1, 1.25).describe().startswith("anthropic cache rules, cached read 0.10x")
    # GPT-4 (no prompt cache) named for an Anthropic recording: served by OpenAI, which caches nothing
    # for it; the served-by note and the engine policies' note say so alike.
    r = simulate_file(DEMO, SimSettings(model="gpt-4"))
    served = [n for n in r.notes if n.startswith("--model gpt-4 is served by openai")]
    assert served and "simulated with the openai provider policy and no prompt cache (recorded:" in served[0]
    assert "engine policies weigh compactions by the input price alone (no prompt cache; price table: gpt-4)" in r.notes
    assert not any("none cache rules" in n for n in r.notes)
