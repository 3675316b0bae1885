"""The store's caches are invisible: a store that extends its solve plan over appended items, continues
the recorded manifest and the window hash from the previous window, and reads per-form token counts
back from SQLite serves exactly what a fresh process building everything from scratch serves."""

from __future__ import annotations

import sqlite3
import tempfile
import zlib
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.hashing import content_hash
from engine.store import ContextStore, Kind, window_as_messages
from engine.store.recorder import encode_manifest

WORDS = ["alpha", "beta", "parse_file", "load", "cache_key", "the", "error", '{"a": 1}']

add = st.tuples(st.just("add"), st.lists(st.sampled_from(WORDS), min_size=1, max_size=60), st.booleans())
step = st.one_of(
    add,
    add,
    add,  # appends dominate, as in an agent: they are what the plan extends over
    st.tuples(st.just("get"), st.sampled_from([300, 800, 2000]), st.booleans()),
    st.tuples(st.just("get"), st.sampled_from([300, 800, 2000]), st.just(False)),
    st.tuples(st.just("get"), st.sampled_from([300, 800, 2000]), st.just(False)),
    st.tuples(st.just("dup"), st.integers(min_value=0, max_value=30), st.just(False)),
    st.tuples(st.just("pin"), st.integers(min_value=0, max_value=30), st.just(False)),
    st.tuples(st.just("link"), st.integers(min_value=0, max_value=30), st.just(False)),
)


def _shape(w: object) -> tuple[object, ...]:
    return (
        tuple((e.id, e.form, e.tokens, e.text, round(e.score, 9)) for e in w.entries),  # type: ignore[attr-defined]
        w.used,  # type: ignore[attr-defined]
        w.mode,  # type: ignore[attr-defined]
        tuple(d.id for d in w.dropped),  # type: ignore[attr-defined]
    )


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(step, min_size=10, max_size=50))
def test_incremental_store_serves_what_a_fresh_process_serves(steps: list[tuple[str, object, bool]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "s.db"
        s = ContextStore(path)
        ids = [s.add("You are a careful agent.", Kind.SYSTEM, pin=True)]
        for op, arg, flag in steps:
            if op == "add":
                ids.append(
                    s.add(f"{len(ids)} " + " ".join(arg), Kind.TOOL_RESULT if flag else Kind.ASSISTANT)
                )  # type: ignore[arg-type]
            elif op == "dup":
                ids.append(s.add(s.get(ids[int(arg) % len(ids)]).body, Kind.ASSISTANT))  # type: ignore[call-overload]
            elif op == "pin":
                s.pin(ids[int(arg) % len(ids)])  # type: ignore[call-overload]
            elif op == "link" and len(ids) > 1:
                ids.append(s.add("see that", Kind.ASSISTANT, links=[("cites", ids[int(arg) % len(ids)])]))  # type: ignore[call-overload]
            elif op == "get":
                budget = int(arg)  # type: ignore[call-overload]
                # A fresh process's view of the same file at the same turn (a backup copy, so the
                # subject's own caches see no other writer and keep extending its plan).
                copy = Path(tmp) / f"copy{len(ids)}.db"
                dst = sqlite3.connect(copy)
                s.state.conn.backup(dst)
                dst.close()
                fresh = ContextStore(copy)
                try:
                    expected: object = fresh.context_get(budget, sticky=False, advance_turn=False)
                except Exception as exc:  # pins over budget: the subject must say the same
                    expected = exc
                fresh.close()
                try:
                    w = s.context_get(budget, sticky=flag)  # advances the turn, as an agent's get does
                except Exception as exc:
                    assert type(exc) is type(expected)
                    continue
                # The recorded manifest and the window hash match a from-scratch encoding.
                row = s.state.conn.execute(
                    "SELECT manifest, text_hash FROM windows ORDER BY id DESC LIMIT 1"
                ).fetchone()
                assert zlib.decompress(row[0]) == zlib.decompress(encode_manifest(w.manifest(max_dropped=50)))
                assert row[1] == w.text_hash == content_hash(window_as_messages(w))
                if not flag:
                    assert _shape(expected) == _shape(w)
        s.close()
