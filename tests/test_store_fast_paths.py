"""The store's hand-written fast paths write exactly what the general code they replace writes."""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.hashing import canonical_json
from engine.store import ContextStore, StoreError, tokenizer_for
from engine.store.forms import _message_json
from engine.store.items import Kind
from engine.store.recorder import _dumps, _entries_json
from engine.store.solve_plan import Planner
from engine.store.state import StoreState, _kind
from engine.store.window import Entry

# Any text (control characters, quotes, backslashes, non-ASCII; hypothesis leaves out lone surrogates,
# which no encoder here can write as UTF-8) and any role string.
texts = st.text()


def _entry(text: str, role: str) -> Entry:
    return Entry(1, "tool_result", role, "full", text, 3, 0.5, ())


@given(texts, st.one_of(st.sampled_from(["user", "assistant", "system"]), texts))
def test_message_json_is_canonical_json(text: str, role: str) -> None:
    assert _message_json(_entry(text, role)) == canonical_json({"role": role, "content": text})


def test_kind_lookup_matches_the_enum() -> None:
    for k in Kind:
        assert _kind(k.value, 1, "s.db") is Kind(k.value)
    # An unknown kind (a row edited by hand) is the store's error naming the row, not Kind()'s ValueError.
    with pytest.raises(StoreError, match=r"s\.db: item #7 has kind 'not_a_kind'"):
        _kind("not_a_kind", 7, "s.db")


# Entries as the store builds them, and the odd values a caller could put in one (which must take the
# encoder's own path and still give the same bytes).
scores = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(min_value=-10, max_value=10),
    st.integers(min_value=-5, max_value=5),
)
entries = st.builds(
    Entry,
    st.integers(min_value=0, max_value=10**12),
    st.sampled_from([k.value for k in Kind]) | texts,
    st.sampled_from(["user", "assistant", "system"]) | texts | st.none(),
    st.sampled_from(["full", "stub", "summary"]),
    texts,
    st.integers(min_value=0, max_value=10**6),
    scores,
    st.lists(texts, max_size=4).map(tuple),
    st.booleans() | st.integers(min_value=0, max_value=1),
    st.booleans(),
    st.none() | st.integers(min_value=0, max_value=10**9),
)


@given(st.lists(entries, max_size=6))
def test_entries_json_is_the_encoders_json(es: list[Entry]) -> None:
    assert _entries_json(es) == _dumps([e.as_dict() for e in es])


def _cold_store(tmp: Path) -> Path:
    p = tmp / "s.db"
    s = ContextStore(p)
    for i in range(30):
        s.add(f"message {i} " + "word " * (i % 7), Kind.TOOL_RESULT if i % 2 else Kind.ASSISTANT)
    s.context_get(200)
    s.close()
    return p


@pytest.mark.parametrize("enabled", [True, False])
def test_the_collector_is_held_off_for_the_reload_and_the_plan_build_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, enabled: bool
) -> None:
    """The mirror's reload and the plan's build run with the collector off, and it is back as it was
    afterwards (left off when the caller had turned it off)."""
    seen: dict[str, bool] = {}
    build, reload = Planner._build, StoreState._reload

    def spy_build(self: Planner, *a: Any) -> Any:
        seen["build"] = gc.isenabled()
        return build(self, *a)

    def spy_reload(self: StoreState, *a: Any) -> Any:
        seen["reload"] = gc.isenabled()
        return reload(self, *a)

    monkeypatch.setattr(Planner, "_build", spy_build)
    monkeypatch.setattr(StoreState, "_reload", spy_reload)
    p = _cold_store(tmp_path)
    was = gc.isenabled()
    try:
        if not enabled:
            gc.disable()
        s = ContextStore(p)
        w = s.context_get(200, sticky=False, advance_turn=False)
        after = gc.isenabled()
        s.close()
    finally:
        if was:
            gc.enable()
    assert w.entries
    assert seen == {"build": False, "reload": False}
    assert after is enabled


def test_a_reopened_stores_first_solve_reads_only_the_form_counts(tmp_path: Path) -> None:
    """Every count the first solve needs is stored under its item's form key, so the text-hash rows
    (the other half of `token_counts`) stay unread until a new text is counted, and then they are
    found: counting a stored text again inserts nothing."""
    p = _cold_store(tmp_path)
    s = ContextStore(p)
    tok = tokenizer_for(None)
    rows = s.state.conn.execute("SELECT count(*) FROM token_counts").fetchone()[0]
    s.context_get(200, sticky=False, advance_turn=False)
    assert set(s.forms._counts) == {(tok.name, True)}
    # every form's count was found under the key it was stored with: nothing was counted anew
    assert s.state.conn.execute("SELECT count(*) FROM token_counts").fetchone()[0] == rows
    # ... and the key is the form's memo key after the tokenizer, joined by ":" (the stored format)
    forms = s.forms._counts[(tok.name, True)]
    assert s.forms._memo
    assert all("form:" + ":".join(map(str, key[1:])) in forms for key in s.forms._memo)
    body = s.get(3).body
    assert s.forms.count(tok, body) == tok.count(body)
    assert s.forms._counts_new == []  # found under its text hash, not counted afresh
    s.context_get(200, sticky=False, advance_turn=False)
    assert s.state.conn.execute("SELECT count(*) FROM token_counts").fetchone()[0] == rows
    s.close()


# Scores with many ties (a handful of values) and some spread; ints too (a DroppedList takes any number).
_scores = st.one_of(
    st.sampled_from([0.0, -0.0, 0.25, 0.5, 1.0, 3]),
    st.floats(allow_nan=False, allow_infinity=True),
    st.integers(-5, 5),
)


@given(st.lists(_scores, max_size=80), st.integers(-1, 90), st.randoms())
def test_dropped_top_matches_the_heap(scores: list[float], n: int, rnd: Any) -> None:
    from heapq import nsmallest

    from engine.store.window import _best_implicit

    ids = list(range(1, len(scores) + 1))
    rnd.shuffle(ids)  # ids in any order: ties must still go to the smaller id
    want = nsmallest(n, zip([-x for x in scores], ids, strict=True))
    got = _best_implicit(n, scores, ids)
    assert got == want
    assert [type(x) for x, _ in got] == [type(x) for x, _ in want]
    assert [repr(x) for x, _ in got] == [repr(x) for x, _ in want]  # -0.0 stays -0.0
