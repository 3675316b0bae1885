"""Regressions the fuzz drivers found (benchmarks/fuzz_recording.py, fuzz_importers.py, fuzz_proxy.py,
fuzz_probe.py, fuzz_store.py): each input is the smallest the test builds itself, and each test fails on the
code before its fix."""

from __future__ import annotations

import copy
import json
import random
import sqlite3
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from engine.capture.proxy.exchange import Exchange
from engine.capture.proxy.recording import Recorder
from engine.capture.proxy.routes import DEFAULT_UPSTREAMS, match
from engine.capture.proxy.sse import REASSEMBLERS
from engine.pipeline import Pipeline
from engine.recording.cpsession import RecordingReader
from engine.recording.replay import Replayer, ReplayError
from engine.store import ContextStore, Kind
from engine.store.errors import StoreCorruptError
from engine.store.recorder import MAX_MANIFEST_BYTES
from engine.store.row_check import WRITTEN_TYPES
from tests.capture.standin import StandIn


def _one_turn_events() -> list[dict[str, Any]]:
    p = Pipeline("claude-sonnet-4", "anthropic", 20_000, serve=False)
    try:
        p.identity("You are an agent.")
        p.add_tool("bash", "run a command", {"type": "object"})
        p.user("hi")
        req = p.next_request()
        p.record_usage({"input_tokens": req.final_tokens, "output_tokens": 2})
        return copy.deepcopy(list(p.journal.events))
    finally:
        p.close()


@pytest.mark.parametrize("description", [5, None, ["run"]])
def test_a_replan_over_a_hostile_tool_event_says_the_recording_is_damaged(description: Any) -> None:
    events = _one_turn_events()
    assert Replayer(events).replan(0).serialized.request_sha256  # the honest recording re-plans
    (tool,) = [e for e in events if e.get("k") == "tool"]
    tool["description"] = description  # folds without complaint; the build broke with a bare TypeError
    with pytest.raises(ReplayError, match=r"turn 0 \(event \d+\) cannot be re-planned.*damaged") as info:
        Replayer(events).replan(0)
    assert info.value.event_index == next(i for i, e in enumerate(events) if e.get("k") == "request")
    with pytest.raises(ReplayError, match="turn 0 "):
        Replayer(events).replan(-1)  # counted from the end, as state_before counts it


# ---- the context store, given a file whose pages are whole but whose values are not the store's ----------


def _store_file(tmp_path: Path) -> Path:
    path = tmp_path / "ctx.sqlite"
    with ContextStore(path) as s:
        s.add("Fix the failing test.", Kind.USER)
        s.add("Traceback: ...", Kind.TOOL_RESULT)
        s.context_get(2000)
    return path


@pytest.mark.parametrize(
    ("sql", "args", "said"),
    [
        ("UPDATE meta SET value='abc' WHERE key='turn'", (), "meta 'turn' is 'abc', not a count"),
        ("UPDATE meta SET value='-1' WHERE key='schema_version'", (), "meta 'schema_version' is '-1'"),
        ("UPDATE items SET turn='x' WHERE id=2", (), "items row 2: column turn holds text 'x'"),
        ("UPDATE items SET importance='{}' WHERE id=1", (), "items row 1: column importance holds text"),
        ("UPDATE token_counts SET tokens='many'", (), "column tokens holds text 'many'"),
        ("UPDATE windows SET manifest='[1]'", (), "windows row 1: its manifest is not what the store writes"),
        ("UPDATE windows SET manifest=?", (b"not zlib",), "manifest does not inflate"),
    ],
)
def test_a_store_value_the_store_never_writes_is_named_with_its_row(
    tmp_path: Path, sql: str, args: tuple[Any, ...], said: str
) -> None:
    path = _store_file(tmp_path)
    con = sqlite3.connect(path)
    con.execute(sql, args)
    con.commit()
    con.close()
    # Before: a bare ValueError / TypeError / AttributeError / KeyError from deep in a read.
    with pytest.raises(StoreCorruptError) as info:
        with ContextStore(path) as s:
            s.context_get(2000)
            s.expand(1)
            s.windows(s.recorded_turns()[0])
    message = str(info.value)
    assert said in message and str(path) in message and "changed outside the store" in message
    assert "cp-inspect ctx import" in message


def test_the_row_check_knows_every_column_of_the_schema(tmp_path: Path) -> None:
    # row_check's table of the types the store writes is kept beside schema.py's DDL by hand: a column
    # added to the schema and not to it would never be checked (a bare TypeError from a read again), and
    # one renamed would be said as "table T has no column C" on every damaged store.
    con = sqlite3.connect(_store_file(tmp_path))
    tables = [
        name
        for name, sql in con.execute("SELECT name, sql FROM sqlite_master WHERE type='table'")
        if not sql.startswith("CREATE VIRTUAL") and not name.startswith("items_fts")  # FTS5's own
    ]
    schema = {t: sorted(r[1] for r in con.execute(f"PRAGMA table_info({t})")) for t in tables}
    con.close()
    assert schema == {t: sorted(columns) for t, (_, columns) in WRITTEN_TYPES.items()}


def test_a_body_that_is_not_utf8_is_said_as_a_damaged_store(tmp_path: Path) -> None:
    path = _store_file(tmp_path)
    con = sqlite3.connect(path)
    con.execute("UPDATE items SET body = CAST(x'4869ff' AS TEXT) WHERE id=1")  # what a damaged page reads as
    con.commit()
    con.close()
    with ContextStore(path) as s, pytest.raises(StoreCorruptError, match=r"text in it is not UTF-8"):
        s.expand_page(1, 0, 50)  # a bare UnicodeDecodeError before


def test_a_manifest_that_inflates_to_a_gigabyte_is_refused_not_allocated(tmp_path: Path) -> None:
    path = _store_file(tmp_path)
    bomb = zlib.compress(b" " * (MAX_MANIFEST_BYTES + (1 << 20)), 9)  # ~65 KB in the file
    con = sqlite3.connect(path)
    con.execute("UPDATE windows SET manifest=?", (bomb,))
    con.commit()
    con.close()
    with ContextStore(path) as s, pytest.raises(StoreCorruptError, match="inflates past"):
        s.windows(s.recorded_turns()[0])


def test_a_callers_wrong_argument_is_still_its_own_error_on_a_whole_store(tmp_path: Path) -> None:
    # The diagnosis runs only on the error path, and leaves an error it cannot trace to the file as it was.
    with ContextStore(_store_file(tmp_path)) as s, pytest.raises(TypeError):
        s.expand("one")  # type: ignore[arg-type]


# ---- the recording proxy, given a stream whose events have the right kinds and the wrong values ----------


def _sse_chunks(chunks: list[bytes], change: Callable[[dict[str, Any]], None], at: int) -> list[bytes]:
    out = list(chunks)
    head, _, data = out[at].decode().partition("data: ")
    doc = json.loads(data)
    change(doc)
    out[at] = f"{head}data: {json.dumps(doc)}\n\n".encode()
    return out


def _chat_choices_number(doc: dict[str, Any]) -> None:
    doc["choices"] = 1.5


def _anthropic_text_number(doc: dict[str, Any]) -> None:
    doc["content_block"]["text"] = 7


@pytest.mark.parametrize(
    ("wire", "change", "at"),
    [("openai-chat", _chat_choices_number, 1), ("anthropic", _anthropic_text_number, 1)],
)
def test_a_stream_event_with_values_of_the_wrong_type_is_an_incomplete_stream_that_says_so(
    wire: str, change: Callable[[dict[str, Any]], None], at: int
) -> None:
    s = StandIn()
    chunks = (
        s.chat_stream("gpt-4o", "hello there", True)
        if wire == "openai-chat"
        else s.anthropic_stream("claude-sonnet-4", "hello there")
    )
    assert REASSEMBLERS[wire](b"".join(chunks)).complete
    r = REASSEMBLERS[wire](b"".join(_sse_chunks(chunks, change, at)))  # raised TypeError
    assert not r.complete and "not shaped as the API sends them (TypeError" in r.reason and r.events > 2


def test_the_proxy_journals_such_a_call_as_failed_and_records_the_next_one(tmp_path: Path) -> None:
    s = StandIn()
    rec = Recorder(tmp_path / "rec", serve=False)
    msgs: list[dict[str, Any]] = [{"role": "user", "content": "Fix the failing test."}]
    for i in range(2):
        chunks = s.chat_stream("gpt-4o", f"step {i}", True)
        if i == 0:
            chunks = _sse_chunks(chunks, _chat_choices_number, 1)
        body = {
            "model": "gpt-4o",
            "messages": msgs,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        route = match("/v1/chat/completions", "", {}, DEFAULT_UPSTREAMS)
        rec(
            Exchange(
                route,
                json.dumps(body).encode(),
                1.0 + i,
                status=200,
                content_type="text/event-stream",
                response=chunks,
            )
        )
        msgs = [*msgs, {"role": "assistant", "content": f"step {i}"}, {"role": "user", "content": "go on"}]
    rec.close()
    # Before: the recorder's last resort kept "TypeError: 'float' object is not iterable"; turn 0 had no outcome.
    assert not [n for n in rec.skipped if "TypeError" in n]
    ((info, _tap),) = rec.sessions.values()
    with RecordingReader.open(info.path) as r:
        events = [ev for _, ev in r.event_frames()]
    errors = [e for e in events if e.get("k") == "error"]
    assert len(errors) == 1 and errors[0]["turn"] == 0
    assert "not shaped as the API sends them" in errors[0]["message"]
    assert [e["turn"] for e in events if e.get("k") == "usage"] == [1]
    assert Replayer(events).verify().ok


def _far_index(doc: dict[str, Any]) -> None:
    doc["index"] = 5_000_000  # (2**63 - 1 padded a list with Nones until memory ran out: a hung recorder)


def test_a_block_index_far_past_the_blocks_so_far_is_skipped_not_padded_to() -> None:
    s = StandIn()
    chunks = _sse_chunks(s.anthropic_stream("claude-sonnet-4", "hello there"), _far_index, 1)
    r = REASSEMBLERS["anthropic"](b"".join(chunks))
    assert "content_block_start for block 5000000, with 0 blocks so far: skipped" in r.notes
    assert r.body is not None and r.body["content"][0]["type"] == "tool_use"  # the block after it is kept


_ODD: list[Any] = [None, True, -1, 2**63 - 1, 1.5, "", "x", [], {}, [None], {"k": None}, [[[[]]]]]


def _poke(doc: Any, rng: random.Random) -> None:
    """Set one value somewhere inside `doc` to a value of another type."""
    spots: list[tuple[Any, Any]] = []
    todo = [doc]
    while todo:
        node = todo.pop()
        keys = list(node) if isinstance(node, dict) else range(len(node)) if isinstance(node, list) else []
        for k in keys:
            spots.append((node, k))
            todo.append(node[k])
    if spots:
        node, k = rng.choice(spots)
        node[k] = copy.deepcopy(rng.choice(_ODD))


def test_stream_reassembly_never_raises_on_events_with_values_of_any_type() -> None:
    # A fixed-seed slice of benchmarks/fuzz_proxy.py: 600 streams of the three APIs, one event's values poked.
    s = StandIn()
    streams = {
        "anthropic": s.anthropic_stream("claude-sonnet-4", "one two three"),
        "openai-chat": s.chat_stream("gpt-4o", "one two three", True),
        "openai-responses": s.responses_stream("gpt-4o", "one two three"),
    }
    rng = random.Random(43)
    for _ in range(600):
        wire = rng.choice(list(streams))
        chunks = list(streams[wire])
        for _ in range(rng.choice((1, 2, 3))):
            at = rng.randrange(len(chunks))
            head, sep, data = chunks[at].decode().partition("data: ")
            try:
                doc = json.loads(data)
            except ValueError:
                continue
            _poke(doc, rng)
            chunks[at] = f"{head}{sep}{json.dumps(doc)}\n\n".encode()
        r = REASSEMBLERS[wire](b"".join(chunks))
        assert r.complete or r.reason


@pytest.mark.parametrize(
    "hostile",
    [
        {"input": [{"role": "user", "content": "Fix it."}, {"role": "assistant", "content": True}]},
        {"input": 5},
        {"input": ["\x00"], "tools": 4294967296},
    ],
)
def test_a_responses_request_with_content_of_another_type_is_still_recorded(
    tmp_path: Path, hostile: dict[str, Any]
) -> None:
    s = StandIn()
    rec = Recorder(tmp_path / "rec", serve=False)
    body = {"model": "gpt-4o", "instructions": "S", "stream": True, **hostile}
    route = match("/v1/responses", "", {}, DEFAULT_UPSTREAMS)
    chunks = s.responses_stream("gpt-4o", "done")
    rec(
        Exchange(
            route,
            json.dumps(body).encode(),
            1.0,
            status=200,
            content_type="text/event-stream",
            response=chunks,
        )
    )
    rec.close()
    # Before: "TypeError: 'bool' object is not iterable" (or 'int') from the session key; nothing recorded.
    assert not [n for n in rec.skipped if "Error" in n], rec.skipped
    ((info, _tap),) = rec.sessions.values()
    with RecordingReader.open(info.path) as r:
        kinds = [ev["k"] for _, ev in r.event_frames()]
    assert kinds.count("request") == 1 and kinds.count("usage") == 1


def test_a_responses_reply_whose_output_is_not_a_list_is_read_as_no_output() -> None:
    from engine.capture.proxy.responses_api import response_to_chat

    out = response_to_chat(
        {"id": "r1", "model": "gpt-4o", "status": "completed", "output": 7}
    )  # raised TypeError
    assert out["choices"][0]["message"]["content"] is None
