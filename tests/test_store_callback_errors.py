"""A summarizer that fails, ids of the wrong type, and a row whose kind was edited by hand: each is a
clear store error that names what was wrong, and the store is left as it was."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from engine.errors import ContextPipeError
from engine.store import ContextStore, Kind, StoreError


class _FlakySummarizer:
    def __init__(self) -> None:
        self.fail = True

    def __call__(self, texts: list[str]) -> str:
        if self.fail:
            raise ConnectionError("model endpoint unreachable")
        return f"summary of {len(texts)} items"


def test_a_summarizer_that_raises_is_a_store_error_naming_it_and_the_items_and_nothing_is_stored(
    tmp_path: Path,
) -> None:
    summarizer = _FlakySummarizer()
    with ContextStore(tmp_path / "s.db", summarizer=summarizer) as s:
        a = s.add("first observation", Kind.TOOL_RESULT)
        b = s.add("second observation", Kind.TOOL_RESULT)
        with pytest.raises(StoreError) as ei:
            s.summarize([a, b])
        assert isinstance(ei.value, ContextPipeError)
        msg = str(ei.value)
        assert "_FlakySummarizer" in msg and f"#{a}" in msg and f"#{b}" in msg
        assert "ConnectionError" in msg and "model endpoint unreachable" in msg and "nothing was stored" in msg
        assert isinstance(ei.value.__cause__, ConnectionError)
        assert len(s) == 2
        assert s.state.conn.execute("SELECT count(*) FROM derived").fetchone()[0] == 0
        assert s.state.conn.execute("SELECT count(*) FROM links").fetchone()[0] == 0
        # The store still works: once the summarizer does, the same call succeeds.
        summarizer.fail = False
        sid = s.summarize([a, b])
        assert s.get(sid).kind is Kind.SUMMARY and s.get(sid).body == "summary of 2 items"


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda s: s.summarize("abc"), "summarize's ids must be a list of item ids"),
        (lambda s: s.summarize(1), "summarize's ids must be a list of item ids"),
        (lambda s: s.summarize(["x"]), "must be an item id"),
        (lambda s: s.summarize([1], roll_from="x"), "roll_from must be an item id"),
        (lambda s: s.collapse_subtask("ab", 1), "step_ids must be a list of item ids"),
        (lambda s: s.collapse_subtask([1], "z"), "result_id must be an item id"),
        (lambda s: s.get("abc"), "an item id must be an int"),
        (lambda s: s.expand(None), "an item id must be an int"),
    ],
)
def test_item_ids_of_the_wrong_type_are_a_clear_type_error(tmp_path: Path, call, match: str) -> None:
    with ContextStore(tmp_path / "s.db", summarizer=lambda texts: "s") as s:
        s.add("one")
        s.add("two")
        with pytest.raises(TypeError, match=match):
            call(s)
        assert len(s) == 2


def test_an_id_given_as_text_still_expands(tmp_path: Path) -> None:
    # An agent's expand tool call may carry the id as text: that always worked and still does.
    with ContextStore(tmp_path / "s.db") as s:
        i = s.add("the original")
        assert s.expand(str(i)) == "the original"


def test_a_row_whose_kind_was_edited_by_hand_names_the_row_and_says_so(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    with ContextStore(db) as s:
        s.add("fine")
        bad = s.add("edited later")
    conn = sqlite3.connect(db)
    conn.execute("UPDATE items SET kind='scratchpad' WHERE id=?", (bad,))
    conn.commit()
    conn.close()
    with ContextStore(db) as s:
        for call in (lambda: len(s), lambda: s.get(bad), lambda: s.context_get(2000)):
            with pytest.raises(StoreError) as ei:
                call()
            msg = str(ei.value)
            assert str(db) in msg and f"#{bad}" in msg and "'scratchpad'" in msg
            assert "changed outside the store" in msg
