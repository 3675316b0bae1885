"""Event frames decoded with only some fields of each turn's trace built (a reader that needs a few).

A version-2 chunk holds every event of a turn, and the `turn` event's trace is ~40% of a recording's
decoded bytes and ~2/3 of the msgpack decoding: `cp-inspect simulate` reads only its `sections` (the
token-count check), ~7-9 ms of a 930-call session's ~45 ms read going to the other fields. Here a turn
frame's trace is walked with msgpack's Unpacker: the fields asked for are decoded, the others skipped
(parsed in C, nothing built), so the event is {"k": "turn", "turn": N, "trace": {those fields}}.

What is checked stays what `frames.decode_frames` checks, with one difference:
- the frame header, its length limit and the payload's crc, by the same functions, first;
- the payload must be one msgpack map and nothing after it; a skipped value must be complete, well
  formed msgpack within the payload (a truncated or malformed one raises). Anything this walk does not
  take as a turn frame, or that raises in it, is decoded by `decode_payload`, which gives the event or
  the very error the full decode gives;
- not checked in a skipped field: that its strings are valid UTF-8 and its map keys hashable (only
  msgpack's object building looks at those). A frame has passed its crc by then, so only a file made to
  hold such bytes gets past it, and a reader that asks for those fields still decodes them.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any
from zlib import crc32

import msgpack

from engine.recording.frames import (
    HEADER,
    HEADER_SIZE,
    MAX_FRAME_BYTES,
    FrameCountError,
    FrameError,
    ObjectCounter,
    decode_header,
    decode_payload,
)

# How the writer starts a turn event's map (engine/recording/cpsession_writer.py writes "k" first): a fixmap,
# then the key "k" and the value "turn" as fixstrs. A frame that starts otherwise is decoded whole.
_TURN_KIND = b"\xa1k\xa4turn"


def decode_frames_lean(
    buf: bytes,
    trace_fields: Collection[str],
    limit: int = MAX_FRAME_BYTES,
    max_frames: int | None = None,
    counter: ObjectCounter | None = None,
) -> tuple[list[dict[str, Any]], int]:
    """`frames.decode_frames(buf, limit, max_frames, counter)` with each turn event's trace holding only
    `trace_fields`."""
    out: list[dict[str, Any]] = []
    append = out.append
    header = HEADER.unpack_from  # decode_header's reading, without a slice and a call per frame
    pos = 0
    n = len(buf)
    while n - pos >= HEADER_SIZE:
        if max_frames is not None and len(out) >= max_frames:
            raise FrameCountError(f"more than {max_frames} frames", pos)
        length, crc = header(buf, pos)
        if length > limit:
            decode_header(buf[pos : pos + HEADER_SIZE], pos, limit)  # raises what it says of the length
        end = pos + HEADER_SIZE + length
        if end > n:
            break
        payload = buf[pos + HEADER_SIZE : end]
        if payload[1:8] == _TURN_KIND and payload[0] & 0xF0 == 0x80:
            append(_lean_turn(payload, crc, pos, trace_fields, counter))
        else:
            append(decode_payload(payload, crc, pos, counter))
        pos = end
    return out, pos


def _lean_turn(
    payload: bytes, crc: int, pos: int, fields: Collection[str], counter: ObjectCounter | None = None
) -> dict[str, Any]:
    if crc32(payload) != crc:
        raise FrameError("checksum mismatch (corrupt frame)", pos)  # as decode_payload says it
    try:
        event = _walk(payload, fields, counter)
    except FrameCountError as exc:
        raise FrameCountError(str(exc), pos) from None
    except Exception:  # msgpack raises several unrelated types; decode_payload names the problem
        event = None
    return decode_payload(payload, crc, pos, counter) if event is None else event  # whole: its event or error


def _walk(payload: bytes, fields: Collection[str], counter: ObjectCounter | None = None) -> dict[str, Any] | None:
    """The event with its trace's `fields` only, or None when the payload is not a plain turn event
    (the caller decodes it whole)."""
    hooks = {} if counter is None else {"object_hook": counter.map_hook, "list_hook": counter.list_hook}
    u = msgpack.Unpacker(raw=False, strict_map_key=False, max_buffer_size=len(payload), **hooks)
    u.feed(payload)
    event: dict[str, Any] = {}
    for _ in range(u.read_map_header()):
        key = u.unpack()
        if key != "trace":
            event[key] = u.unpack()
            continue
        trace: dict[str, Any] = {}
        for _ in range(u.read_map_header()):  # not a map: raises, and the frame is decoded whole
            name = u.unpack()
            if type(name) is str and name in fields:
                trace[name] = u.unpack()
            else:
                u.skip()
        event[key] = trace
    if u.tell() != len(payload):
        return None  # bytes after the map: decode_payload refuses them
    return event
