"""A history run that extends the last one (Serializer._appended) resumes its section hash from the hash
state the last run kept (_SectionRun.hstate), not through the chain hasher, which looked for the longest
remembered text the new one starts with and compared the history's joined hashes again (~64 characters an
item, every turn). The same digests: sha256 of the item hashes joined."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from engine import pipeline_express as express
from engine.pipeline import Pipeline
from engine.providers.hex_chain import ChainHasher
from tests.support.counting import LaneTurns, steady_rounds


@pytest.mark.parametrize("provider", ["openai", "anthropic", "bedrock"])
def test_lane_turns_resume_the_history_hash_without_the_chain_hasher(
    provider: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Inside lane turns the chain hasher hashes nothing (before: once a lane turn, for the history), and
    every section hash of every lane turn's request is sha256 of its sections' item hashes joined."""
    chained = [0]
    real_hex = ChainHasher.hexdigest

    def check(pipe: Pipeline, c: express.Carried, got: Any, _: None) -> None:
        for s, run in c.serializer.layout:
            want = hashlib.sha256("".join(it.sha for it in s.items).encode()).hexdigest()
            assert run.sha == want == got.serialized.section_shas[s.id], s.id
            state = getattr(run, "hstate", None)
            if state is not None:  # the state it keeps is the one after its own hashes
                assert state.hexdigest() == want

    lane = LaneTurns(monkeypatch, check)

    def hexdigest(self: ChainHasher, text: str) -> str:
        chained[0] += lane.inside
        return real_hex(self, text)

    monkeypatch.setattr(ChainHasher, "hexdigest", hexdigest)
    steady_rounds(provider)
    assert lane.taken >= 28
    assert chained[0] == 0, chained[0]


def test_a_run_kept_beside_the_new_one_keeps_its_own_state() -> None:
    """A run extended twice (two interleaved sequences of requests, or a moved marker keeping the old
    run beside the new one) gives each extension the right hash: a kept run's state is copied, a run
    taken over with its lists gives its state away and is not extended from it again."""
    from engine.artifacts import Message, Text, ToolCall, ToolResult
    from engine.assembly import Measure
    from engine.providers import make_serializer
    from engine.sections import history_section
    from engine.tokens import TokenCounter

    msgs = [Message("user", (Text("Fix the bug."),))]
    for i in range(6):
        msgs.append(Message("assistant", (Text(f"look {i}"), ToolCall(f"c{i}", "bash", '{"command": "ls"}'))))
        msgs.append(Message("user", (ToolResult(f"c{i}", f"a.py {i}"),)))
    m = Measure(TokenCounter())
    ser = make_serializer("anthropic")
    tok = m.counter.tokenizer.name
    got: list[tuple[Any, str]] = []
    # 9 extends the run of 7 items (its marker moved: that run is kept beside the new one), 11 extends
    # 9's, 10 extends 9's again (another sequence of requests: its state must be as 9 left it), 13
    # extends 10's and takes it over with its lists.
    ser._section(history_section(tuple(msgs[:7]), ()), frozenset({6}), tok, m)
    for n, own in ((9, False), (11, False), (10, False), (13, True)):
        s = history_section(tuple(msgs[:n]), ())
        run = ser._section(s, frozenset({n - 1}), tok, m, own)
        got.append((s, run.sha))
    for s, sha in got:
        assert sha == hashlib.sha256("".join(it.sha for it in s.items).encode()).hexdigest()
