"""The store's hand-written fast paths write exactly what the general code they replace writes."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.hashing import canonical_json
from engine.store.forms import _message_json
from engine.store.items import Kind
from engine.store.recorder import _dumps, _entries_json
from engine.store.state import _kind
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
        assert _kind(k.value) is Kind(k.value)
    with pytest.raises(ValueError):
        _kind("not_a_kind")


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
