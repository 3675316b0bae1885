"""The journal's content store (`Journal.blobs`: content hash -> text), able to move texts to disk.

Every text a session journals is stored once by hash. The texts of messages behind the compaction cut
are what a long session accumulates, so when the history releases those messages (history_log) the
pipeline evicts their texts here: each goes to a private scratch file and what stays in memory is one
small index entry (the hash's first 8 bytes -> the record's offset, 16-32 bytes in a packed table, see
prefix_index), not the 64-character hash and the text.

Reads are rare: a text evicted here is read back when the agent sends the same text again (the
journal stores a text once, so it must know the hash is present) and by whoever looks a hash up. A
text read back is kept in memory again (it is in use again) and evicted again with the messages that
use it. Membership is decided by the full hash, read back from the record: two hashes sharing their
first 8 bytes are told apart (the second one then simply stays in memory).

A record is the 64-character hash, a checksum and the length of the UTF-8 text, then the text. An
eviction that cannot be written (disk full, I/O error) leaves every text in memory and says why once
(`spill_error`, a warning); the session goes on.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator, MutableMapping

from engine.recording.prefix_index import DELETED, PrefixIndex
from engine.recording.spill_file import SpillFile, SpillReadError, checksum, warn

_HEADER = struct.Struct("<64sII")  # hash, crc32 of the text bytes, length of the text bytes

LOGGER = "contextpipe.history"


def _key(h: str) -> int | None:
    if len(h) != 64:
        return None
    try:
        return int(h[:16], 16)
    except ValueError:
        return None


class BlobStore(MutableMapping[str, str]):
    def __init__(self) -> None:
        self._mem: dict[str, str] = {}
        self._disk = PrefixIndex()  # first 8 bytes of the hash -> record offset
        self._file: SpillFile | None = None
        self.spill_error: str | None = None

    # ---------------------------------------------------------------- mapping
    def __getitem__(self, h: str) -> str:
        text = self._mem.get(h)
        if text is not None:
            return text
        text = self._load(h)
        if text is None:
            raise KeyError(h)
        return text

    def __contains__(self, h: object) -> bool:
        if h in self._mem:
            return True
        return isinstance(h, str) and self._load(h) is not None

    def add(self, h: str, text: str) -> bool:
        """`h not in self` then `self[h] = text` (a journaled text, every turn), in one call and one
        look-up on disk: True when `h` was new and is now held, False when it was present (in memory,
        or on disk and now read back, as the membership test reads it)."""
        if h in self._mem:
            return False
        # (The index's count read as it is: its __len__ is a Python call, three journaled texts a turn.)
        if self._disk._used and self._load(h) is not None:
            return False
        self._mem[h] = text
        return True

    def __setitem__(self, h: str, text: str) -> None:
        if self._disk and h not in self._mem:
            self._load(h)  # an evicted copy leaves the index, so it is not counted twice
        self._mem[h] = text

    def __delitem__(self, h: str) -> None:
        if h in self._mem:
            del self._mem[h]
            return
        raise KeyError(h)

    def __len__(self) -> int:
        return len(self._mem) + len(self._disk)

    def __iter__(self) -> Iterator[str]:
        yield from list(self._mem)
        f = self._file
        for off in list(self._disk.values()):  # a list: reading back promotes, which edits the index
            assert f is not None
            yield _HEADER.unpack(f.read(off, _HEADER.size))[0].decode("ascii")

    def _load(self, h: str) -> str | None:
        """The text of an evicted hash, moved back into memory; None when it is not on disk."""
        k = _key(h)
        off = self._disk.get(k) if k is not None else None
        if off is None or k is None:
            return None
        f = self._file
        assert f is not None
        stored, crc, size = _HEADER.unpack(f.read(off, _HEADER.size))
        if stored != h.encode("ascii"):
            return None  # another text whose hash starts with the same 8 bytes
        data = f.read(off + _HEADER.size, size)
        if checksum(data) != crc:
            raise SpillReadError(f"the text of blob {h[:12]} is damaged on disk (checksum mismatch)")
        text = data.decode("utf-8")
        self._disk.pop(k)
        self._mem[h] = text
        return text

    # ---------------------------------------------------------------- evicting
    def evict(self, hashes: Iterable[str]) -> int:
        """Move these texts to disk (those in memory whose index slot is free); how many moved."""
        go: list[tuple[str, int]] = []
        seen: set[int] = set()
        for h in hashes:
            k = _key(h)
            # Reserved keys (empty/deleted slots) and a prefix already taken stay in memory.
            if k is None or k <= DELETED or k in self._disk or k in seen or h not in self._mem:
                continue
            seen.add(k)
            go.append((h, k))
        if not go:
            return 0
        recs: list[bytes] = []
        for h, _ in go:
            data = self._mem[h].encode("utf-8")
            recs.append(_HEADER.pack(h.encode("ascii"), checksum(data), len(data)) + data)
        if self._file is None:
            self._file = SpillFile("blobs")
        try:
            off = self._file.append(b"".join(recs))
        except OSError as exc:
            if self.spill_error is None:
                warn(
                    LOGGER,
                    "contextpipe: could not move %d old texts to disk (%s); they stay in memory and the "
                    "session goes on",
                    len(go),
                    exc,
                )
            self.spill_error = f"{type(exc).__name__}: {exc}"
            return 0
        # On disk in full: index them, then forget the in-memory copies.
        for (h, k), rec in zip(go, recs, strict=True):
            self._disk.put(k, off)
            off += len(rec)
            del self._mem[h]
        return len(go)

    def in_memory(self) -> int:
        return len(self._mem)

    def on_disk(self) -> int:
        return len(self._disk)

    def spilled_bytes(self) -> int:
        return self._file.end if self._file is not None else 0
