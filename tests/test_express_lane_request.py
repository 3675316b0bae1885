"""The express lane's own request pass (engine/providers/lane_request.py) leaves the serializer as the
general steps leave it (Serializer.grown, _prune, request_of with its _spliced body) and returns the same
request: random sessions through two lane pipelines, one whose lane makes its requests with the pass and
one whose lane always takes the general steps, compared after every request field by field (the body,
its blocks and hashes, the deferred prefix digest's value) and in every piece of serializer state the
next turn reads (each section's recent runs and their lists, hash state, index, sums; the layout; the
last body and its splice point; the last grown run; the item caches; the body hasher's streams).
tests/test_express.py compares the lane with the general path; this one, the pass with the steps it
stands for, before anything else can hide a difference."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from engine import pipeline_express as express
from engine.providers.base import Serializer
from tests.test_express import _feed, paired_requests
from tests.test_turn_carry import _pipe


def _block(b: Any) -> tuple[Any, ...]:
    return (b.section, b.segment, b.sha, b.tokens, b.marker)


def _request(r: Any) -> tuple[Any, ...]:
    return (
        type(r).__name__,
        r.provider,
        r.body,
        [_block(b) for b in r.blocks],
        r.request_sha256,
        r.prefix_sha256,  # (a deferred digest computed here: its value)
        r.cacheable_prefix_tokens,
        r.tool_shas,
        r.section_shas,
        r.last_marked,
    )


def _hexes(h: Any) -> str | None:
    """A run's item hashes as a read sees them (the first n of a list its lineage may have appended to)."""
    return None if h is None else "".join(h[0][: h[1]])


def _run(r: Any) -> tuple[Any, ...]:
    return (
        r.tok,
        r.shas,
        r.marks,
        r.frags,
        r.segments,
        [_block(b) for b in r.blocks],
        r.keys,
        [x.sha for x in r.items],
        r.sha,
        _hexes(r.hexes),
        r.where,
        r.segset,
        r.tokens,
        None if r.hstate is None else r.hstate.hexdigest(),
    )


def _state(ser: Serializer) -> tuple[Any, ...]:
    """What the serializer keeps for its next request, as values."""
    b = ser._body_at
    body_at = None
    if b is not None:
        before = b.before
        body_at = (
            [(s.id, _run(r)) for s, r in b.layout],
            b.body,
            b.model,
            b.max_tokens,
            b.end,
            None
            if before is None
            else (
                before.at,
                [_block(x) for x in before.blocks],
                before.total,
                before.last_marker,
                before.tail_marked,
                before.tool_shas,
                before.section_shas,
                None if before.hexes is None else [_hexes(h) for h in before.hexes],
            ),
        )
    grew = ser._grew
    return (
        {sid: [_run(r) for r in runs] for sid, runs in ser._runs.items()},
        [(s.id, _run(r)) for s, r in ser.layout],
        body_at,
        None if grew is None else (_run(grew[0]), _run(grew[1]), grew[2:]),
        sorted(ser._items),
        {k: (v[0], v[1], _block(v[2])) for k, v in ser._items.items()},
        (ser._kept, ser._held, ser._held_kept),
        sorted(ser._pairs),
        [(body, [s.hexdigest() for s in states], mark and (mark[0], mark[1].hexdigest()))
         for body, states, mark in ser._body_hash._streams],
    )  # fmt: skip


def _sessions(ops: list[tuple[str, int]], window: int, provider: str) -> int:
    """The session through both pipelines, compared after every request; returns the turns the pass made."""
    own, ref = _pipe(window, "cost_aware", False, True), _pipe(window, "cost_aware", False, True)
    for p in (own, ref):
        if p.config.provider != provider:
            ev = {"k": "config", "config": replace(p.config, provider=provider).to_event()}
            p.fold(ev)
            p.journal.append(ev)
    real, real_turn = express.lane_request, express.turn
    made = [0]
    inside: list[Any] = [None]  # the pipeline whose lane turn is running
    seen: dict[int, Serializer] = {}  # each pipeline's serializer in this request's lane turn

    def turn(pipe: Any, c: express.Carried) -> Any:
        seen[id(pipe)] = c.serializer
        inside[0] = pipe
        try:
            return real_turn(pipe, c)
        finally:
            inside[0] = None

    def lane_request(ser: Serializer, *a: Any) -> Any:
        if inside[0] is ref:
            return None  # the reference's lane: the general steps
        got = real(ser, *a)
        made[0] += got is not None
        return got

    express.lane_request = lane_request  # type: ignore[assignment]
    express.turn = turn  # type: ignore[assignment]
    sinks: list[list[Any]] = []
    try:
        for _op, r, a, b in paired_requests(own, ref, ops, lambda p, op, r, t: _feed(p, op, r, t, sinks)):
            if a is None or b is None:  # EXPLAIN
                continue
            assert _request(a.serialized) == _request(b.serialized)
            # After each request both lanes were asked (or neither): their serializers' state.
            sa, sb = seen.pop(id(own), None), seen.pop(id(ref), None)
            assert (sa is None) == (sb is None)
            if sa is not None and sb is not None:
                assert _state(sa) == _state(sb)
            factor = 1.05 + (r % 5) * 0.05
            for p, req in ((own, a), (ref, b)):
                p.record_usage(
                    {"input_tokens": int(req.final_tokens * factor), "output_tokens": 20 + r % 300}
                )
        return made[0]
    finally:
        express.lane_request = real  # type: ignore[assignment]
        express.turn = real_turn  # type: ignore[assignment]
        own.close()
        ref.close()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ops=st.lists(
        st.tuples(
            st.sampled_from(
                ("round",) * 20
                + ("user", "big", "window", "margin", "source", "provider", "latch", "tool", "emerge")
            ),
            st.integers(0, 1_000),
        ),
        min_size=20,
        max_size=70,
    ),
    window=st.sampled_from((3_001, 4_001, 6_001, 40_001)),
    provider=st.sampled_from(("openai", "anthropic", "bedrock")),
)
def test_the_lanes_request_pass_leaves_what_the_general_steps_leave(
    ops: list[tuple[str, int]], window: int, provider: str
) -> None:
    made = _sessions(ops, window, provider)
    event(f"provider: {provider}")
    event(f"turns made by the pass: {'none' if not made else '1-9' if made < 10 else '10+'}")


@pytest.mark.parametrize("provider", ["openai", "anthropic", "bedrock"])
def test_steady_lane_turns_are_made_by_the_pass(provider: str) -> None:
    """On steady rounds (compactions between), every lane turn but the first after a general-path turn
    is the pass's, at each provider, and all are what the general steps make."""
    made = _sessions([("round", i) for i in range(40)], 4_001, provider)
    assert made >= 25, made
