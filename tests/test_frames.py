"""Fuzz the one frame decoder shared by recordings and the probe socket."""

from __future__ import annotations

import dataclasses
import datetime
import struct
import uuid

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.recording.frames import (
    HEADER_SIZE,
    MAX_FRAME_BYTES,
    FrameError,
    decode_frames,
    encode_frame,
    ormsgpack,
    pack_payload,
    pack_payload_fast,
)

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**64 - 1),
    st.floats(allow_nan=False),
    st.text(max_size=40),
    st.binary(max_size=40),
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
events = st.dictionaries(st.text(max_size=8), values, max_size=5).map(lambda d: {"k": "ev", **d})


@given(st.binary(max_size=2_000))
@settings(max_examples=400)
def test_arbitrary_bytes_decode_or_raise_frame_error(data: bytes) -> None:
    try:
        frames, used = decode_frames(data)
    except FrameError as exc:
        assert exc.offset is not None and 0 <= exc.offset < len(data)
        return
    assert 0 <= used <= len(data) and all(isinstance(f, dict) for f in frames)
    assert (
        len(data) - used < HEADER_SIZE or struct.unpack(">I", data[used : used + 4])[0] > len(data) - used - 8
    )


@given(st.lists(events, max_size=6))
def test_round_trip(evs: list[dict]) -> None:
    buf = b"".join(encode_frame(e) for e in evs)
    frames, used = decode_frames(buf)
    assert frames == evs and used == len(buf)


@given(st.lists(events, min_size=1, max_size=4), st.data())
def test_truncation_keeps_every_complete_frame(evs: list[dict], data: st.DataObject) -> None:
    encoded = [encode_frame(e) for e in evs]
    buf = b"".join(encoded)
    cut = data.draw(st.integers(0, len(buf)))
    frames, used = decode_frames(buf[:cut])
    ends = [sum(len(x) for x in encoded[: i + 1]) for i in range(len(encoded))]
    complete = sum(1 for e in ends if e <= cut)
    assert frames == evs[:complete] and used == (ends[complete - 1] if complete else 0)


@given(st.lists(events, min_size=1, max_size=4), st.data())
def test_a_flipped_byte_is_caught(evs: list[dict], data: st.DataObject) -> None:
    buf = bytearray(b"".join(encode_frame(e) for e in evs))
    i = data.draw(st.integers(0, len(buf) - 1))
    buf[i] ^= 1 + data.draw(st.integers(0, 254))
    try:
        frames, _ = decode_frames(bytes(buf))
    except FrameError:
        return
    # A flip in a length field can only shorten what decodes; it can never invent a different event.
    assert all(f in evs for f in frames)


def test_huge_length_prefix_is_refused_before_reading() -> None:
    hostile = struct.pack(">II", 2**31, 0) + b"x" * 16
    with pytest.raises(FrameError, match="exceeds the limit") as err:
        decode_frames(hostile)
    assert err.value.offset == 0 and 2**31 > MAX_FRAME_BYTES


# ------------------------------------------------------------------ the probe's fast encoder

wide_values = st.recursive(
    scalars | st.tuples(st.integers(-(2**63), 2**64 - 1), st.text(max_size=4)),
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.text(max_size=8) | st.integers(0, 9), inner, max_size=4),
    max_leaves=16,
)


@given(st.dictionaries(st.text(max_size=8), wide_values, max_size=6))
@settings(max_examples=400)
def test_fast_payload_decodes_to_what_msgpack_gives(ev: dict[str, object]) -> None:
    """Whatever pack_payload_fast encodes decodes exactly as pack_payload's encoding does (tuples as
    arrays, bytes as bin, key order kept); what it does not take (int map keys) it leaves to msgpack."""
    fast = pack_payload_fast(ev)
    slow = pack_payload(ev)
    if fast is None:
        assert ormsgpack is None or _has_int_key(ev)
        return
    assert unpack(fast) == unpack(slow)
    assert list(unpack(fast)) == list(ev)


def _has_int_key(v: object) -> bool:
    if isinstance(v, dict):
        return any(not isinstance(k, str) or _has_int_key(x) for k, x in v.items())
    if isinstance(v, (list, tuple)):
        return any(_has_int_key(x) for x in v)
    return False


def unpack(b: bytes) -> object:
    return msgpack.unpackb(b, raw=False, strict_map_key=False)


@pytest.mark.skipif(ormsgpack is None, reason="ormsgpack is not installed: the probe encodes with msgpack")
def test_fast_payload_refuses_what_msgpack_refuses() -> None:
    @dataclasses.dataclass
    class D:
        x: int

    for bad in (D(1), datetime.datetime(2026, 1, 1), uuid.UUID(int=1), object(), 2**64):
        assert pack_payload_fast({"k": "x", "v": bad}) is None
        with pytest.raises((TypeError, OverflowError, ValueError)):
            pack_payload({"k": "x", "v": bad})
