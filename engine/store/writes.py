"""Writing originals: add items (file reads included), link them, pin them, set their importance.

Writes patch the in-memory metadata when it was current before the write (a reload per add would
make building a 5,000-item store quadratic); anything else marks it dirty for the next refresh.
"""

from __future__ import annotations

import math
import os
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from engine.errors import ConfigError
from engine.hashing import sha256_hex
from engine.store.errors import StoreError, StoreTextError, UnknownItemError
from engine.store.items import REFERENCE_LINKS, Item, ItemMeta, Kind, LinkKind, lone_surrogate
from engine.store.staleness import file_sha, normalise
from engine.store.state import StoreState


class Writer:
    """Adds originals and changes their links, pins and importance, keeping the mirror in `state` true."""

    def __init__(self, state: StoreState) -> None:
        self.state = state

    def add(
        self,
        body: str,
        kind: Kind | str = Kind.USER,
        *,
        pin: bool = False,
        importance: float = 0.0,
        source: str | None = None,
        file_hash: str | None = None,
        timestamp: float | None = None,
        links: Iterable[tuple[LinkKind | str, int]] = (),
    ) -> int:
        """Store an original and return its id. `links` are (kind, target id) from the new item."""
        self.state.require_writable("adding an item")
        k = kind if isinstance(kind, Kind) else Kind.parse(kind)
        if not isinstance(body, str):
            raise TypeError(f"item body must be str, got {type(body).__name__}")
        importance = _importance(importance)
        if not isinstance(pin, (bool, int)):  # "no" raised int()'s ValueError; "yes" the same
            raise TypeError(f"pin must be True or False, got {pin!r}")
        pin = bool(pin)
        timestamp = _timestamp(timestamp)
        if source is not None and not isinstance(source, str):
            if not (k is Kind.FILE_READ and isinstance(source, os.PathLike)):
                raise TypeError(f"source must be a str (a tool call id or a file's path), got {type(source).__name__}")
        if k is Kind.FILE_READ and source:
            source = normalise(source)
            if file_hash is None:
                file_hash = file_sha(source)
        link_list = _links(links)
        fresh = self.state.mirror_current()
        try:
            digest = sha256_hex(body)
            with self.state.transaction() as conn:
                turn = self.state.read_turn()
                cur = conn.execute(
                    "INSERT INTO items(kind, body, hash, turn, ts, source, file_hash, pinned, importance) "
                    "VALUES (?,?,?,?,?,?,?,?,?)",
                    (k.value, body, digest, turn, timestamp, source, file_hash, int(pin), float(importance)),
                )
                new_id = int(cur.lastrowid or 0)
                if k is Kind.FILE_READ and source and file_hash:
                    conn.execute(
                        "INSERT INTO file_state(path, hash) VALUES (?, ?) ON CONFLICT(path) DO NOTHING",
                        (source, file_hash),
                    )
                for lk, dst in link_list:
                    self._insert_link(new_id, dst, lk)
        except UnicodeEncodeError:
            # Diagnosed only once encoding failed (the transaction rolled back): no scan per add.
            raise self._text_error(body, k, source) from None
        self.state.items[new_id] = Item(
            new_id, k, body, digest, turn, timestamp, source, file_hash, pin, float(importance)
        )
        simple = k is not Kind.SUMMARY and all(lk in REFERENCE_LINKS for lk, _ in link_list)
        if fresh and simple and (not self.state.metas or self.state.metas[-1].id < new_id):
            m = ItemMeta(new_id, k, digest, turn, source, file_hash, pin, float(importance))
            self.state.metas.append(m)
            self.state.by_id[new_id] = m
            self.state.gen += 1
            if pin:
                self.state.layout_gen += 1  # the pins changed: plans rebuild
            self.state.has_json = self.state.has_json or self.state.json_item(new_id)
            for _, dst in link_list:
                if dst in self.state.by_id:
                    self.state.by_id[dst].inbound += 1
                    self.state.layout_gen += 1  # an old item's score changed: plans rebuild
        else:
            self.state.dirty = True
        return new_id

    @staticmethod
    def _text_error(body: str, kind: Kind, source: str | None) -> StoreTextError:
        at = lone_surrogate(body)
        if at >= 0:
            return StoreTextError(f"the {kind.value} item's text", body, at)
        # Otherwise the source: the only other text column an add writes.
        src = source or "\udcff"
        if kind is Kind.FILE_READ:
            # A file name in a legacy encoding: staleness checks re-open the path, so it cannot be altered.
            todo = "rename the file to a UTF-8 name, or add its text without a path"
            return StoreTextError(f"the file path {src!r}", src, max(lone_surrogate(src), 0), todo)
        return StoreTextError(f"the item's source {src!r}", src, max(lone_surrogate(src), 0))

    def add_file_read(self, path: str | Path, body: str | None = None, **kw: Any) -> int:
        """Record that the agent read `path` (its current bytes are hashed for staleness checks)."""
        p = normalise(path)
        if body is None:
            try:
                if not stat.S_ISREG(os.stat(p).st_mode):  # a FIFO waited for ever, /dev/zero never ended
                    raise StoreError(
                        f"cannot read {p}: it is not a regular file (a directory, FIFO or device); "
                        "give the path of the file the agent read, or its text as the body"
                    )
                body = Path(p).read_text(encoding="utf-8", errors="replace")
            except OSError as exc:
                raise StoreError(f"cannot read {p}: {exc.strerror}") from exc
        return self.add(body, Kind.FILE_READ, source=p, file_hash=file_sha(p), **kw)

    def link(self, src: int, dst: int, kind: LinkKind | str = LinkKind.CITES) -> None:
        self.state.require_writable("linking items")
        lk = kind if isinstance(kind, LinkKind) else LinkKind.parse(kind)
        for i in (src, dst):
            if not 0 < i < 1 << 63:  # SQLite cannot bind it (OverflowError), let alone find it
                raise UnknownItemError(i, self.state.path)
        fresh = self.state.mirror_current()
        with self.state.transaction() as conn:
            existed = conn.execute(
                "SELECT 1 FROM links WHERE src=? AND dst=? AND kind=?", (src, dst, lk.value)
            ).fetchone()
            self._insert_link(src, dst, lk)
        if fresh and lk in REFERENCE_LINKS and dst in self.state.by_id:
            if not existed:
                self.state.by_id[dst].inbound += 1
                self.state.gen += 1
                self.state.layout_gen += 1  # an old item's score changed: plans rebuild
        else:
            self.state.dirty = True

    def pin(self, item_id: int, pinned: bool = True) -> None:
        self.state.require_writable("pinning an item")
        self._update_meta(item_id, "pinned", int(pinned))

    def set_importance(self, item_id: int, importance: float) -> None:
        self.state.require_writable("setting an item's importance")
        self._update_meta(item_id, "importance", _importance(importance))

    def _insert_link(self, src: int, dst: int, kind: LinkKind) -> None:
        if src == dst:
            raise StoreError(f"an item cannot link to itself (#{src})")
        for i in (src, dst):
            if not 0 < i < 1 << 63 or (  # past 64 bits SQLite cannot look it up (OverflowError)
                self.state.conn.execute("SELECT 1 FROM items WHERE id=?", (i,)).fetchone() is None
            ):
                raise UnknownItemError(i, self.state.path)
        self.state.conn.execute(
            "INSERT OR IGNORE INTO links(src, dst, kind) VALUES (?,?,?)", (src, dst, kind.value)
        )

    def _update_meta(self, item_id: int, column: str, value: float | int) -> None:
        self.state.item(item_id)
        with self.state.transaction() as conn:
            conn.execute(f"UPDATE items SET {column}=? WHERE id=?", (value, item_id))
        self.state.items.pop(item_id, None)
        self.state.dirty = True


def _importance(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"importance must be a number between 0 and 1, got {value!r}")
    if not 0.0 <= value <= 1.0:  # NaN fails this too
        raise ConfigError(f"importance must be between 0 and 1, got {value}")
    return float(value)


def _timestamp(value: Any) -> float | None:
    """A wall-clock time in seconds since the epoch, or None. Anything else was stored as it was (SQLite's
    REAL column keeps text it cannot convert), and every later reload of the store failed on the row."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise TypeError(f"timestamp must be seconds since the epoch (a finite number) or None, got {value!r}")
    return float(value)


def _links(links: Iterable[tuple[LinkKind | str, int]]) -> list[tuple[LinkKind, int]]:
    out: list[tuple[LinkKind, int]] = []
    try:
        pairs = list(links)
    except TypeError:
        raise TypeError(f"links must be (kind, target id) pairs, got {links!r}") from None
    for pair in pairs:
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise TypeError(f"each link must be a (kind, target id) pair, got {pair!r}")
        lk, dst = pair
        if isinstance(dst, bool) or not isinstance(dst, int):
            raise TypeError(f"a link's target must be an item id (int), got {dst!r}")
        out.append((lk if isinstance(lk, LinkKind) else LinkKind.parse(lk), dst))
    return out
