"""Batch frames spliced from frames the agent already encoded (a recording agent's turns, sent whole).

An agent that records encodes every journal event into its frame on its own thread, and hands the
probe those bytes with the event (`ProbeServer.publish(event, frame)`). On the elided stream (see
`elide`) the probe's I/O thread used to send each such turn as its summary instead: a dozen objects
picked out of a trace the agent built up to ~100 ms earlier (cache misses, ~6 us a turn on a 1 ms
turn) and encoded again. The whole turn's payload is already there, so it goes into the batch as it
is: the client gets every turn whole (nothing to fetch for it later, nothing owed at exit) for a copy
and a checksum, ~2.6 KB a turn on the socket instead of ~0.45.

A msgpack array is its header followed by its elements' encodings, so a batch built here is byte for
byte what encoding `{"k": "batch", "events": [...], "at": [...], "end": N}` whole gives (tests hold
them together): a client cannot tell the two apart.

A client that says `"frames": true` in its hello (with `"elide": true`; `ProbeClient` does) is sent
those frames as they are instead, with neither a splice nor a checksum on this thread (half the
splice's cost by `bench_probe --profile --recording`): a batch with no events announces them,
`{"k": "batch", "events": [], "at": [P, ...], "end": N, "frames": M}`, and the next M frames on the
stream are the events at positions P, ... (the client hands them out as it does a batch's). An agent
from before this ignores the word and a client from before never says it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engine.recording.frames import HEADER_SIZE, pack_payload, pack_payload_fast

# A batch payload's fixed parts: a map of 4, "k": "batch", then "events": and its array; "at" and "end".
_BATCH_HEAD = b"\x84\xa1k\xa5batch\xa6events"
_AT = b"\xa2at"
_END = b"\xa3end"


def _array_header(n: int) -> bytes:
    if n < 16:
        return bytes((0x90 | n,))
    if n < 0x10000:
        return b"\xdc" + n.to_bytes(2, "big")
    return b"\xdd" + n.to_bytes(4, "big")


def _pack(obj: Any) -> bytes:
    out = pack_payload_fast(obj)
    return pack_payload(obj) if out is None else out


def payload_of(frame: bytes) -> memoryview:
    """The payload of one frame (`engine.recording.frames`): what follows its length and checksum. A
    view, not a copy: the batch is joined from it (a copy of each frame first cost ~0.7 us a turn more,
    its first read of a frame the agent wrote ~100 ms earlier)."""
    return memoryview(frame)[HEADER_SIZE:]


def batch_payload(parts: Sequence[bytes | memoryview], at: list[int], end: int) -> bytes:
    """The payload of `{"k": "batch", "events": [...], "at": at, "end": end}`, given each event's own
    encoded payload in `parts` (in order)."""
    return b"".join((_BATCH_HEAD, _array_header(len(parts)), *parts, _AT, _pack(at), _END, _pack(end)))
