"""What the recorder is handed: compressed bodies decoded on the side, routes and session keys."""

from __future__ import annotations

import gzip
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.capture.proxy.exchange import Exchange
from engine.capture.proxy.routes import DEFAULT_UPSTREAMS, match, parse_upstreams, session_key

ROUTE = match("/v1/messages", "", {}, DEFAULT_UPSTREAMS)


@given(st.binary(max_size=4000), st.integers(min_value=1, max_value=50))
def test_compressed_bodies_decode_whatever_the_chunking(body: bytes, step: int) -> None:
    for enc, packed in (("gzip", gzip.compress(body)), ("deflate", zlib.compress(body)), ("", body)):
        ex = Exchange(ROUTE, b"{}", 0.0, content_encoding=enc)
        ex.response = [packed[i : i + step] for i in range(0, len(packed), step)]
        assert ex.body() == body


def test_unknown_encoding_is_a_clear_error() -> None:
    ex = Exchange(ROUTE, b"{}", 0.0, content_encoding="zstd-xyz", response=[b"??"])
    with pytest.raises(ValueError, match="cannot decode"):
        ex.body()


def test_routes() -> None:
    ups = parse_upstreams(["http://stand-in:1", "deepseek=https://ds.example"])
    assert (
        ups["anthropic"] == ups["openai"] == "http://stand-in:1" and ups["deepseek"] == "https://ds.example"
    )
    r = match("/deepseek/chat/completions", "", {}, ups)
    assert (r.provider, r.wire, r.upstream_path) == ("deepseek", "openai-chat", "/chat/completions")
    r = match("/v1/messages", "beta=true", {}, ups)
    assert (r.provider, r.wire, r.upstream_path) == ("anthropic", "anthropic", "/v1/messages?beta=true")
    r = match("/v1/models", "", {"anthropic-version": "2023-06-01"}, ups)
    assert (r.provider, r.wire) == ("anthropic", None)
    assert match("/v1/responses", "", {}, ups).wire == "openai-responses"
    with pytest.raises(ValueError, match="NAME=URL"):
        parse_upstreams(["ftp://x"])


def test_session_key_ignores_moving_cache_markers_and_growth() -> None:
    sys_blocks = [{"type": "text", "text": "S", "cache_control": {"type": "ephemeral"}}]
    one = {"system": sys_blocks, "messages": [{"role": "user", "content": "task"}]}
    two = {
        "system": [{"type": "text", "text": "S"}],
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": "task", "cache_control": {"type": "ephemeral"}}],
            },
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": "more"},
        ],
    }
    assert session_key("anthropic", one, None) == session_key("anthropic", two, None)
    other = {"system": "S", "messages": [{"role": "user", "content": "another task"}]}
    assert session_key("anthropic", one, None) != session_key("anthropic", other, None)
    assert session_key("anthropic", one, "mine") == "h:mine"
    r1 = {"instructions": "S", "input": "hi"}
    r2 = {
        "instructions": "S",
        "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "hi"}]},
            {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
        ],
    }
    assert session_key("openai-responses", r1, None) == session_key("openai-responses", r2, None)


@pytest.mark.parametrize("coding", ["gzip", "zstd", "br"])
def test_a_compressed_stream_cut_at_any_byte_decodes_to_what_arrived(coding: str) -> None:
    # The stand-in cuts its streams between events (whole flushed blocks); a real connection breaks
    # anywhere, mid-block too. At every cut, a body known to be cut decodes to a prefix of the stream
    # (never an error), and one that ended cleanly without its coding's end is Truncated with that prefix.
    from engine.capture.proxy.exchange import Truncated, decode
    from tests.capture.brotli_stream import libbrotlienc
    from tests.capture.standin import _compressed

    if coding == "br" and libbrotlienc() is None:
        pytest.skip("the system's libbrotlienc is not installed (the stand-in compresses brotli with it)")
    events = [f'data: {{"n": {i}, "text": "{"word " * i}"}}\n\n'.encode() for i in range(30)]
    whole = b"".join(events)
    packed = b"".join(_compressed(events, coding))
    assert decode(packed, coding) == whole
    for cut in range(1, len(packed)):
        got = decode(packed[:cut], coding, partial=True)
        assert whole.startswith(got), (coding, cut)
        with pytest.raises(Truncated) as exc:
            decode(packed[:cut], coding)
        assert exc.value.decoded == got, (coding, cut)
