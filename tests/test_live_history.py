"""A compacted session's turn is assembled from what it may send, not from the whole conversation.

Once the cost_aware policy has cut the history, the pipeline hands it the task and the conversation
from the cut on (Pipeline._assemble_from), so a turn never copies (and frees) a tuple of every message
of a long session. The policy must decide and send exactly what it would from the whole history:
the same request bytes, traces and journal, through compactions, summaries, spills and both revisions
of its rules.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

import engine.pipeline_assembly as assembly_mod
from engine.pipeline import Pipeline
from engine.tokens import CharTokenizer, TokenCounter


def _session(
    provider: str, policy: str, summaries: bool, seed: int, whole: bool, monkeypatch: pytest.MonkeyPatch
) -> tuple[list[tuple[bytes, str]], list[str], int]:
    """(request bytes and trace per turn, the journal, turns assembled with messages left out).
    `whole`: every turn is assembled from the whole conversation, as before this optimization."""
    monkeypatch.setattr(assembly_mod, "ASSEMBLE_FROM_CUT", not whole)
    elided_turns = 0
    real = assembly_mod.history_section
    live_len: list[int] = []

    def spy(*args: Any) -> Any:
        live_len.append(len(args[0]))  # the history argument of sections.history_section
        return real(*args)

    monkeypatch.setattr(assembly_mod, "history_section", spy)
    rnd = random.Random(seed)
    pipe = Pipeline(
        "deepseek-chat" if provider == "openai" else "claude-sonnet-4",
        provider,
        rnd.choice((3_000, 5_000)),
        counter=TokenCounter(CharTokenizer()),
        serve=False,
        clock=lambda: 0.0,
        policy=policy,
        summarizer=(lambda texts: f"summary of {len(texts)} messages") if summaries else None,
    )
    pipe.identity("You are a careful coding agent.")
    pipe.add_tool(
        "bash", "Run a shell command", {"type": "object", "properties": {"cmd": {"type": "string"}}}
    )
    pipe.user("Fix the failing test.")
    out = []
    for t in range(120):
        calls = pipe.assistant(
            f"step {t}", [{"id": f"c{t}", "name": "bash", "arguments": json.dumps({"n": t})}]
        )
        size = rnd.choice((1, 5, 40, 120)) if rnd.random() > 0.03 else 12_000  # now and then one to spill
        pipe.tool_result(calls[0].id, "".join(f"line {t}.{i}: {rnd.random():.4f}\n" for i in range(size)))
        if rnd.random() < 0.05:
            pipe.user(f"a hint at step {t}")
        live_len.clear()
        req = pipe.next_request()
        # A turn the express lane made (engine/pipeline_express.py) assembles nothing: count the turns
        # that did assemble, not the last assembly's length again.
        elided_turns += bool(live_len) and live_len[-1] < len(pipe.history) - 1
        pipe.record_usage({"input_tokens": req.trace["final_tokens"], "output_tokens": 20})
        out.append((req.bytes, json.dumps(req.trace, sort_keys=True)))
    pipe.close_turn()
    assert pipe.compaction.compactions >= 3, "the session must compact for the test to mean anything"
    journal = [json.dumps(e, sort_keys=True, default=repr) for e in pipe.journal.events]
    monkeypatch.undo()
    return out, journal, elided_turns


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
@pytest.mark.parametrize("policy", ["cost_aware", "cost_aware:revision=1"])
@pytest.mark.parametrize("summaries", [False, True], ids=["notes", "summaries"])
def test_assembling_from_the_cut_changes_no_output(
    provider: str, policy: str, summaries: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    live, live_journal, elided = _session(provider, policy, summaries, 7, False, monkeypatch)
    whole, whole_journal, none = _session(provider, policy, summaries, 7, True, monkeypatch)
    assert elided > 50 and none == 0  # most turns really were assembled from the cut
    for t, (a, b) in enumerate(zip(live, whole, strict=True)):
        assert a[0] == b[0], f"turn {t}: request bytes differ"
        assert a[1] == b[1], f"turn {t}: trace differs"
    assert live_journal == whole_journal


def test_a_turn_copies_what_it_may_send_not_the_conversation(monkeypatch: pytest.MonkeyPatch) -> None:
    """After 800 rounds at a small window the history handed to assembly is the task and the live
    tail: a few dozen messages, not 1,600. The wave-1 policy, which re-decides from the whole history
    every turn, still gets all of it."""
    sizes: list[int] = []
    real = assembly_mod.history_section

    def spy(*args: Any) -> Any:
        sizes.append(len(args[0]))  # the history argument of sections.history_section
        return real(*args)

    monkeypatch.setattr(assembly_mod, "history_section", spy)
    for policy, rounds in (("cost_aware", 800), ("wave1", 150)):
        sizes.clear()
        pipe = Pipeline(
            "deepseek-chat",
            "openai",
            3_000,
            counter=TokenCounter(CharTokenizer()),
            serve=False,
            clock=lambda: 0.0,
            policy=policy,
        )
        pipe.identity("You are a careful coding agent.")
        pipe.user("Fix the failing test.")
        for t in range(rounds):
            calls = pipe.assistant(f"step {t}", [{"id": f"c{t}", "name": "bash", "arguments": "{}"}])
            pipe.tool_result(calls[0].id, f"output {t}\n" * (2 + t % 5))
            pipe.next_request()
            pipe.record_usage({"input_tokens": 1_000, "output_tokens": 10})
        # The last request was assembled before its pending tool result closed into a message.
        assert sizes[-1] >= len(pipe.history) - 1 if policy == "wave1" else max(sizes[-300:]) < 100, sizes[-1]
        assert len(pipe.history) == 2 * rounds + 1
