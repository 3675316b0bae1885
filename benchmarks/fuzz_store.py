"""Fuzz the context store (engine/store) with a damaged SQLite file: a small store is built (items of every
kind, links, pins, windows served at two budgets, a file read, a summary), then damaged and used as an
agent and `cp-inspect ctx` use it (open, context_get sticky and fresh, get, expand, expand_page, add,
advance_turn, check_stale, windows, reindex). Each case runs in a forked child with a time and memory
limit (benchmarks/fuzz_harness.py).

Two shapes of damage:
  bytes   the file's bytes mutated (flips, interesting ints, truncation, a page zeroed): SQLite's own
          integrity, which the store translates (StoreCorruptError)
  rows    the file kept valid SQLite, its rows made what the store never writes: a column set to text,
          a number out of range, a blob, malformed JSON, a row deleted (dangling links and windows),
          a table or index dropped

A finding: an exception that is not the engine's own error class (ContextPipeError), a hang, a runaway
allocation.

    PYTHONPATH=. python benchmarks/fuzz_store.py --mode rows --count 1000 --seed 1
"""

from __future__ import annotations

import os
import random
import shutil
import sqlite3
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fuzz_harness import INTERESTING_INTS, arg_parser, main_loop, mutate  # noqa: E402

from engine.errors import ContextPipeError  # noqa: E402
from engine.store import ContextStore, Kind  # noqa: E402

ROW_VALUES: list[Any] = [
    *INTERESTING_INTS[:9],
    -5,
    1.5,
    float("nan"),
    "",
    "abc",
    "{",
    "[]",
    '{"x": 1}',
    "null",
    b"\x00\xff",
    "x" * 3000,
    "user",
    "summary",
    "nope",
]


def build(path: str, scratch: str) -> None:
    f = os.path.join(scratch, "read.py")
    Path(f).write_text("print('hello')\n" * 20)
    with ContextStore(path) as s:
        a = s.add("You are a careful agent.", Kind.SYSTEM, pin=True)
        b = s.add("Fix the failing test in parse.py", Kind.USER, importance=0.5)
        c = s.add("I will read the file.", Kind.ASSISTANT, links=[("cites", b)])
        d = s.add_file_read(f)
        e = s.add(
            "Traceback (most recent call last): ... " * 30,
            Kind.TOOL_RESULT,
            source="bash",
            links=[("cites", c)],
        )
        s.add("Remember: tests live in tests/.", Kind.MEMORY)
        for budget in (200, 2000):
            s.context_get(budget, query="parse")
            s.context_get(budget)
        s.link(e, d)
        s.pin(a)
        s.record_binding("store", 3)


def _page(s: ContextStore) -> None:
    try:
        s.expand_page(5, 10, 50)
    except ValueError as exc:  # an offset past a body the damage shortened: the caller's error, said so
        if "past the end" not in str(exc):
            raise


def use(path: str, scratch: str) -> None:
    """What an agent and the ctx commands do with a store; raises only what is not ContextPipeError."""
    try:
        s = ContextStore(path)
    except ContextPipeError:
        return
    steps = [
        lambda: s.context_get(2000),
        lambda: s.context_get(200, query="parse"),
        lambda: s.context_get(500, sticky=False, advance_turn=False),
        lambda: [s.expand(i) for i in range(1, 8)],
        lambda: [s.get(i) for i in range(1, 8)],
        lambda: _page(s),
        lambda: s.add("one more tool output", Kind.TOOL_RESULT),
        lambda: s.advance_turn(),
        lambda: s.check_stale(),
        lambda: s.windows(s.turn),
        lambda: s.bound_window("store", 3),
        lambda: s.context_get(2000),
        lambda: s.reindex(),
    ]
    try:
        for step in steps:
            try:
                step()
            except ContextPipeError:
                pass
    finally:
        try:
            s.close()
        except ContextPipeError:
            pass


def damage_rows(path: str, rng: random.Random) -> None:
    con = sqlite3.connect(path)
    try:
        tables = [
            r[0]
            for r in con.execute(
                "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'items_%' AND sql NOT LIKE '%VIRTUAL%'"
            )
        ]
        for _ in range(rng.choice((1, 1, 2, 3))):
            op = rng.randrange(10)
            t = rng.choice(tables)
            if op == 0:
                con.execute(
                    f"DELETE FROM {t} WHERE rowid IN (SELECT rowid FROM {t} ORDER BY random() LIMIT 1)"
                ) if t not in ("links", "token_counts", "derived", "file_state", "bindings") else con.execute(
                    f"DELETE FROM {t} WHERE random() % 2 = 0"
                )
                continue
            if op == 1 and rng.random() < 0.2:
                idx = [
                    r[0]
                    for r in con.execute(
                        "SELECT name FROM sqlite_master WHERE type IN ('index','trigger') AND sql IS NOT NULL"
                    )
                ]
                if idx:
                    kind = con.execute(
                        "SELECT type FROM sqlite_master WHERE name=?", (n := rng.choice(idx),)
                    ).fetchone()[0]
                    con.execute(f"DROP {kind.upper()} {n}")
                continue
            cols = [r[1] for r in con.execute(f"PRAGMA table_info({t})")]
            rows = con.execute(f"SELECT * FROM {t}").fetchall()
            if not rows or not cols:
                continue
            row = rng.choice(rows)
            col = rng.randrange(len(cols))
            where = " AND ".join(f"{c} IS ?" for c in cols)
            v = rng.choice(ROW_VALUES)
            if t == "meta" and rng.random() < 0.5:
                v = rng.choice(("0", "-1", "99", "abc", "", "9" * 30))
            try:
                con.execute(f"UPDATE {t} SET {cols[col]} = ? WHERE {where}", (v, *row))
            except sqlite3.Error:
                pass
        con.commit()
    finally:
        con.close()


def main() -> None:
    ap = arg_parser(__doc__, 1000)
    ap.add_argument("--mode", choices=("bytes", "rows"), default="rows")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="fuzzstore")
    base = os.path.join(tmp, "base.sqlite")
    build(base, tmp)
    con = sqlite3.connect(base)
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    data = Path(base).read_bytes()

    def case(rng: random.Random) -> tuple[bytes, Any]:
        d = tempfile.mkdtemp(dir=tmp)
        path = os.path.join(d, "ctx.sqlite")
        seed = rng.randrange(2**32)
        if a.mode == "bytes":
            damaged = mutate(data, rng)
            if rng.random() < 0.3:  # a page zeroed, as a torn write leaves it
                page = 4096 * rng.randrange(max(1, len(data) // 4096))
                damaged = damaged[:page] + bytes(4096) + damaged[page + 4096 :]
            Path(path).write_bytes(damaged)
        else:
            Path(path).write_bytes(data)

        def run() -> None:
            try:
                if a.mode == "rows":
                    damage_rows(path, random.Random(seed))
                use(path, d)
            finally:
                shutil.rmtree(d, ignore_errors=True)

        return (f"seed {seed}".encode() if a.mode == "rows" else Path(path).read_bytes()), run

    main_loop(f"store-{a.mode}", case, seed=a.seed, count=a.count, budget=a.budget, save=a.save)


if __name__ == "__main__":
    main()
