"""Text the store cannot encode (lone surrogates from undecodable bytes or JSON escapes): a clear error from
the API that stores nothing, and imports, queries and the CLI that keep working."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from engine.store import ContextStore, Kind
from engine.store.errors import StoreError, StoreTextError, UnknownItemError
from inspector.ctx_cli import ctx_app

runner = CliRunner()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=st.text(max_size=300))
def test_any_unicode_text_round_trips(tmp_path_factory: pytest.TempPathFactory, body: str) -> None:
    # st.text() draws any code point but surrogates (NUL, controls, astral planes): expand gives it back.
    with ContextStore(tmp_path_factory.mktemp("t") / "t.db") as s:
        i = s.add(body, Kind.TOOL_RESULT)
        assert s.expand(i) == body


def test_lone_surrogate_body_is_a_clear_error_and_stores_nothing(tmp_path: Path) -> None:
    with ContextStore(tmp_path / "s.db") as s:
        kept = s.add("first item")
        with pytest.raises(StoreTextError, match=r"lone surrogate U\+DCFF at character 4.*nothing was stored"):
            s.add("bin \udcff junk", Kind.TOOL_RESULT)
        assert isinstance(StoreTextError("x", "\ud800", 0), StoreError)  # the CLI's catch-all sees it
        with pytest.raises(StoreTextError, match="item's source"):
            s.add("fine", Kind.TOOL_RESULT, source="call_\ud800")
        assert len(s) == 1 and s.expand(kept) == "first item"
        assert s.add("after", Kind.USER) == kept + 1  # the store is still writable


def test_file_read_with_a_non_utf8_name_says_to_rename(tmp_path: Path) -> None:
    raw = os.fsencode(tmp_path) + b"/caf\xe9.txt"
    with open(raw, "wb") as f:
        f.write(b"x = 1\n")
    with ContextStore(tmp_path / "s.db") as s:
        with pytest.raises(StoreTextError, match="file path .*rename the file"):
            s.add_file_read(os.fsdecode(raw))
        assert len(s) == 0


def test_query_with_a_lone_surrogate_serves_a_window(tmp_path: Path) -> None:
    with ContextStore(tmp_path / "s.db") as s:
        s.add("the parser_state after the binary dump", Kind.TOOL_RESULT)
        w = s.context_get(1000, query="parser_state \udcff\udcfe", sticky=False)
        assert [e.id for e in w.entries] == [1]
        assert "relevant to query" in " ".join(w.entries[0].reasons)
        assert s.windows(0)  # recorded


def _traj(tmp_path: Path) -> Path:
    # Written with json.dumps: "\ud800" becomes the JSON escape a JS or truncating producer writes.
    doc = {
        "trajectory_format": "mini-swe-agent-1.1",
        "instance_id": "x",
        "info": {},
        "messages": [
            {"role": "system", "content": "You are a shell agent."},
            {"role": "user", "content": "Do the task."},
            {"role": "assistant", "content": "Looking."},
            {"role": "user", "content": "output: \ud800 cut here"},
            {"role": "assistant", "content": "done"},
        ],
    }
    p = tmp_path / "t.traj.json"
    p.write_text(json.dumps(doc), encoding="ascii")
    return p


def test_import_of_a_trajectory_with_a_lone_surrogate_escape_is_whole(tmp_path: Path) -> None:
    db = str(tmp_path / "c.db")
    r = runner.invoke(ctx_app, ["import", "--db", db, str(_traj(tmp_path))])
    assert r.exit_code == 0, r.output
    assert "imported 5 items" in r.output
    with ContextStore(db) as s:
        assert len(s) == 5
        assert s.expand(4) == "output: \ufffd cut here"


def test_cli_add_keeps_non_utf8_stdin_as_replacement_characters(tmp_path: Path) -> None:
    db = str(tmp_path / "c.db")
    r = runner.invoke(ctx_app, ["add", "--db", db, "--kind", "tool_result", "-"], input=b"bin\xff\x00data\n")
    assert r.exit_code == 0, r.output
    with ContextStore(db) as s:
        assert s.expand(int(r.output.strip())) == "bin\ufffd\x00data\n"


@pytest.mark.parametrize("answer", [None, 5, "", "  \n", "cut \udcff"])
def test_a_summarizer_answer_that_cannot_stand_for_its_originals_is_refused(tmp_path: Path, answer) -> None:
    # An empty summary item took its originals' place in every window (they were left out); a non-str
    # answer was cached and came back as its repr on the next call.
    calls: list[object] = []

    def summarizer(texts):
        calls.append(answer)
        return answer

    with ContextStore(tmp_path / "s.db", summarizer=summarizer) as s:
        ids = [s.add(f"original {i} " + f"detail_{i} " * 300, Kind.TOOL_RESULT) for i in range(4)]
        for _ in range(2):  # refused both times: nothing bad was cached
            with pytest.raises(StoreError, match="summarizer.*nothing was stored"):
                s.summarize(ids[:3])
        assert len(calls) == 2 and len(s) == 4
        assert s.state.conn.execute("SELECT count(*) FROM derived").fetchone()[0] == 0
        w = s.context_get(100_000, sticky=False)
        assert w.ids == tuple(ids) and all(e.form == "full" for e in w.entries)


@pytest.mark.parametrize(
    "body",
    ["[" * 100_000, "[" * 100_000 + "]" * 100_000, '{"a":' * 50_000 + "1" + "}" * 50_000, "[" * 900 + "]" * 900],
)
def test_deeply_nested_json_is_stored_and_served_as_text(tmp_path: Path, body: str) -> None:
    # Nesting deeper than Python's stack made json.loads raise RecursionError inside every refresh():
    # the item was stored, then no window (nor len, nor a reopen) could be served from the store.
    path = tmp_path / "deep.db"
    with ContextStore(path) as s:
        task = s.add("the task", Kind.USER, pin=True)
        deep = s.add(body, Kind.TOOL_RESULT)
        s.add("after it", Kind.ASSISTANT)
        assert len(s) == 3
        w = s.context_get(400, sticky=False)
        assert task in w.ids and w.used <= w.usable
        assert s.expand(deep) == body
    with ContextStore(path) as s:
        assert s.context_get(100_000).entry(deep) is not None


def test_an_id_past_64_bits_is_an_unknown_item(tmp_path: Path) -> None:
    # SQLite raised OverflowError (a traceback from `ctx expand`) before it could say "no item".
    huge = 10**30
    with ContextStore(tmp_path / "s.db") as s:
        i = s.add("one")
        for call in (lambda: s.expand(huge), lambda: s.get(huge), lambda: s.pin(huge),
                     lambda: s.link(i, huge), lambda: s.add("two", links=[("cites", huge)])):
            with pytest.raises(UnknownItemError, match=f"no item #{huge}"):
                call()
        assert len(s) == 1
    r = runner.invoke(ctx_app, ["expand", "--db", str(tmp_path / "s.db"), str(huge)])
    assert r.exit_code == 1 and f"no item #{huge}" in r.output
