"""The express lane's request body is spliced from the last body (Serializer._spliced): the bytes before
the first message fragment written again and the envelope's tail, with the new fragments between, in
one copy; the body hash resumes without comparing the shared bytes again. The same bytes as the
envelope's: tests/test_express.py's differential test (all three providers) compares every request with
the general path's; here each spliced body is compared with the envelope's join directly."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from engine import pipeline_express as express
from engine.pipeline import Pipeline
from engine.providers.base import Serializer
from tests.test_express import _round, _steady_pipe, side_by_side


def _envelope_body(ser: Serializer, layout: Any, model: str, max_tokens: int) -> bytes:
    """The body request_of's envelope joins for `layout` (every fragment)."""
    out: dict[str, list[bytes]] = {"system": [], "tools": [], "messages": []}
    for _s, run in layout:
        for frag, seg in zip(run.frags, run.segments, strict=True):
            out[seg].append(frag)
    return ser._envelope(model, max_tokens, out["system"], out["tools"], out["messages"])


@pytest.mark.parametrize("provider", ["openai", "anthropic", "bedrock"])
def test_steady_lane_turns_splice_the_body_and_call_no_envelope(
    provider: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every steady lane turn's body is spliced from the last one (the provider's envelope hook is not
    called: before, each lane turn joined every fragment of the body through it), equal to the
    envelope's join, its hash that of its bytes. The first lane turn after a general-path turn calls the
    envelope once, with a stand-in message, to find where the last body's messages end."""
    inside = [False]
    lane_turns = [0]
    envelopes = [0]
    spliced: list[bool] = []
    real_turn, real_spliced = express.turn, getattr(Serializer, "_spliced", None)

    def envelope_of(ser: Serializer) -> None:
        real_env = ser._envelope
        if getattr(real_env, "counted", False):
            return

        def envelope(*a: Any) -> bytes:
            envelopes[0] += inside[0]
            return real_env(*a)

        envelope.counted = True  # type: ignore[attr-defined]
        monkeypatch.setattr(ser, "_envelope", envelope)

    def turn(pipe: Pipeline, c: express.Carried) -> Any:
        ser = c.serializer
        envelope_of(ser)
        inside[0] = True
        try:
            got = real_turn(pipe, c)
        finally:
            inside[0] = False
        if got is not None:
            lane_turns[0] += 1
            want = _envelope_body(ser, ser.layout, pipe.config.model, pipe.config.max_output_tokens)
            assert got.bytes == want
            assert got.serialized.request_sha256 == hashlib.sha256(want).hexdigest()
        return got

    def spliced_of(self: Serializer, *a: Any) -> Any:
        assert real_spliced is not None
        got = real_spliced(self, *a)
        spliced.append(got is not None)
        return got

    pipe = _steady_pipe(provider)
    monkeypatch.setattr(express, "turn", turn)
    monkeypatch.setattr(Serializer, "_spliced", spliced_of, raising=False)
    try:
        for t in range(30):
            _round(pipe, t)
    finally:
        pipe.close()
    assert lane_turns[0] >= 28
    assert envelopes[0] == 1, envelopes  # the stand-in, on the first lane turn
    assert spliced and all(spliced), spliced
    assert len(spliced) == lane_turns[0]


@pytest.mark.parametrize("provider", ["openai", "anthropic", "bedrock"])
def test_the_splice_holds_across_compactions_and_section_changes(provider: str) -> None:
    """Compactions, sources, tools and latches change the body before or after the history: the lane's
    turns then splice only from a body whose other runs are the very ones (else the envelope), and
    every request is the general path's (side_by_side compares bytes, traces and journals)."""
    ops = [("round", i) for i in range(60)]
    ops[8] = ("source", 3)
    ops[14] = ("tool", 6)
    ops[20] = ("latch", 9)
    ops[25] = ("user", 12)
    ops[45] = ("tool", 15)
    taken, compactions = side_by_side(ops, 4_001, "cost_aware", True, provider)
    assert taken >= 5 and compactions >= 1
