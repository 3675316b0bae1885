"""The one wire and file format: length-prefixed, checksummed msgpack frames.

    +----------------+----------------+------------------------+
    | length  u32 BE | crc32   u32 BE | payload (msgpack map)  |
    +----------------+----------------+------------------------+

The same framing is used by `.cpsession` recordings and by the probe socket, so one decoder (and
one fuzz test) covers both. `length` counts payload bytes only; `crc32` is zlib.crc32 of the payload.
"""

from __future__ import annotations

import struct
import zlib
from typing import Any

import msgpack

from engine.errors import ContextPipeError

HEADER = struct.Struct(">II")
HEADER_SIZE = HEADER.size
# Frames above this are refused before any allocation: a corrupt or hostile length prefix
# (say 2 GiB) must produce an error, not a 2 GiB read.
MAX_FRAME_BYTES = 64 * 1024 * 1024


class FrameError(ContextPipeError, ValueError):
    """A frame could not be decoded. `offset` is where the bad frame starts (file offset or stream position)."""

    def __init__(self, message: str, offset: int | None = None) -> None:
        self.offset = offset
        where = f" at offset {offset}" if offset is not None else ""
        super().__init__(f"{message}{where}")


class FrameCountError(FrameError):
    """A buffer holds more frames than the caller allows (decode_frames' `max_frames`)."""


class ObjectCounter:
    """Counts what the maps and arrays a decode builds cost (as msgpack's object_hook and list_hook), and
    refuses the one that takes it past `left` bytes: COST for each, VALUE for each value it holds (a map's
    keys too). A payload of empty containers builds ~70 bytes of Python objects per byte (a 1.7 KB
    recording of compressed empty arrays took 3.6 GB), one of 2-byte strings ~20 (each a ~51-byte str):
    counted by their bytes alone, a normally compressed recording of short values built ~20x what its
    reader counted. A container is counted once built, its values before it: a caller bounds what one
    payload may build before it is decoded (cpsession's WORST_PER_BYTE).

    A decode passes `map_hook` and `list_hook` (object_hook=, list_hook=): two closures over one count,
    each knowing its container's kind. Every map and array of a recording goes through one (~35,000 in a
    930-turn session's read), and a closure's call and cell cost about half of an instance's __call__
    (a Python-level call slot, two class-attribute look-ups and a type test): msgpack's decode of every
    event of that session with hooks took 99 ms against 81 ms with these, and 65 ms with none. The
    instance stays callable as either hook, counting the same."""

    __slots__ = ("left", "map_hook", "list_hook", "_used")
    COST = 64  # an empty dict is 64 bytes, an empty list 56, plus the slot that holds it
    # A value's object beyond the bytes it decodes from: a str's ~49-byte header (a 2-byte str measures 59.5
    # with its slot), an int's 28 bytes (both
    # shared when small), and its slot in the list or the dict's entry.
    VALUE = 60

    def __init__(self, left: int) -> None:
        self.left = left
        used = 0
        cost, per_value, per_entry = self.COST, self.VALUE, 2 * self.VALUE

        def refuse() -> FrameCountError:
            return FrameCountError(f"more than {left} bytes of maps, arrays and the values they hold")

        def map_hook(obj: Any) -> Any:  # a map's keys are values too
            nonlocal used
            used += cost + per_entry * len(obj)
            if used > left:
                raise refuse()
            return obj

        def list_hook(obj: Any) -> Any:
            nonlocal used
            used += cost + per_value * len(obj)
            if used > left:
                raise refuse()
            return obj

        def count() -> int:
            return used

        self.map_hook, self.list_hook, self._used = map_hook, list_hook, count

    @property
    def used(self) -> int:
        """What the containers counted so far cost, in bytes."""
        return self._used()

    def __call__(self, obj: Any) -> Any:
        return self.map_hook(obj) if type(obj) is dict else self.list_hook(obj)


def _msgpack_shapes() -> list[tuple[int, int, int]]:
    """For each first byte of a msgpack value: (kind, width, extra). kind 0: `extra` more bytes; 1: a
    `width`-byte length, then `extra` + that many bytes (str, bin, ext); 2: an array of a `width`-byte
    count; 3: a map of one. fix* kinds carry their length in the byte (width 0, handled by the caller)."""
    shape = [(0, 0, 0)] * 256
    for b, (kind, width, extra) in {
        0xC4: (1, 1, 0), 0xC5: (1, 2, 0), 0xC6: (1, 4, 0),  # bin
        0xC7: (1, 1, 1), 0xC8: (1, 2, 1), 0xC9: (1, 4, 1),  # ext (a type byte)
        0xCA: (0, 0, 4), 0xCB: (0, 0, 8),  # float
        0xCC: (0, 0, 1), 0xCD: (0, 0, 2), 0xCE: (0, 0, 4), 0xCF: (0, 0, 8),  # uint
        0xD0: (0, 0, 1), 0xD1: (0, 0, 2), 0xD2: (0, 0, 4), 0xD3: (0, 0, 8),  # int
        0xD4: (0, 0, 2), 0xD5: (0, 0, 3), 0xD6: (0, 0, 5), 0xD7: (0, 0, 9), 0xD8: (0, 0, 17),  # fixext
        0xD9: (1, 1, 0), 0xDA: (1, 2, 0), 0xDB: (1, 4, 0),  # str
        0xDC: (2, 2, 0), 0xDD: (2, 4, 0), 0xDE: (3, 2, 0), 0xDF: (3, 4, 0),
    }.items():
        shape[b] = (kind, width, extra)
    return shape


_SHAPES = _msgpack_shapes()


def count_values(buf: bytes, limit: int) -> int:
    """The msgpack values (scalars, maps and arrays) in the payloads of the frames in `buf`, counted
    without building any; FrameCountError once past `limit`. A reader runs this before decoding bytes it
    has inflated far beyond what the file holds: every value becomes a Python object of ~30-70 bytes
    (a 5 KB recording of 2-byte strings built 1.5 GB), while an honest recording that inflates that far
    holds one large text. Malformed bytes end the count early: the decode that follows names them."""
    n = 0
    pos, end = 0, len(buf)
    while pos + HEADER_SIZE <= end:
        stop = pos + HEADER_SIZE + int.from_bytes(buf[pos : pos + 4], "big")
        n = _count(buf, pos + HEADER_SIZE, min(stop, end), n, limit, pos)
        pos = stop
    return n


def count_payload_values(payload: bytes, limit: int) -> int:
    """count_values for one msgpack value that is not in a frame (a version-1 trace, inflated)."""
    return _count(payload, 0, len(payload), 0, limit, None)


def _count(buf: bytes, p: int, stop: int, n: int, limit: int, offset: int | None) -> int:
    shapes = _SHAPES
    pending = 1
    while pending and p < stop:
        b = buf[p]
        p += 1
        pending -= 1
        n += 1
        if n > limit:
            raise FrameCountError(f"more than {limit} values", offset)
        if b < 0x80 or b >= 0xE0 or 0xC0 <= b <= 0xC3:
            continue  # fixint, nil, bool (0xc1 is invalid: the decoder says so)
        if b < 0x90:
            pending += 2 * (b & 0x0F)
        elif b < 0xA0:
            pending += b & 0x0F
        elif b < 0xC0:
            p += b & 0x1F
        else:
            kind, width, extra = shapes[b]
            if kind == 0:
                p += extra
            else:
                count = int.from_bytes(buf[p : p + width], "big")
                p += width
                if kind == 1:
                    p += extra + count
                else:
                    pending += count * (kind - 1)  # an array's values, or a map's keys and values
    return n


def pack_payload(obj: dict[str, Any]) -> bytes:
    return msgpack.packb(obj, use_bin_type=True)


# ormsgpack's packb and its options, loaded by the first fast encode (None: not yet; False: not
# installed). Not at import: ormsgpack (with uuid) costs ~4-5 ms of CPU to import, and a reader of
# recordings (`cp-inspect simulate`, replay) only decodes, which msgpack does.
_fast: tuple[Any, int] | bool | None = None
ormsgpack: Any  # the module once loaded, or None; set by _load_fast (read through __getattr__ before)


def _load_fast() -> tuple[Any, int] | bool:
    global _fast, ormsgpack
    try:
        import ormsgpack as fast_module
    except ImportError:  # pragma: no cover - a platform without its wheel: msgpack alone does it all
        ormsgpack, _fast = None, False
        return False
    ormsgpack = fast_module
    # Types msgpack refuses stay refused by the fast path (ormsgpack would encode them), so both paths
    # accept the same events.
    opts = fast_module.OPT_PASSTHROUGH_DATACLASS | fast_module.OPT_PASSTHROUGH_DATETIME | fast_module.OPT_PASSTHROUGH_UUID
    _fast = (fast_module.packb, opts)
    return _fast


def __getattr__(name: str) -> Any:
    """`ormsgpack`: the module, or None when it is not installed (loaded on first use, see _fast)."""
    if name == "ormsgpack":
        _load_fast()
        return ormsgpack
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def pack_payload_fast(obj: dict[str, Any]) -> bytes | None:
    """The same msgpack as `pack_payload` (str as str, bytes as bin, maps in insertion order), from
    ormsgpack's encoder: about 2.5x faster on a turn trace. None when ormsgpack is not installed or
    does not take the object (a non-str map key, say): the caller then packs it with msgpack, which
    decides whether the object is encodable at all."""
    fast = _fast if _fast is not None else _load_fast()
    if not isinstance(fast, tuple):
        return None
    packb, opts = fast
    try:
        return packb(obj, option=opts)  # type: ignore[no-any-return]
    except Exception:
        return None


def encode_frame(obj: dict[str, Any]) -> bytes:
    # The agent's recorder encodes every event on the agent's thread: the fast encoder when it takes
    # the event, msgpack otherwise (same bytes to any decoder, see pack_payload_fast).
    payload = pack_payload_fast(obj)
    if payload is None:
        payload = pack_payload(obj)
    if len(payload) > MAX_FRAME_BYTES:
        raise FrameError(f"frame of {len(payload)} bytes exceeds the {MAX_FRAME_BYTES}-byte limit")
    return HEADER.pack(len(payload), zlib.crc32(payload)) + payload


def decode_header(header: bytes, offset: int | None = None, limit: int = MAX_FRAME_BYTES) -> tuple[int, int]:
    """(length, crc) from an 8-byte header; rejects lengths above `limit`."""
    if len(header) != HEADER_SIZE:
        raise FrameError(f"truncated frame header ({len(header)} of {HEADER_SIZE} bytes)", offset)
    length, crc = HEADER.unpack(header)
    if length > limit:
        raise FrameError(f"frame length {length} exceeds the limit of {limit} bytes", offset)
    return length, crc


def decode_payload(
    payload: bytes,
    crc: int,
    offset: int | None = None,
    counter: ObjectCounter | None = None,
    checked: bool = True,
) -> dict[str, Any]:
    """The map in one frame's payload. `checked=False` skips the crc32 check, for bytes that never
    crossed a socket or a file (a probe client's shared-memory ring, see engine.probe.ring)."""
    if checked and zlib.crc32(payload) != crc:
        raise FrameError("checksum mismatch (corrupt frame)", offset)
    try:
        if counter is None:
            obj = msgpack.unpackb(payload, raw=False, strict_map_key=False)
        else:
            obj = msgpack.unpackb(
                payload, raw=False, strict_map_key=False, object_hook=counter.map_hook, list_hook=counter.list_hook
            )
    except FrameCountError as exc:
        raise FrameCountError(str(exc), offset) from None
    except Exception as exc:  # msgpack raises several unrelated exception types
        raise FrameError(f"payload is not valid msgpack ({type(exc).__name__})", offset) from None
    if not isinstance(obj, dict):
        raise FrameError(f"payload is a {type(obj).__name__}, expected a map", offset)
    return obj


def decode_frames(
    buf: bytes, limit: int = MAX_FRAME_BYTES, max_frames: int | None = None, counter: ObjectCounter | None = None
) -> tuple[list[dict[str, Any]], int]:
    """Decode every complete frame in `buf`. Returns (frames, bytes consumed); a partial tail is left.
    More than `max_frames` frames (None: no bound), or maps and arrays past what `counter` allows, raise
    FrameCountError before the one past it is built."""
    out: list[dict[str, Any]] = []
    pos = 0
    n = len(buf)
    while n - pos >= HEADER_SIZE:
        if max_frames is not None and len(out) >= max_frames:
            raise FrameCountError(f"more than {max_frames} frames", pos)
        length, crc = decode_header(buf[pos : pos + HEADER_SIZE], pos, limit)
        end = pos + HEADER_SIZE + length
        if end > n:
            break
        out.append(decode_payload(buf[pos + HEADER_SIZE : end], crc, pos, counter))
        pos = end
    return out, pos
