"""Two connections sharing one store file (as two processes do): what one commits while the other is
serving a window is neither lost from later windows nor undone.

The second connection commits from inside the first one's solve, through a tokenizer the first one
counts with, so the interleaving is exact rather than a race."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from engine.store import ContextStore, Kind


class _CommitsOnFirstCount:
    """A 4-characters-per-token tokenizer whose first count runs `action` (another connection's write)."""

    name = "chars-with-interloper"

    def __init__(self, action: Callable[[], object]) -> None:
        self.action = action
        self.fired = False

    def count(self, text: str) -> int:
        if not self.fired:
            self.fired = True
            self.action()
        return (len(text) + 3) // 4


def test_item_committed_by_another_connection_during_a_solve_reaches_later_windows(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    with ContextStore(path) as a, ContextStore(path) as b:
        a.add("the task, added by a", Kind.USER)
        tok = _CommitsOnFirstCount(lambda: b.add("a tool result, added by b mid-solve", Kind.TOOL_RESULT))
        a.context_get(1000, model=tok, sticky=False)
        assert tok.fired
        assert len(a) == 2
        later = a.context_get(1000, model="chars", sticky=False)
        assert later.ids == (1, 2)


def test_turn_advanced_by_another_connection_during_a_get_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    with ContextStore(path) as a, ContextStore(path) as b:
        a.add("hello", Kind.USER)
        tok = _CommitsOnFirstCount(b.advance_turn)
        a.context_get(1000, model=tok, sticky=False)  # b moved the turn to 1; a's get moves it to 2
        assert a.turn == 2 and b.turn == 2


def test_get_shows_a_pin_and_importance_another_connection_set(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    with ContextStore(path) as a, ContextStore(path) as b:
        i = a.add("the goal", Kind.USER)
        assert a.get(i).pinned is False  # cached in a
        b.pin(i)
        b.set_importance(i, 0.7)
        got = a.get(i)
        assert got.pinned is True and got.importance == 0.7 and got.body == "the goal"
        assert a.context_get(500).entry(i).pinned  # windows already agreed
        b.pin(i, False)
        assert a.get(i).pinned is False


def test_a_reader_opens_the_store_while_another_process_holds_the_write_lock(tmp_path: Path) -> None:
    # Every open took the write lock (to check the schema), so while another process was mid-write (an
    # import, a reindex, a summarizer writing through its store) a process that only reads could not
    # even open the store: StoreLockedError after its busy timeout, though WAL lets it read.
    import subprocess
    import sys

    from engine.store import StoreLockedError

    path = tmp_path / "shared.db"
    with ContextStore(path) as s:
        first = s.add("the task", Kind.USER)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sqlite3, sys\n"
            f"c = sqlite3.connect({str(path)!r}, isolation_level=None)\n"
            "c.execute('BEGIN IMMEDIATE')\n"
            "c.execute(\"INSERT INTO meta(key, value) VALUES ('writer', 'busy')\")\n"
            "print('locked', flush=True)\n"
            "sys.stdin.read()\n"
            "c.execute('ROLLBACK')\n",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        with ContextStore(path, timeout_s=0.5) as reader:
            assert reader.get(first).body == "the task"
            assert reader.expand(first) == "the task" and len(reader) == 1
            # Writing still waits for the lock, and says so.
            with pytest.raises(StoreLockedError):
                reader.add("a write", Kind.USER)
        # Reads at once, the write after its 0.5 s busy timeout: the holder keeps its lock until the test
        # ends, so a read that waited for it would have failed with StoreLockedError, as the old open did
        # (no clock bound needed).
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=10)
