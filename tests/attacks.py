"""Hostile recordings, kept so the attacks can be re-run (tests/test_recording_v2.py, benchmarks/bench_bombs.py).

    python -m tests.attacks OUT_DIR      # writes every attack file into OUT_DIR

Every file here has valid CRCs where it says so: the attack is in what the frames claim, not in noise.
"""

from __future__ import annotations

import struct
import sys
import zlib
from pathlib import Path
from typing import Any

import zstandard

from engine.hashing import sha256_hex
from engine.recording.cpsession import FORMAT_NAME, K_CHUNK, K_HEADER, RecordingWriter
from engine.recording.cpsession_format import _trailer
from engine.recording.frames import encode_frame

GIB = 1 << 30
HEADER = {"model": "m", "provider": "anthropic"}


def _head(version: int) -> bytes:
    return encode_frame({"k": K_HEADER, "format": FORMAT_NAME, "version": version, "model": "m"})


def _zeros_zlib(n: int) -> bytes:
    c = zlib.compressobj(9)
    block = bytes(1 << 20)
    return b"".join(c.compress(block) for _ in range(n >> 20)) + c.flush()


def _zeros_zstd(n: int) -> bytes:
    c = zstandard.ZstdCompressor(level=3).compressobj()
    block = bytes(1 << 20)
    return b"".join(c.compress(block) for _ in range(n >> 20)) + c.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK)


def v1_blob_bomb(path: Path, size: int = GIB) -> int:
    """The issue's attack: a version-1 recording (~1 MB) whose one blob inflates to `size` bytes.
    Returns the bomb frame's offset."""
    head = _head(1)
    session = encode_frame({"k": "session", "config": {"model": "m", "provider": "anthropic", "window": 1000}})
    bomb = encode_frame({"k": "blob", "h": "b" * 64, "z": _zeros_zlib(size)})
    turn = encode_frame({"k": "turn", "turn": 0, "trace": {"turn": 0}})
    path.write_bytes(head + session + bomb + turn)
    return len(head) + len(session)


def v1_trace_bomb(path: Path, size: int = 256 << 20) -> int:
    """A version-1 turn whose compressed trace inflates past the limit. Returns its offset."""
    from engine.recording.journal import _zdict

    c = zlib.compressobj(9, zdict=_zdict(1))
    z = b"".join(c.compress(bytes(1 << 20)) for _ in range(size >> 20)) + c.flush()
    head = _head(1)
    path.write_bytes(head + encode_frame({"k": "turn", "turn": 0, "tz": z, "zd": 1}))
    return len(head)


def v2_declared_bomb(path: Path) -> int:
    """A chunk that declares 2 GiB of events. Returns its offset."""
    head = _head(2)
    path.write_bytes(head + encode_frame({"k": K_CHUNK, "s": 1, "n": 2 * GIB, "t": [0], "z": b"x"}))
    return len(head)


def v2_lying_bomb(path: Path, size: int = GIB) -> int:
    """A chunk that declares 1 KB but whose stream inflates to `size` bytes. Returns its offset."""
    head = _head(2)
    path.write_bytes(head + encode_frame({"k": K_CHUNK, "s": 1, "n": 1000, "t": [0], "z": _zeros_zstd(size)}))
    return len(head)


def v2_many_chunks(path: Path, chunks: int = 40, each: int = 60 << 20) -> None:
    """Many honest-looking chunks, each one blob of `each` zero bytes: small file, huge total."""
    c = zstandard.ZstdCompressor(level=3).compressobj()
    out = [_head(2)]
    for t in range(chunks):
        data = "0" * each
        raw = encode_frame({"k": "blob", "h": sha256_hex(str(t)), "data": data}) + encode_frame(
            {"k": "turn", "turn": t, "trace": {}}
        )
        z = c.compress(raw) + c.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK)
        out.append(encode_frame({"k": K_CHUNK, "s": int(t == 0), "n": len(raw), "t": [t], "z": z}))
    path.write_bytes(b"".join(out))


def v2_tiny_events(path: Path, raw: int = 60 << 20) -> int:
    """One chunk of `raw` bytes of 9-byte frames ({"k": "x"}): within the inflate budget, ~5 KB on disk,
    but millions of events once decoded. Returns its offset."""
    tiny = encode_frame({"k": "x"})
    data = tiny * (raw // len(tiny)) + encode_frame({"k": "turn", "turn": 0, "trace": {}})
    c = zstandard.ZstdCompressor(level=19).compressobj()
    z = c.compress(data) + c.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK)
    head = _head(2)
    path.write_bytes(head + encode_frame({"k": K_CHUNK, "s": 1, "n": len(data), "t": [0], "z": z}))
    return len(head)


def v1_many_blobs(path: Path, blobs: int = 20, each: int = 63 << 20) -> None:
    """A version-1 recording of `blobs` zlib blobs each just under the per-blob limit: ~1.3 MB on disk,
    more than a GB inflated."""
    z = _zeros_zlib(each)
    out = [_head(1)]
    out += [encode_frame({"k": "blob", "h": sha256_hex(str(i)), "z": z}) for i in range(blobs)]
    out.append(encode_frame({"k": "turn", "turn": 0, "trace": {"turn": 0}}))
    path.write_bytes(b"".join(out))


def _empty_arrays(n: int) -> bytes:
    """A msgpack array of `n` empty arrays: one byte each, ~64 bytes each once decoded into Python."""
    return b"\xdd" + struct.pack(">I", n) + b"\x90" * n


def v2_empty_containers(path: Path, n: int = 50_000_000) -> int:
    """One chunk (~2 KB on disk) holding an event whose field is `n` empty arrays: 50 MB of events,
    within the inflate budget, 3.6 GB of Python lists. Returns its offset."""
    payload = b"\x82\xa1k\xa1x\xa1a" + _empty_arrays(n)
    data = struct.pack(">II", len(payload), zlib.crc32(payload)) + payload
    data += encode_frame({"k": "turn", "turn": 0, "trace": {}})
    c = zstandard.ZstdCompressor(level=19).compressobj()
    z = c.compress(data) + c.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK)
    head = _head(2)
    path.write_bytes(head + encode_frame({"k": K_CHUNK, "s": 1, "n": len(data), "t": [0], "z": z}))
    return len(head)


def v2_short_strings(path: Path, n: int = 20_000_000) -> int:
    """Like v2_empty_containers with `n` 2-byte strings: 60 MB of events, ~1.5 GB of str objects."""
    payload = b"\x82\xa1k\xa1x\xa1a\xdd" + struct.pack(">I", n) + b"\xa2ab" * n
    data = struct.pack(">II", len(payload), zlib.crc32(payload)) + payload
    data += encode_frame({"k": "turn", "turn": 0, "trace": {}})
    c = zstandard.ZstdCompressor(level=19).compressobj()
    z = c.compress(data) + c.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK)
    head = _head(2)
    path.write_bytes(head + encode_frame({"k": K_CHUNK, "s": 1, "n": len(data), "t": [0], "z": z}))
    return len(head)


def v1_container_trace(path: Path, n: int = 50_000_000) -> int:
    """A version-1 turn whose compressed trace (~50 KB) is a map holding `n` empty arrays: under the
    per-trace inflate limit, 3.6 GB of Python lists. Returns its offset."""
    from engine.recording.journal import _zdict

    c = zlib.compressobj(9, zdict=_zdict(1))
    z = c.compress(b"\x81\xa1a" + _empty_arrays(n)) + c.flush()
    head = _head(1)
    path.write_bytes(head + encode_frame({"k": "turn", "turn": 0, "tz": z, "zd": 1}))
    return len(head)


def v1_string_trace(path: Path, n: int = 20_000_000) -> int:
    """v1_container_trace with `n` 2-byte strings: ~1.5 GB of str objects. Returns its offset."""
    from engine.recording.journal import _zdict

    c = zlib.compressobj(9, zdict=_zdict(1))
    z = c.compress(b"\x81\xa1a\xdd" + struct.pack(">I", n) + b"\xa2ab" * n) + c.flush()
    head = _head(1)
    path.write_bytes(head + encode_frame({"k": "turn", "turn": 0, "tz": z, "zd": 1}))
    return len(head)


def footer_with_bad_data_end(src: Path, dst: Path) -> None:
    """A closed recording whose index says data_end "x" (the footer is CRC-valid)."""
    from engine.recording.cpsession import TRAILER_SIZE, RecordingReader

    data = src.read_bytes()
    with RecordingReader.open(src) as r:
        assert r.finished
        index_at = struct.unpack(">Q", r._frame(len(data) - TRAILER_SIZE)[0]["index_at"])[0]
        index, _ = r._frame(index_at)
    index["data_end"] = "x"
    dst.write_bytes(data[:index_at] + encode_frame(index) + _trailer(index_at))


def crafted_v1(path: Path, events: list[dict[str, Any]]) -> None:
    """A CRC-valid version-1 recording holding exactly these event maps (anything msgpack can hold)."""
    path.write_bytes(_head(1) + b"".join(encode_frame(e) for e in events))


def crafted_v2(path: Path, events: list[dict[str, Any]], close: bool = True) -> None:
    """A CRC-valid version-2 recording of these events, written by the real writer (no checks on content
    beyond what append() enforces)."""
    w = RecordingWriter(path, HEADER, overwrite=True)
    for e in events:
        try:
            w.append(e)
        except ValueError:
            pass  # the writer refuses it: the attack is then on the reader side only
    if close:
        w.close()
    else:
        w._flush_chunk()
        assert w._fd is not None
        import os

        os.close(w._fd)
        w._fd = None  # or its finalizer closes the number again, which another file may hold by then


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(".")
    out.mkdir(parents=True, exist_ok=True)
    for name, make in (
        ("v1-blob-bomb", v1_blob_bomb),
        ("v1-trace-bomb", v1_trace_bomb),
        ("v2-declared-bomb", v2_declared_bomb),
        ("v2-lying-bomb", v2_lying_bomb),
        ("v2-many-chunks", v2_many_chunks),
        ("v2-tiny-events", v2_tiny_events),
        ("v1-many-blobs", v1_many_blobs),
        ("v2-empty-containers", v2_empty_containers),
        ("v2-short-strings", v2_short_strings),
        ("v1-container-trace", v1_container_trace),
        ("v1-string-trace", v1_string_trace),
    ):
        p = out / f"{name}.cpsession"
        make(p)
        print(f"{p} {p.stat().st_size} bytes")


if __name__ == "__main__":
    main()
