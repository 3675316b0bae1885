"""The probe's straight paths make a ring frame's header as one int's eight big-endian bytes, not by
frames.HEADER.pack (the struct module's code, cold after the model call, cost the agent's thread ~6 us a
send: bench_probe --publish-split 0.6 --split-reader fold --untraced --split-header). The bytes must be
HEADER's: the length, then the crc32, each a big-endian u32."""

from __future__ import annotations

import zlib

from hypothesis import given
from hypothesis import strategies as st

from engine.probe.agent_send import _header
from engine.recording.frames import HEADER, MAX_FRAME_BYTES


@given(st.integers(0, MAX_FRAME_BYTES), st.integers(0, 2**32 - 1))
def test_the_header_is_the_frames_header(length: int, crc: int) -> None:
    assert _header(length, crc) == HEADER.pack(length, crc)


@given(st.binary(max_size=4096))
def test_a_payloads_header_says_its_length_and_crc32(payload: bytes) -> None:
    assert _header(len(payload), zlib.crc32(payload)) == HEADER.pack(len(payload), zlib.crc32(payload))
    assert HEADER.unpack(_header(len(payload), 0)) == (len(payload), 0)
