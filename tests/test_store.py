"""The context store on a real SQLite file: budgets, pins, determinism, dedup, staleness, errors, sticky."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.errors import ConfigError
from engine.hashing import content_hash
from engine.store import (
    ContextStore,
    Kind,
    LinkKind,
    PinsExceedBudgetError,
    StoreConfig,
    StoreCorruptError,
    StoreError,
    StoreLockedError,
    UnknownItemError,
    window_as_messages,
)


def _fill(store: ContextStore, n: int, size: int = 40) -> list[int]:
    ids = []
    for i in range(n):
        ids.append(
            store.add(f"step {i} output\n" + f"value_{i} = compute(alpha_{i})\n" * size, Kind.TOOL_RESULT)
        )
        ids.append(store.add(f"I will now look at value_{i}", Kind.ASSISTANT))
        if i % 3 == 2:
            store.context_get(100_000, advance_turn=True)  # move turns on, like an agent loop
    return ids


@pytest.fixture()
def store(tmp_path: Path) -> ContextStore:
    s = ContextStore(tmp_path / "run.db")
    yield s
    s.close()


def test_wal_and_fts5(tmp_path: Path, store: ContextStore) -> None:
    conn = sqlite3.connect(tmp_path / "run.db")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("SELECT name FROM sqlite_master WHERE name='items_fts'").fetchone()
    conn.close()


bodies = st.lists(
    st.tuples(
        st.sampled_from([Kind.USER, Kind.ASSISTANT, Kind.TOOL_RESULT, Kind.FILE_READ, Kind.MEMORY]),
        st.text(alphabet='abcdefgh ijk_\n{}[]":,0123', min_size=0, max_size=600),
        st.booleans(),
    ),
    min_size=1,
    max_size=25,
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(items=bodies, budget=st.integers(min_value=60, max_value=3000), sticky=st.booleans())
def test_window_never_exceeds_budget_and_keeps_pins(
    tmp_path_factory: pytest.TempPathFactory, items, budget, sticky
) -> None:
    path = tmp_path_factory.mktemp("hyp") / "h.db"
    with ContextStore(path, config=StoreConfig()) as s:
        pins: list[int] = []
        for i, (kind, body, pinned) in enumerate(items):
            pin = pinned and len(pins) < 2 and len(body) < 80
            new = s.add(body, kind, pin=pin)
            if pin:
                pins.append(new)
            if i % 4 == 3:
                try:
                    w = s.context_get(budget, sticky=sticky, query="abc k_1")
                except PinsExceedBudgetError:
                    continue
                assert w.used <= w.usable <= budget
                assert all(p in w.ids for p in pins)
        try:
            w = s.context_get(budget, sticky=sticky)
        except PinsExceedBudgetError:
            return
        assert w.used <= w.usable
        assert [e.id for e in w.entries if e.pinned] == sorted(pins)
        # Send order: pins first, then history in time (id) order.
        rest = [e.id for e in w.entries if not e.pinned]
        assert rest == sorted(rest)


def test_pins_always_present_and_first(store: ContextStore) -> None:
    sys_id = store.add("You are a careful engineer.", Kind.SYSTEM, pin=True)
    _fill(store, 20)
    task = store.add("The task: fix value_3 without touching alpha_9.", Kind.USER, pin=True)
    w = store.context_get(600)
    assert w.entries[0].id == sys_id and w.entries[1].id == task
    assert w.entries[0].form == "full" and w.entries[1].form == "full"
    assert w.used <= w.usable


def test_pins_alone_too_big_is_a_clear_error(store: ContextStore) -> None:
    store.add("word " * 2000, Kind.USER, pin=True)
    with pytest.raises(PinsExceedBudgetError, match="pinned items alone need .* Raise the budget or unpin"):
        store.context_get(500)


@pytest.mark.parametrize("bad", [0, -5, 10**12])
def test_bad_budget(store: ContextStore, bad: int) -> None:
    store.add("hello")
    with pytest.raises(ConfigError, match="budget"):
        store.context_get(bad)


def test_determinism_byte_identical(tmp_path: Path) -> None:
    outs = []
    for name in ("a.db", "b.db"):
        with ContextStore(tmp_path / name) as s:
            s.add("system rules", Kind.SYSTEM, pin=True)
            _fill(s, 15)
            s.add('{"rows": [{"id": 1, "name": "x"}, {"id": 2, "name": "y"}], "count": 2}', Kind.TOOL_RESULT)
            w = s.context_get(900, query="value_4 compute", sticky=False)
            outs.append(
                (json.dumps(window_as_messages(w)), w.text_hash, json.dumps(w.manifest(), sort_keys=True))
            )
    assert outs[0] == outs[1]
    assert outs[0][1] == content_hash(json.loads(outs[0][0]))


def test_same_store_same_inputs_same_window(store: ContextStore) -> None:
    _fill(store, 10)
    a = store.context_get(700, sticky=False, advance_turn=False)
    b = store.context_get(700, sticky=False, advance_turn=False)
    assert a.text_hash == b.text_hash and a.manifest() == b.manifest()


def test_duplicates_cost_once(store: ContextStore) -> None:
    body = "def f():\n    return 1\n" * 60
    one = store.add(body, Kind.FILE_READ)
    store.add("ok", Kind.ASSISTANT)
    w1 = store.context_get(100_000, sticky=False, advance_turn=False)
    two = store.add(body, Kind.FILE_READ)
    three = store.add(body, Kind.FILE_READ)
    w3 = store.context_get(100_000, sticky=False, advance_turn=False)
    assert three in w3.ids and one not in w3.ids and two not in w3.ids
    assert w3.used == w1.used  # the newest copy stands for all three, at one copy's cost
    reasons = {d.id: d.reason for d in w3.dropped}
    assert reasons[one] == f"duplicate of #{three}"
    # Sticky: appending a duplicate of something already in the window costs a one-line reference.
    s1 = store.context_get(100_000)
    four = store.add(body, Kind.FILE_READ)
    s2 = store.context_get(100_000)
    assert s2.mode == "sticky"
    e = s2.entry(four)
    assert e is not None and e.duplicate_of is not None and e.tokens < 30
    assert s2.used - s1.used == e.tokens


def test_expand_round_trip_and_tool_schema(store: ContextStore) -> None:
    big = "line with needle_token here\n" * 300
    i = store.add(big, Kind.TOOL_RESULT, source="call_1")
    for k in range(30):
        store.add(f"later message {k} " * 20, Kind.ASSISTANT)
    w = store.context_get(800, sticky=False)
    e = w.entry(i)
    assert e is not None and e.form in ("stub", "summary")
    assert f"expand({i})" in e.text
    assert store.expand(i) == big
    schema = store.expand_tool_schema()
    assert schema["function"]["name"] == "expand"
    assert schema["function"]["parameters"]["required"] == ["id"]
    with pytest.raises(UnknownItemError, match="no item #9999"):
        store.expand(9999)


def test_json_shrinks_to_shape(store: ContextStore) -> None:
    doc = {
        "results": [{"id": n, "path": f"/src/mod_{n}.py", "text": "x" * 80} for n in range(200)],
        "total": 200,
    }
    i = store.add(json.dumps(doc), Kind.TOOL_RESULT, importance=1.0)
    for k in range(10):
        store.add(f"filler {k} " * 40, Kind.ASSISTANT)
    w = store.context_get(2000, sticky=False, query="total")
    e = w.entry(i)
    assert e is not None and e.form == "summary"
    assert "JSON shape" in e.text and "200 items" in e.text and '"total":200' in e.text


def test_stale_detection_through_real_file_change(tmp_path: Path, store: ContextStore) -> None:
    f = tmp_path / "mod.py"
    f.write_text("x = 1\n")
    rid = store.add_file_read(f)
    assert store.check_stale() == []
    f.write_text("x = 2\n")
    assert store.check_stale() == [rid]
    w = store.context_get(10_000)
    e = w.entry(rid)
    assert e is not None and e.stale and any("stale" in r for r in e.reasons)
    assert w.manifest()["items"][0]["stale"] is True


def test_stale_detection_with_watcher(tmp_path: Path, store: ContextStore) -> None:
    f = tmp_path / "watched.py"
    f.write_text("a = 1\n")
    rid = store.add_file_read(f)
    other = store.add_file_read(f)  # same content, also goes stale
    watcher = store.watch()
    try:
        # Until watchfiles has set up its watches (its first yield), not a fixed 0.2 s: start() waits at
        # most 2 s for that, and a loaded host's first import of watchfiles in the thread can take longer.
        assert watcher._ready.wait(60), "watchfiles never started watching"
        f.write_text("a = 2\n")
        assert watcher.wait(60), "watchfiles did not report the change"
        assert store.stale_ids() == sorted([rid, other])
    finally:
        watcher.stop()


def test_corrupt_database_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"this is not sqlite" * 200)
    with pytest.raises(StoreCorruptError) as ei:
        ContextStore(bad)
    msg = str(ei.value)
    assert str(bad) in msg and "ctx import" in msg


def test_locked_database_error(tmp_path: Path) -> None:
    path = tmp_path / "locked.db"
    ContextStore(path).close()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(StoreLockedError, match="another process holds"):
            s = ContextStore(path, timeout_s=0.2)
            s.add("x")
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def test_sticky_window_is_previous_plus_appended(store: ContextStore) -> None:
    store.add("rules", Kind.SYSTEM, pin=True)
    _fill(store, 12, size=20)
    budget = 3000
    w1 = store.context_get(budget)
    assert w1.mode in ("fresh", "resolved")
    prev_msgs = window_as_messages(w1)
    for step in range(40):
        store.add(f"new observation {step} " * 15, Kind.TOOL_RESULT)
        w = store.context_get(budget)
        msgs = window_as_messages(w)
        assert w.used <= w.usable
        if w.mode == "sticky":
            assert msgs[: len(prev_msgs)] == prev_msgs  # the prefix is byte-identical: cache-friendly
            assert len(msgs) == len(prev_msgs) + 1
        else:
            assert w.mode == "resolved" and any("re-solved" in n or "compacted" in n for n in w.notes)
            break
        prev_msgs = msgs
    else:
        pytest.fail("the window never overflowed")
    assert step > 0  # at least one sticky append happened before the re-solve
    # After a re-solve there is headroom: the next turn is sticky again.
    store.add("short", Kind.USER)
    assert store.context_get(budget).mode == "sticky"


def test_sticky_state_survives_process_restart(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with ContextStore(path) as s:
        _fill(s, 5)
        w1 = s.context_get(5000)
    with ContextStore(path) as s:
        s.add("appended later", Kind.USER)
        w2 = s.context_get(5000)
    assert w2.mode == "sticky"
    assert window_as_messages(w2)[:-1] == window_as_messages(w1)


def test_flight_recorder(store: ContextStore) -> None:
    _fill(store, 3)
    t = store.turn
    w = store.context_get(800, query="value_1")
    rec = store.windows(t)
    assert rec and rec[-1]["text_hash"] == w.text_hash
    assert [i["id"] for i in rec[-1]["items"]] == list(w.ids)
    assert t in store.recorded_turns()


def test_summaries_callback_cached_and_rolled_from_originals(tmp_path: Path) -> None:
    calls: list[list[str]] = []

    def summarizer(texts):
        calls.append(list(texts))
        return f"summary of {len(texts)} texts"

    with ContextStore(tmp_path / "sum.db", summarizer=summarizer, summary_prompt_version="p1") as s:
        a = s.add("first finding about alpha", Kind.ASSISTANT)
        b = s.add("second finding about beta", Kind.TOOL_RESULT)
        s1 = s.summarize([a, b])
        again = s.summarize([a, b])  # same originals + prompt version: cached, no second call
        assert len(calls) == 1 and s.get(again).body == s.get(s1).body
        c = s.add("third finding about gamma", Kind.TOOL_RESULT)
        s2 = s.summarize([c], roll_from=s1)
        # Rolled forward from the originals, never from the previous summary's text.
        assert len(calls) == 2 and len(calls[1]) == 3
        assert not any("summary of" in t for t in calls[1])
        w = s.context_get(10_000, sticky=False)
        assert s2 in w.ids and s1 not in w.ids and a not in w.ids and c not in w.ids
        assert "first finding" in s.expand(s2) and "third finding" in s.expand(s2)


def test_collapse_subtask(store: ContextStore) -> None:
    steps = [store.add(f"step {i} " * 50, Kind.TOOL_RESULT) for i in range(5)]
    result = store.add("RESULT: the bug is in parse()", Kind.ASSISTANT)
    sid = store.collapse_subtask(steps, result)
    w = store.context_get(10_000, sticky=False)
    assert sid in w.ids and not set(steps) & set(w.ids)
    assert "RESULT: the bug is in parse()" in w.entry(sid).text  # type: ignore[union-attr]
    assert "step 3" in store.expand(sid)


def test_links_raise_inbound_score(store: ContextStore) -> None:
    a = store.add("alpha " * 30, Kind.TOOL_RESULT)
    b = store.add("beta " * 30, Kind.TOOL_RESULT)
    store.link(store.add("uses alpha", Kind.ASSISTANT), a, LinkKind.CITES)
    w = store.context_get(100_000, sticky=False)
    ea, eb = w.entry(a), w.entry(b)
    assert ea is not None and eb is not None and ea.score > eb.score


def test_config_round_trip_and_validation() -> None:
    cfg = StoreConfig(w_recency=2.0)
    assert StoreConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(ConfigError, match="unknown store settings: bogus"):
        StoreConfig.from_dict({"bogus": 1})
    with pytest.raises(ConfigError, match="must not be negative"):
        StoreConfig(w_refs=-1)


def test_v1_store_migrates_fts_to_identifier_tokens(tmp_path: Path) -> None:
    """A schema-v1 file (FTS split identifiers on `_`, no bindings table) is upgraded in place."""
    path = tmp_path / "old.db"
    with ContextStore(path) as s:
        hit = s.add("the bug is in load_file_cache when the path changes", Kind.TOOL_RESULT)
        s.add("unrelated words about loading files", Kind.TOOL_RESULT)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.executescript(
        "DROP TABLE bindings; DROP TABLE items_vocab; DROP TRIGGER items_ai; DROP TABLE items_fts;"
        "CREATE VIRTUAL TABLE items_fts USING fts5(body, content='items', content_rowid='id');"
        "INSERT INTO items_fts(items_fts) VALUES ('rebuild');"
        "UPDATE meta SET value='1' WHERE key='schema_version';"
    )
    conn.close()
    with ContextStore(path) as s:
        w = s.context_get(1000, query="load_file_cache", sticky=False)
        e = w.entry(hit)
        assert e is not None and any(r.startswith("relevant") for r in e.reasons)
        s.record_binding("memory", 7)
        assert s.bound_window("memory", 7)["window_id"] == s.last_window_id  # type: ignore[index]


def test_store_from_a_newer_schema_names_the_file_and_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "future.db"
    with ContextStore(path) as s:
        s.add("kept")
    with sqlite3.connect(path) as c:
        c.execute("UPDATE meta SET value='99' WHERE key='schema_version'")
    c.close()
    before = path.read_bytes()
    with pytest.raises(StoreError, match=rf"{path}: store schema version 99 is newer.*upgrade cp-inspect"):
        ContextStore(path)
    assert path.read_bytes() == before
