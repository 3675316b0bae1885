"""Flight recorder: every window served is written to the `windows` table with its manifest.

The record holds item ids, forms, scores, tokens and the hash of the exact text sent, so the
inspector can show any turn's manifest, and a sticky window can be continued by a later process.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from .window import Window

MAX_DROPPED_RECORDED = 50  # the rest are derivable (every item not in the window); keep rows small


def record(conn: sqlite3.Connection, window: Window) -> int:
    manifest = window.manifest(max_dropped=MAX_DROPPED_RECORDED)
    cur = conn.execute(
        "INSERT INTO windows(turn, lane, mode, budget, used, text_hash, manifest) VALUES (?,?,?,?,?,?,?)",
        (
            window.turn,
            window.lane,
            window.mode,
            window.budget,
            window.used,
            window.text_hash,
            json.dumps(manifest, sort_keys=True, separators=(",", ":"), ensure_ascii=False),
        ),
    )
    return int(cur.lastrowid or 0)


def last_for_lane(conn: sqlite3.Connection, lane: str) -> dict[str, Any] | None:
    row = conn.execute(
        "SELECT manifest FROM windows WHERE lane=? ORDER BY id DESC LIMIT 1", (lane,)
    ).fetchone()
    return json.loads(row[0]) if row else None


def for_turn(conn: sqlite3.Connection, turn: int) -> list[dict[str, Any]]:
    rows = conn.execute("SELECT id, manifest FROM windows WHERE turn=? ORDER BY id", (turn,)).fetchall()
    out = []
    for wid, m in rows:
        d = json.loads(m)
        d["window_id"] = wid
        out.append(d)
    return out


def turns(conn: sqlite3.Connection) -> list[int]:
    return [int(r[0]) for r in conn.execute("SELECT DISTINCT turn FROM windows ORDER BY turn")]
