"""Images counted as each provider bills them, from their header bytes, not as an "[image]" placeholder.

The rules are the providers' documented ones (engine/importers/image_tokens.py), checked here against
the documentation's own examples; the dimensions come from real image files' headers (PNG and GIF made
whole here; JPEG and WebP headers laid out as their specifications say, with a JPEG's frame header
behind a large EXIF segment, as cameras write it). Then the real anthropic and openai SDKs send
screenshots through the proxy: the recorded turn counts each image at its rule's tokens, in the
engine's plan and in simulate's as-sent column, and its trace says each count is an estimate and why.
"""

from __future__ import annotations

import base64
import json
import struct
import zlib
from pathlib import Path
from typing import Any

import anthropic
import openai

from engine.importers.image_tokens import anthropic_tokens, dimensions, image_rec, openai_tokens, sniff
from engine.importers.ingest import MEDIA_KEY
from engine.recording.journal import trace_of
from engine.sim.simulate import simulate_file
from tests.capture.conftest import Proxied, events_of, verify_ok


def png(w: int, h: int) -> bytes:
    """A whole, valid PNG (grey, 8-bit) of w x h pixels."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + b"\x80" * w for _ in range(h))
    ihdr = struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def gif(w: int, h: int) -> bytes:
    """A valid GIF89a: a w x h screen with a 1x1 image in it (a two-colour table, one LZW-coded pixel)."""
    return (
        b"GIF89a" + struct.pack("<HHBBB", w, h, 0x80, 0, 0) + b"\x00\x00\x00\xff\xff\xff"
        + b"\x2c" + struct.pack("<HHHHB", 0, 0, 1, 1, 0) + b"\x02\x02\x44\x01\x00" + b"\x3b"
    )


def jpeg_header(w: int, h: int, exif: int = 40_000) -> bytes:
    """JPEG markers as T.81 lays them out: SOI, APP0 JFIF, an APP1 of `exif` bytes, DQT, SOF0 (the
    size), then SOS: the size sits past the first few kilobytes, as in a camera's file."""

    def seg(marker: int, body: bytes) -> bytes:
        return bytes([0xFF, marker]) + struct.pack(">H", len(body) + 2) + body

    app1 = b"Exif\x00\x00" + b"\x00" * exif
    sof = struct.pack(">BHHB", 8, h, w, 3) + b"\x01\x22\x00\x02\x11\x01\x03\x11\x01"
    return (b"\xff\xd8" + seg(0xE0, b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00") + seg(0xE1, app1)
            + seg(0xDB, b"\x00" + bytes(64)) + seg(0xC0, sof) + seg(0xDA, b"\x01\x01\x00\x00\x3f\x00") + b"\x00" * 64)


def webp_vp8l(w: int, h: int) -> bytes:
    bits = (w - 1) | ((h - 1) << 14)
    body = b"\x2f" + bits.to_bytes(4, "little") + b"\x00" * 8
    return b"RIFF" + struct.pack("<I", 4 + 8 + len(body)) + b"WEBP" + b"VP8L" + struct.pack("<I", len(body)) + body


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_dimensions_from_headers() -> None:
    assert dimensions(png(1280, 800)) == ("png", 1280, 800)
    assert dimensions(gif(640, 480)) == ("gif", 640, 480)
    assert dimensions(webp_vp8l(1920, 1080)) == ("webp", 1920, 1080)
    big = jpeg_header(3024, 4032)
    assert dimensions(big[:4096]) is None  # the frame header is further in than the first 4 KB
    assert sniff(b64(big)) == ("jpeg", 3024, 4032)  # found by decoding more of it, not the whole
    assert sniff(b64(b"not an image at all")) is None


def test_the_documented_rules() -> None:
    # OpenAI's guide: 1024x1024 high = 765; 2048x4096 high = 1105; 4096x8192 low = 85
    assert openai_tokens(1024, 1024, "high") == 765
    assert openai_tokens(2048, 4096, "high") == 1105
    assert openai_tokens(4096, 8192, "low") == 85
    # Anthropic's table: 1000x1000 ~1334, 1092x1092 ~1590; a long edge past 1568 px scaled down first
    assert anthropic_tokens(1000, 1000) == 1334
    assert anthropic_tokens(1092, 1092) == 1590
    assert anthropic_tokens(200, 200) == 54
    assert anthropic_tokens(4000, 3000) <= 1600
    url = image_rec("anthropic", None, "", url="https://example.com/x.png")
    assert url.tokens == 1600 and "size unknown (given by URL or file id)" in url.how


SHOT = png(1280, 800)  # a screenshot: Anthropic ceil(1280*800/750) = 1366
SHOT_ANTHROPIC = 1366


def _media_parts(path: Path) -> list[dict[str, Any]]:
    return [e["part"] for e in events_of(path) if e["k"] == "part" and e["part"].get("t") == "media"]


def _traces(path: Path) -> dict[int, dict[str, Any]]:
    return {e["turn"]: trace_of(e) for e in events_of(path) if e["k"] == "turn"}


def test_an_anthropic_screenshot_through_the_proxy(proxied: Proxied) -> None:
    client = anthropic.Anthropic(base_url=proxied.url, api_key="k", max_retries=0)
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": b64(SHOT)}}
    msgs: list[Any] = [{"role": "user", "content": [{"type": "text", "text": "What is on screen?"}, image]}]
    r = client.messages.create(model="claude-sonnet-4", max_tokens=64, messages=msgs)
    (use,) = [b for b in r.content if b.type == "tool_use"]
    # a computer-use style tool answers with a screenshot inside its result
    msgs += [
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in r.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id,
                                      "content": [{"type": "text", "text": "took it"}, image]}]},
    ]
    client.messages.create(model="claude-sonnet-4", max_tokens=64, messages=msgs)
    (path,) = proxied.finish()
    parts = _media_parts(path)
    assert [p["tokens"] for p in parts] == [SHOT_ANTHROPIC, SHOT_ANTHROPIC]
    assert parts[0]["media_type"] == "image/png" and parts[0]["size"] == len(SHOT)
    traces = _traces(path)
    for t in (0, 1):
        (note,) = traces[t][MEDIA_KEY]
        assert note["tokens"] == SHOT_ANTHROPIC and note["how"].startswith("estimate: 1280x800 png (from its header)")
    # the engine's plan counts the image: the first request is over 1,366 tokens (its text is a dozen)
    assert traces[0]["final_tokens"] > SHOT_ANTHROPIC
    # the as-sent request keeps each image's count (simulate's as_sent column adds it)
    blobs = {e["h"]: e["data"] for e in events_of(path) if e["k"] == "blob"}
    sent = [json.loads(blobs[h]) for e in events_of(path) if e["k"] == "actual" for h in e["add"]]
    assert sum(x["tokens"] for d in sent for x in d.get("media", ())) == 2 * SHOT_ANTHROPIC
    verify_ok(path)
    # simulate's as-sent column prices them: the second request re-sends the first image and adds the other
    as_sent = simulate_file(path).policies["as_sent"]
    assert as_sent is not None
    first, second = (t.to_json()["prompt_tokens"] for t in as_sent.turns)
    assert first > SHOT_ANTHROPIC and second - first > SHOT_ANTHROPIC


def test_openai_images_by_detail_through_the_proxy(proxied: Proxied) -> None:
    client = openai.OpenAI(base_url=proxied.url + "/v1", api_key="k", max_retries=0)
    url = "data:image/png;base64," + b64(png(1024, 1024))  # high: 765 (the guide's example)
    msgs: list[Any] = [{"role": "user", "content": [
        {"type": "text", "text": "Compare."},
        {"type": "image_url", "image_url": {"url": url, "detail": "high"}},
        {"type": "image_url", "image_url": {"url": url, "detail": "low"}},
        {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
    ]}]
    client.chat.completions.create(model="gpt-4o", messages=msgs)
    (path,) = proxied.finish()
    assert [p["tokens"] for p in _media_parts(path)] == [765, 85, 1105]
    notes = _traces(path)[0][MEDIA_KEY]
    assert "OpenAI's 85 + 170 per 512px tile" in notes[0]["how"] and "detail low" in notes[1]["how"]
    assert notes[2]["how"].startswith("estimate, size unknown (given by URL or file id)")
    verify_ok(path)
