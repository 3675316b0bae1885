"""Flight recorder: every window served is written to the `windows` table with its manifest.

The record holds item ids, forms, scores, tokens and the hash of the exact text sent, so the
inspector can show any turn's manifest, and a sticky window can be continued by a later process.
"""

from __future__ import annotations

import json
import operator
import sqlite3
import zlib
from collections.abc import Sequence
from json.encoder import encode_basestring
from typing import Any

from engine.store.window import Entry, Window

MAX_DROPPED_RECORDED = 50  # the rest are derivable (every item not in the window); keep rows small

# Manifests are stored as zlib-compressed JSON (a BLOB): a 640-entry window's manifest is ~90 KB of
# JSON but ~6 KB compressed (0.2 ms at level 1), and writing 90 KB to the WAL on every call, plus the
# checkpoints that follow, was most of a served window's tail latency. Plain JSON TEXT rows (older
# stores) are still read.
_ZLEVEL = 1


def encode_manifest(manifest: dict[str, Any]) -> bytes:
    raw = json.dumps(manifest, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return zlib.compress(raw, _ZLEVEL)


# A manifest lists a window's items (~100 bytes each): far above any window's, far below a bomb's.
MAX_MANIFEST_BYTES = 64 << 20


def decode_manifest(stored: str | bytes) -> dict[str, Any]:
    """A window's manifest as written (zlib-compressed JSON, or JSON text in older stores). ValueError
    for one that is not: the store names the row (row_check). The inflation is bounded: a hostile
    few-KB row inflating to gigabytes was allocated whole by `ctx` reading the window."""
    if isinstance(stored, bytes):
        inflate = zlib.decompressobj()
        try:
            raw = inflate.decompress(stored, MAX_MANIFEST_BYTES)
        except zlib.error as exc:
            raise ValueError(f"window manifest does not inflate ({exc})") from None
        if inflate.unconsumed_tail:
            raise ValueError(f"window manifest inflates past {MAX_MANIFEST_BYTES} bytes")
        stored = raw.decode("utf-8")
    out: dict[str, Any] = json.loads(stored)
    if not isinstance(out, dict):
        raise ValueError(f"window manifest is a JSON {type(out).__name__}, not an object")
    return out


_ITEMS_SLOT = "\x00items\x00"  # stands in for the items list while the rest of the manifest is encoded


class ManifestEncoder:
    """`encode_manifest` that re-uses the previous window's encoded entries: byte-identical output.

    A sticky window is the lane's previous window plus a few appended entries (the same objects), so
    its items list is the previous list's JSON with the new entries' JSON added; any other window is
    encoded in one call over all its entries (one call per entry costs several times more).
    """

    def __init__(self) -> None:
        self._last: dict[str, tuple[tuple[Entry, ...], str]] = {}  # lane -> (entries, items JSON)
        # id(entry) -> (entry, its JSON) for the last window encoded whole: a re-solve hands back the
        # Entry objects of items whose score and form did not change (see solve_reuse), ~600 of ~850.
        self._frags: dict[int, tuple[Entry, str]] = {}

    def encode(self, window: Window) -> bytes:
        manifest = window.manifest(max_dropped=MAX_DROPPED_RECORDED, with_items=False)
        manifest["items"] = _ITEMS_SLOT
        entries = window.entries
        prev = self._last.get(window.lane)
        items: str | None = None
        if prev is not None:
            old, old_json = prev
            k = len(old)
            if 0 < k <= len(entries) and all(map(operator.is_, old, entries[:k])):
                if k == len(entries):
                    items = old_json
                else:
                    more = _entries_json(entries[k:])
                    items = old_json[:-1] + "," + more[1:]
        if items is None:
            items = self._whole(entries)
        self._last[window.lane] = (entries, items)
        raw = _dumps(manifest).replace(_dumps(_ITEMS_SLOT), items, 1)
        return zlib.compress(raw.encode("utf-8"), _ZLEVEL)

    def _whole(self, entries: Sequence[Entry]) -> str:
        """`_entries_json(entries)`, re-using the JSON of entries that were in the last whole encoding
        (the same objects: an Entry is immutable and the entry is kept beside its id, so a recycled id
        never matches)."""
        old = self._frags
        frags: dict[int, tuple[Entry, str]] = {}
        parts = []
        for e in entries:
            hit = old.get(id(e))
            if hit is None or hit[0] is not e:
                hit = (e, _entry_json(e))
            frags[id(e)] = hit
            parts.append(hit[1])
        self._frags = frags
        return "[" + ",".join(parts) + "]"


# Built once (json.dumps with these options builds an encoder per call); same bytes as encode_manifest.
_dumps = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode


_PLAIN = (int, int, float, bool, bool)  # id, tokens, rounded score, pinned, stale: what the store builds


def _entry_json(e: Entry) -> str:
    """`_dumps(e.as_dict())`, written out field by field in sorted-key order.

    A re-solve records ~900 new entries (their scores move every turn, so nothing is re-used); building
    a dict per entry and running the encoder over them was about a third of a re-solve. Values of any
    other type than the store puts in an Entry (a non-finite score, a non-str text field) go through
    the encoder itself.
    """
    score = round(e.score, 6)
    dup = e.duplicate_of
    if (
        (type(e.id), type(e.tokens), type(score), type(e.pinned), type(e.stale)) != _PLAIN
        or score - score != 0.0  # inf or nan: the encoder writes Infinity / NaN
        or (dup is not None and type(dup) is not int)
    ):
        return _dumps(e.as_dict())
    try:
        return (
            f'{{{"" if dup is None else f"{_DUP}{dup},"}"form":{_str(e.form)},"id":{e.id},'
            f'"kind":{_str(e.kind)},"pinned":{_BOOL[e.pinned]},"reasons":[{",".join(map(_str, e.reasons))}],'
            f'"role":{_str(e.role)},"score":{score!r},"stale":{_BOOL[e.stale]},"tokens":{e.tokens}}}'
        )
    except TypeError:  # a text field that is not a str
        return _dumps(e.as_dict())


_DUP = '"duplicate_of":'
_BOOL = {True: "true", False: "false"}
_str = encode_basestring


def _entries_json(entries: Sequence[Entry]) -> str:
    """`_dumps([e.as_dict() for e in entries])`: the same bytes (compact separators)."""
    return "[" + ",".join(map(_entry_json, entries)) + "]"


def record(conn: sqlite3.Connection, window: Window, encoder: ManifestEncoder | None = None) -> int:
    if encoder is not None:
        blob = encoder.encode(window)
    else:
        blob = encode_manifest(window.manifest(max_dropped=MAX_DROPPED_RECORDED))
    cur = conn.execute(
        "INSERT INTO windows(turn, lane, mode, budget, used, text_hash, manifest) VALUES (?,?,?,?,?,?,?)",
        (
            window.turn,
            window.lane,
            window.mode,
            window.budget,
            window.used,
            window.text_hash,
            blob,
        ),
    )
    return int(cur.lastrowid or 0)


def last_for_lane(conn: sqlite3.Connection, lane: str) -> dict[str, Any] | None:
    row = conn.execute(
        "SELECT manifest FROM windows WHERE lane=? ORDER BY id DESC LIMIT 1", (lane,)
    ).fetchone()
    return decode_manifest(row[0]) if row else None


def for_turn(conn: sqlite3.Connection, turn: int) -> list[dict[str, Any]]:
    rows = conn.execute("SELECT id, manifest FROM windows WHERE turn=? ORDER BY id", (turn,)).fetchall()
    out = []
    for wid, m in rows:
        d = decode_manifest(m)
        d["window_id"] = wid
        out.append(d)
    return out


def turns(conn: sqlite3.Connection) -> list[int]:
    return [int(r[0]) for r in conn.execute("SELECT DISTINCT turn FROM windows ORDER BY turn")]


def bind(conn: sqlite3.Connection, source: str, pipe_turn: int, window_id: int) -> None:
    """Remember that `window_id` was bound into pipeline section `source` at `pipe_turn` (latest wins:
    an EXPLAIN before the real request binds the same turn)."""
    conn.execute(
        "INSERT OR REPLACE INTO bindings(source, pipe_turn, window_id) VALUES (?,?,?)",
        (source, int(pipe_turn), int(window_id)),
    )


def bound(conn: sqlite3.Connection, source: str, pipe_turn: int) -> dict[str, Any] | None:
    row = conn.execute(
        "SELECT w.id, w.manifest FROM bindings b JOIN windows w ON w.id = b.window_id "
        "WHERE b.source=? AND b.pipe_turn=?",
        (source, int(pipe_turn)),
    ).fetchone()
    if row is None:
        return None
    d = decode_manifest(row[1])
    d["window_id"] = int(row[0])
    d["pipe_turn"] = int(pipe_turn)
    d["source"] = source
    return d


def bound_turns(conn: sqlite3.Connection, source: str) -> list[int]:
    return [
        int(r[0])
        for r in conn.execute("SELECT pipe_turn FROM bindings WHERE source=? ORDER BY pipe_turn", (source,))
    ]
