"""cl100k_base's ranks as a file read in place: the rank of a few byte strings without building 100,256
Python objects.

`cp-inspect simulate` tokenizes only what a recording's count table lacks; on the 930-turn synthetic
session that is a few cut tool results. Any exact tokenizer first materializes the 100,256 ranks: the
bpe-openai crate builds its tokenizer in ~32 ms CPU, a dict from the bundled rank file costs ~35 ms
(marshal of the parsed dict, ~27 ms, is no better: the cost is the objects). engine/sim/few_texts.py
looks up only the ranks of the pieces it merges (a few thousand), so here the ranks are kept in a
file in a hash layout, read as one bytes object (~2.5 MB, ~1-2 ms) and searched in place.

The file is derived data, kept beside the package's bytecode like a .pyc (PYTHONPYCACHEPREFIX
honoured; nothing written under PYTHONDONTWRITEBYTECODE or where the directory is read-only), and
never downloaded: it is built from the bundled rank file whose sha256 engine.bpe_ranks checks. It
is used only when its header matches the rank file as it is now (path, size, mtime) and its body's
crc32 matches; anything else (missing, stale, damaged, another format) is rebuilt or, when it cannot
be written, not used: the caller then counts with the real tokenizer.

Layout: MAGIC, a header (json: the rank file's path, size, mtime_ns, the body's crc32), then the
body: BUCKETS + 1 little-endian uint32 offsets into the entries (bucket k's entries run from
offsets[k] to offsets[k + 1]), then the entries, each one length byte, a 3-byte little-endian rank and
the token's bytes. A token's bucket is crc32(token) % BUCKETS.
"""

from __future__ import annotations

import json
import os
import struct
import sys
import zlib
from collections.abc import Callable
from functools import lru_cache

MAGIC = b"CPRANKS1"
BUCKETS = 1 << 17  # ~0.76 tokens a bucket: a lookup compares about one entry
_LEN = struct.Struct("<I")


class RankTable:
    """The ranks in one bytes object; `rank(token)` is the token's rank or None."""

    __slots__ = ("_body", "_offsets", "_base")

    def __init__(self, body: bytes) -> None:
        self._body = body
        self._offsets = memoryview(body)[: 4 * (BUCKETS + 1)].cast("I")
        self._base = 4 * (BUCKETS + 1)

    def rank(self, token: bytes) -> int | None:
        k = zlib.crc32(token) % BUCKETS
        offs = self._offsets
        at, end = self._base + offs[k], self._base + offs[k + 1]
        body = self._body
        n = len(token)
        while at < end:
            size = body[at]
            if size == n and body[at + 4 : at + 4 + n] == token:
                return body[at + 1] | body[at + 2] << 8 | body[at + 3] << 16
            at += 4 + size
        return None


def build_body(ranks: dict[bytes, int]) -> bytes:
    """The body for `ranks` ({token: rank}): every token at most 255 bytes, every rank below 2**24."""
    buckets: list[list[bytes]] = [[] for _ in range(BUCKETS)]
    for token, r in ranks.items():
        if not 0 < len(token) < 256 or not 0 <= r < 1 << 24:
            raise ValueError("a token or rank this layout cannot hold")
        buckets[zlib.crc32(token) % BUCKETS].append(
            bytes((len(token), r & 255, r >> 8 & 255, r >> 16)) + token
        )
    offsets = [0]
    entries = []
    for b in buckets:
        chunk = b"".join(b)
        entries.append(chunk)
        offsets.append(offsets[-1] + len(chunk))
    body = struct.pack(f"<{BUCKETS + 1}I", *offsets) + b"".join(entries)
    if sys.byteorder != "little":  # memoryview.cast reads native order: this layout is little-endian
        raise ValueError("a big-endian host")
    return body


def _stamp(source: str) -> dict[str, object]:
    st = os.stat(source)
    return {"path": os.path.abspath(source), "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def read(path: str, source: str) -> RankTable | None:
    """The table in `path` when it was built from `source` as it is now and is undamaged, else None."""
    try:
        with open(path, "rb") as f:
            data = f.read()
        stamp = _stamp(source)
    except OSError:
        return None
    if not data.startswith(MAGIC) or len(data) < len(MAGIC) + 4:
        return None
    (hlen,) = _LEN.unpack_from(data, len(MAGIC))
    start = len(MAGIC) + 4 + hlen
    try:
        header = json.loads(data[len(MAGIC) + 4 : start])
    except ValueError:
        return None
    if not isinstance(header, dict) or {k: header.get(k) for k in stamp} != stamp:
        return None  # built from another file, or from this one before it changed
    body = data[start:]
    if len(body) < 4 * (BUCKETS + 1) or zlib.crc32(body) != header.get("crc32"):
        return None
    table = RankTable(body)
    offs = table._offsets
    if offs[0] != 0 or offs[BUCKETS] != len(body) - table._base:
        return None
    return table


def write(path: str, source: str, ranks: dict[bytes, int]) -> RankTable | None:
    """Build the table for `ranks` (read from `source`) and write it to `path` atomically; None when it
    cannot be written (the table is not used then: building it costs more than the tokenizer's load)."""
    try:
        body = build_body(ranks)
        header = json.dumps({**_stamp(source), "crc32": zlib.crc32(body)}).encode()
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        try:
            with open(tmp, "wb") as f:
                f.write(MAGIC + _LEN.pack(len(header)) + header + body)
            os.replace(tmp, path)  # a reader sees the old file or the new one, never half of one
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    except (OSError, ValueError):
        return None
    return RankTable(body)


def cache_path() -> str | None:
    """Where the table is kept: beside engine/bpe_ranks.py's bytecode, one file per Python version."""
    try:
        from importlib.util import cache_from_source

        from engine import bpe_ranks

        pyc = cache_from_source(bpe_ranks.__file__)
    except (NotImplementedError, ValueError, TypeError):
        return None
    return os.path.splitext(pyc)[0] + ".ranks"


def load_or_build(path: str, source: str, write_ok: bool = True) -> RankTable | None:
    """The table in `path` for the rank file `source`; when it is missing, stale or damaged, built from
    `source` (its sha256 checked: the file tiktoken's encoder is built from) and written, if `write_ok`;
    None when there is no usable table."""
    table = read(path, source)
    if table is not None or not write_ok:
        return table
    import hashlib

    from engine.bpe_ranks import RANKS_SHA256, parse_ranks

    try:
        with open(source, "rb") as f:
            data = f.read()
    except OSError:
        return None
    if hashlib.sha256(data).hexdigest() != RANKS_SHA256:
        return None
    return write(path, source, parse_ranks(data))


@lru_cache(maxsize=1)
def cl100k_rank() -> Callable[[bytes], int | None] | None:
    """cl100k_base's rank of a token (None for a non-token), from the table file, built now when it is
    missing or stale (once; never when bytecode is not written); None when there is no usable table."""
    from engine import bpe_ranks

    path = cache_path()
    try:
        source = bpe_ranks._ranks_path()
    except (ImportError, AttributeError, OSError):
        return None
    if path is None:
        return None
    table = load_or_build(path, source, not sys.dont_write_bytecode)
    return None if table is None else table.rank
