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
from tests.support.counting import LaneTurns, steady_rounds
from tests.test_express import side_by_side


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
    envelope once, with a stand-in message, to find where the last body's messages end. Every lane turn
    after that one is made by the lane's own pass (lane_request), with the same body."""
    envelopes = [0]
    spliced: list[bool] = []
    real_spliced = getattr(Serializer, "_spliced", None)
    lane: LaneTurns

    def envelope_of(pipe: Pipeline, c: express.Carried) -> None:
        ser = c.serializer
        real_env = ser._envelope
        if getattr(real_env, "counted", False):
            return

        def envelope(*a: Any) -> bytes:
            envelopes[0] += lane.inside
            return real_env(*a)

        envelope.counted = True  # type: ignore[attr-defined]
        monkeypatch.setattr(ser, "_envelope", envelope)

    def check(pipe: Pipeline, c: express.Carried, got: Any, _: None) -> None:
        ser = c.serializer
        want = _envelope_body(ser, ser.layout, pipe.config.model, pipe.config.max_output_tokens)
        assert got.bytes == want
        assert got.serialized.request_sha256 == hashlib.sha256(want).hexdigest()

    def spliced_of(self: Serializer, *a: Any) -> Any:
        assert real_spliced is not None
        got = real_spliced(self, *a)
        spliced.append(got is not None)
        return got

    # The lane's own pass (engine/providers/lane_request.py) splices the same way without _spliced,
    # from the second lane turn of a streak on; the first is spliced by _spliced.
    real_lane = express.lane_request
    made = [0]

    def lane_request_of(*a: Any) -> Any:
        got = real_lane(*a)
        made[0] += got is not None
        return got

    lane = LaneTurns(monkeypatch, check, before=envelope_of)
    monkeypatch.setattr(Serializer, "_spliced", spliced_of, raising=False)
    monkeypatch.setattr(express, "lane_request", lane_request_of)
    steady_rounds(provider)
    assert lane.taken >= 28
    assert envelopes[0] == 1, envelopes  # the stand-in, on the first lane turn
    assert spliced and all(spliced), spliced
    assert len(spliced) + made[0] == lane.taken
    assert made[0] == lane.taken - 1, (made, lane.taken)  # all but the streak's first


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


@pytest.mark.parametrize("provider", ["anthropic", "bedrock"])
def test_steady_lane_turns_do_not_look_for_the_tasks_end(
    provider: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lane turn that moves the tail marker carries the markers' outcome on with its own sections
    (_Marks.applied), so the next turn, whose history extends them, knows the task's breakpoint is where
    it was without finding the task's end again (markers.task_where_it_was). Before, every lane turn
    after the one that ran the rule looked for it (the outcome held that turn's sections only). Same
    bytes: tests/test_express.py."""
    from engine.optimize import markers

    looked = [0]
    real_where = markers.task_where_it_was
    lane = LaneTurns(monkeypatch)

    def where(*a: Any) -> bool:
        looked[0] += lane.inside
        return real_where(*a)

    monkeypatch.setattr(markers, "task_where_it_was", where)
    steady_rounds(provider)
    assert lane.taken >= 28
    assert looked[0] <= 1, looked[0]


def test_sections_and_blocks_are_frozen_dataclasses_as_before() -> None:
    """Section and Block set their fields in one call (not one object.__setattr__ a field): the same
    values, equality, hashing, replace() and immutability."""
    import dataclasses

    from engine.assembly import Section
    from engine.providers.base import Block
    from engine.types import CacheScope, Form, Priority, SectionKind

    s = Section("history", "History", SectionKind.HISTORY, CacheScope.NONE, Priority.NORMAL, ())
    t = Section(
        id="history", name="History", kind=SectionKind.HISTORY, scope=CacheScope.NONE,
        priority=Priority.NORMAL, items=(), form=Form.FULL, omitted=0, note="",
    )  # fmt: skip
    assert s == t and hash(s) == hash(t)
    assert [f.name for f in dataclasses.fields(s)] == list(vars(s))
    u = dataclasses.replace(s, note="x", omitted=3)
    assert (u.note, u.omitted, u.items, u.form) == ("x", 3, (), Form.FULL)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.note = "y"  # type: ignore[misc]
    b = Block("history", "messages", "ab" * 32, 12, True)
    assert b == Block(section="history", segment="messages", sha="ab" * 32, tokens=12, marker=True)
    assert dataclasses.astuple(b) == ("history", "messages", "ab" * 32, 12, True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        b.tokens = 1  # type: ignore[misc]


@pytest.mark.parametrize("provider", ["anthropic", "bedrock"])
def test_a_marker_providers_lane_turn_takes_over_the_history_runs_lists(
    provider: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At Anthropic and Bedrock the tail marker moves every turn, so the message it leaves is written
    again: the lane's history run takes over the last run's lists, cut back before that message, and
    appends (Serializer._appended with `own`), as it does where no marker moves. Before, each such turn
    copied the history's fragments, segments, blocks, keys and hashes into new lists and kept the last
    run beside it. Same bytes: tests/test_express.py, and the sums the request reads are the walked
    ones."""
    taken: list[bool] = []

    def lists_of(pipe: Pipeline, c: express.Carried) -> tuple[list[Any], ...]:
        before = c.layout[c.at][1]
        return (before.frags, before.segments, before.blocks, before.keys, before.shas)

    def check(pipe: Pipeline, c: express.Carried, got: Any, lists: tuple[list[Any], ...]) -> None:
        run = c.serializer.layout[c.at][1]
        now = (run.frags, run.segments, run.blocks, run.keys, run.shas)
        taken.append(all(a is b for a, b in zip(lists, now, strict=True)))
        assert run.tokens == sum(b.tokens for b in run.blocks)
        assert run.segset == frozenset(run.segments)
        assert len(run.frags) == len(run.items) == len(run.shas) == len(run.keys)
        assert [b.marker for b in run.blocks].count(True) == len(run.marks)

    LaneTurns(monkeypatch, check, before=lists_of)
    steady_rounds(provider)
    assert len(taken) >= 28
    assert all(taken[1:]), taken


@pytest.mark.parametrize("provider", ["openai", "anthropic", "bedrock"])
def test_a_spliced_request_starts_from_the_sums_before_the_history(
    provider: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """request_of keeps what it summed over the runs before the grown one (the tools and system runs:
    their blocks, tokens, markers, tool and section hashes) with the body, and the next spliced request
    walks from the history run on. Each lane turn's request is the one a walk over every run gives
    (request_of without a grown run, its side effects undone), and the sums are carried on from the
    first lane turn's, not made again."""
    kept: list[Any] = []

    def check(pipe: Pipeline, c: express.Carried, got: Any, _: None) -> None:
        ser = c.serializer
        at, layout = ser._body_at, ser.layout
        assert at is not None and at.before is not None
        kept.append(at.before)
        try:
            full = ser.request_of(layout, pipe.config.model, pipe.config.max_output_tokens, False, False)
        finally:
            ser._body_at, ser.layout = at, layout
        req = got.serialized
        assert req.blocks == full.blocks
        assert req.tool_shas == full.tool_shas and req.tool_shas
        assert req.section_shas == full.section_shas
        assert list(req.section_shas) == list(full.section_shas)  # (the trace's wire order)
        assert req.cacheable_prefix_tokens == full.cacheable_prefix_tokens
        assert req.last_marked == full.last_marked
        # (The prefix hash, made from the carried hexes: the differential test compares the traces'.)

    lane = LaneTurns(monkeypatch, check)
    steady_rounds(provider)
    assert lane.taken >= 28
    assert all(b is kept[0] for b in kept), "the sums are made once and carried on"
