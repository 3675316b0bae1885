"""The proxy's recorder decodes a compressed body (gzip, deflate, zstd) to at most its ceiling and never
builds more: a few hundred kilobytes of gzip can claim gigabytes (a decompression bomb, or a client's bug),
and the recorder decoded every body whole, so one such request or response took the proxy's memory with
it. Past the ceiling the body is refused for recording with a clear reason (it is forwarded as sent)."""

from __future__ import annotations

import gzip
import tracemalloc
import zlib

import pytest
import zstandard

from engine.capture.proxy.exchange import MAX_DECODED_BYTES, decode
from engine.capture.proxy.recording import MAX_RECORD_BYTES

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
        with pytest.raises(ValueError, match="decodes to more than 4 MiB.*forwarded as sent but not recorded"):
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
