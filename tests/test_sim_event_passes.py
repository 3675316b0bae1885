"""simulate's failed turns and per-turn usages in one pass over the events (engine/sim/simulate_index.py,
`_failed_and_usages`), held against the separate passes it replaced: the same set, the same dict in the
same order, and for a malformed event the same exception with the same message (hypothesis)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.sim.simulate_index import _failed_and_usages


def _reference(events: list[dict[str, Any]]) -> tuple[set[int], dict[int, dict[str, Any]]]:
    failed = {int(e["turn"]) for e in events if e.get("k") == "error"}
    usages: dict[int, dict[str, Any]] = {}
    for e in events:
        if e.get("k") == "actual" and e.get("usage"):
            usages[int(e["turn"])] = dict(e["usage"])
    for e in events:
        if e.get("k") == "usage":
            usages[int(e["turn"])] = dict(e["usage"])
    return failed, usages


_turn = st.integers(0, 6) | st.sampled_from(["3", "x", None, 2.5])
_usage = st.dictionaries(
    st.sampled_from(["input_tokens", "output_tokens"]), st.integers(0, 99), max_size=2
) | st.sampled_from([None, 5, [("a", 1)], [1]])


@st.composite
def _event(draw: Any) -> dict[str, Any]:
    e: dict[str, Any] = {"k": draw(st.sampled_from(["usage", "actual", "error", "msg", "request"]))}
    if draw(st.integers(0, 9)):
        e["turn"] = draw(_turn)
    if draw(st.booleans()):
        e["usage"] = draw(_usage)
    return e


@settings(max_examples=400, deadline=None)
@given(events=st.lists(_event(), max_size=14))
def test_one_pass_equals_the_separate_passes(events: list[dict[str, Any]]) -> None:
    try:
        want: Any = _reference(events)
    except Exception as exc:  # a malformed event: the same exception, the same message
        want = (type(exc), str(exc))
    actual = [e for e in events if e.get("k") == "actual"]
    try:
        got: Any = _failed_and_usages(events, actual)
    except Exception as exc:
        got = (type(exc), str(exc))
    assert got == want
    if isinstance(want[1], dict):
        assert list(got[1]) == list(want[1])  # the same order too


_valid = st.fixed_dictionaries(
    {
        "k": st.sampled_from(["usage", "actual", "error", "msg"]),
        "turn": st.integers(0, 4),
        "usage": st.dictionaries(
            st.sampled_from(["input_tokens", "output_tokens"]), st.integers(0, 99), min_size=1
        ),
    }
)


@settings(max_examples=300, deadline=None)
@given(events=st.lists(_valid, max_size=16))
def test_well_formed_sessions_give_the_same_figures_in_the_same_order(events: list[dict[str, Any]]) -> None:
    """Turns with both an import's usage and the engine's own (the own one wins), in any order."""
    want = _reference(events)
    got = _failed_and_usages(events, [e for e in events if e.get("k") == "actual"])
    assert got == want
    assert list(got[1].items()) == list(want[1].items())


@settings(max_examples=400, deadline=None)
@given(events=st.lists(_event() | _valid, max_size=14))
def test_the_index_pass_gathers_what_the_held_passes_did(events: list[dict[str, Any]]) -> None:
    """simulate_stream holds no event: the index pass (_Index.visit, per event, as the recording is read)
    gathers the failed turns, usages and request times, and a malformed event is raised where it was, by
    reading the journal again. The same figures in the same order, or the same exception."""
    from engine.sim.simulate_index import _Index

    try:
        want: Any = _reference(events)
    except Exception as exc:
        want = (type(exc), str(exc))
    index = _Index()
    for e in events:
        index.visit(e)
    try:
        got: Any = index.usages(lambda: events)
    except Exception as exc:
        got = (type(exc), str(exc))
    assert got == want
    if isinstance(want[1], dict):
        assert list(got[1].items()) == list(want[1].items())
    assert index.has_actual == any(e.get("k") == "actual" for e in events)
