"""The proxy's recorder decodes a compressed body (gzip, deflate, zstd) to at most its ceiling and never
builds more: a few hundred kilobytes of gzip can claim gigabytes (a decompression bomb, or a client's bug),
and the recorder decoded every body whole, so one such request or response took the proxy's memory with
it. Past the ceiling the body is refused for recording with a clear reason (it is forwarded as sent)."""

from __future__ import annotations

import gzip
import tracemalloc
import zlib
from collections.abc import Iterator

import pytest
import zstandard

from engine.capture.proxy.exchange import MAX_DECODED_BYTES, Truncated, decode
from engine.capture.proxy.recording import MAX_RECORD_BYTES
from tests.capture.brotli_stream import compress_stream, libbrotlienc

CLAIMED = 200 * 2**20  # what the bomb decodes to
LIMIT = 4 * 2**20


def _zeros_compressed(enc: str) -> bytes:
    """CLAIMED zero bytes compressed, built a megabyte at a time (the test never holds CLAIMED bytes)."""
    chunk = b"\0" * 2**20
    if enc == "zstd":
        c = zstandard.ZstdCompressor().compressobj()
        return b"".join([*(c.compress(chunk) for _ in range(CLAIMED // len(chunk))), c.flush()])
    z = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS if enc == "gzip" else zlib.MAX_WBITS)
    return b"".join([*(z.compress(chunk) for _ in range(CLAIMED // len(chunk))), z.flush()])


@pytest.mark.parametrize("enc", ["gzip", "deflate", "zstd"])
def test_a_bomb_is_refused_at_the_ceiling_without_building_the_rest(enc: str) -> None:
    bomb = _zeros_compressed(enc)
    assert len(bomb) < CLAIMED // 100
    tracemalloc.start()
    try:
        with pytest.raises(
            ValueError, match="decodes to more than 4 MiB.*forwarded as sent but not recorded"
        ):
            decode(bomb, enc, "request", limit=LIMIT)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * LIMIT, peak  # (decoded whole: CLAIMED, 50x the ceiling)


def test_bodies_within_the_ceiling_decode_as_before() -> None:
    body = b'{"messages": [{"role": "user", "content": "hi"}]}' * 500
    assert decode(gzip.compress(body) + gzip.compress(b"!"), "gzip") == body + b"!"  # two gzip members
    assert decode(zlib.compress(body), "deflate") == body
    raw = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    assert decode(raw.compress(body) + raw.flush(), "deflate") == body  # raw deflate, as some servers send
    assert decode(gzip.compress(zstandard.ZstdCompressor().compress(body)), "zstd, gzip") == body
    assert decode(gzip.compress(body), "gzip", limit=len(body)) == body  # exactly at the ceiling
    with pytest.raises(ValueError, match="does not decode"):
        decode(gzip.compress(body)[:-12], "gzip")  # cut short


def test_the_decode_ceiling_is_the_recorders() -> None:
    assert MAX_DECODED_BYTES == MAX_RECORD_BYTES


# ------------------------------------------------------------------------------------------- brotli
# brotli was decoded whole by the `brotli` package's one-shot call and checked against the ceiling only
# after (and with the package absent it was not decoded at all). It is now decoded a bounded piece at a
# time: by the package (1.2+, which takes an output limit) or the system's libbrotlidec through ctypes.
def _brotli(blocks: Iterator[bytes]) -> bytes:
    """The blocks brotli-compressed by the system's encoder, streamed (the input is never whole)."""
    if libbrotlienc() is None:
        pytest.skip("the system's libbrotlienc is not installed (the test makes its bomb with it)")
    return compress_stream(blocks)


def test_a_brotli_bomb_is_refused_at_the_ceiling_without_building_the_rest() -> None:
    bomb = _brotli(b"\0" * 2**20 for _ in range(CLAIMED // 2**20))
    assert len(bomb) < CLAIMED // 1000
    tracemalloc.start()
    try:
        with pytest.raises(
            ValueError, match="decodes to more than 4 MiB.*forwarded as sent but not recorded"
        ):
            decode(bomb, "br", "response", limit=LIMIT)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * LIMIT, peak


def test_brotli_bodies_within_the_ceiling_decode_and_bad_ones_say_so() -> None:
    body = b'{"choices": [{"message": {"content": "hi"}}]}' * 3000
    packed = _brotli(iter([body]))
    assert decode(packed, "br") == body
    assert decode(packed, "br", limit=len(body)) == body  # exactly at the ceiling
    assert decode(gzip.compress(packed), "br, gzip") == body
    with pytest.raises(ValueError, match="br-encoded but does not decode"):
        decode(packed[:-4], "br")  # cut short
    with pytest.raises(ValueError, match="br-encoded but does not decode"):
        decode(packed + b"junk", "br")
    with pytest.raises(ValueError, match="br-encoded but does not decode"):
        decode(b"\xff" * 32, "br")


@pytest.mark.parametrize("coding", ["gzip", "deflate", "zstd", "br"])
def test_a_body_cut_off_decodes_as_far_as_it_arrived(coding: str) -> None:
    # An event stream cut mid-way (the upstream or the agent went away): the recorder keeps the events
    # that arrived, compressed or not; a whole body is still required to be whole without `partial`.
    events = b"".join(f'event: e\ndata: {{"i": {i}, "pad": "{"x" * 200}"}}\n\n'.encode() for i in range(400))
    if coding == "br":
        packed = _brotli(iter([events]))
    elif coding == "zstd":  # flushed a block at a time, as a server streaming its events does
        c = zstandard.ZstdCompressor().compressobj()
        step = len(events) // 20
        packed = (
            b"".join(
                c.compress(events[i : i + step]) + c.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK)
                for i in range(0, len(events), step)
            )
            + c.flush()
        )
    else:
        z = zlib.compressobj(wbits=31 if coding == "gzip" else 15)
        packed = z.compress(events) + z.flush()
    cut = packed[: len(packed) // 2]
    got = decode(cut, coding, partial=True)
    assert 0 < len(got) < len(events) and events.startswith(got), (len(got), len(events))
    assert decode(packed, coding, partial=True) == events
    if coding != "zstd":  # (zstandard's stream reader ends a cut frame without saying so: not caught)
        with pytest.raises(ValueError, match="does not decode"):
            decode(cut, coding)


def test_zstd_that_stops_before_its_frame_end_is_truncated_not_whole() -> None:
    # zstd's stream reader ended quietly where the data stopped: a body cut mid-frame decoded as if whole.
    # Now it is Truncated (a ValueError, as gzip's cut data is), carrying what arrived; partial=True (the
    # connection is known to have broken) gives that prefix; whole frames, several, and a skippable frame
    # decode as before.
    body = b"data: {}\n\n" * 2000
    c = zstandard.ZstdCompressor().compressobj()
    flushed = c.compress(body) + c.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK)
    whole = flushed + c.flush()
    assert decode(whole, "zstd") == body
    for cut in (flushed, whole[:-1]):  # every block but not the frame's end; its last byte missing
        with pytest.raises(ValueError, match="stops before the zstd end") as exc:
            decode(cut, "zstd")
        assert isinstance(exc.value, Truncated) and exc.value.decoded == body
        assert decode(cut, "zstd", partial=True) == body
    with pytest.raises(Truncated) as exc:
        decode(whole[: len(whole) // 2], "zstd")
    assert body.startswith(exc.value.decoded)  # (mid-block: the blocks before it, here none)
    skippable = (0x184D2A50).to_bytes(4, "little") + (3).to_bytes(4, "little") + b"xyz"
    two = zstandard.ZstdCompressor(write_content_size=False).compress(b"!")
    assert decode(whole + skippable + two, "zstd") == body + b"!"
    assert decode(b"", "zstd") == b""
    with pytest.raises(Truncated) as exc:
        decode(gzip.compress(flushed), "zstd, gzip")  # the inner coding cut, the outer one whole
    assert exc.value.decoded == body
    with pytest.raises(ValueError, match="does not decode"):
        decode(whole + b"garbage!", "zstd")
