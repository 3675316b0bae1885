"""An image in a request counted as its provider bills it, from the image's own header bytes.

An image part was kept as the text "[image]", about 3 tokens, where the provider bills hundreds or
thousands: an agent that sends screenshots had its prompts, its pressure, the plan and simulate's
figures undercounted by that much per image. Each provider documents its rule:

- Anthropic (vision docs): about width * height / 750 tokens; an image whose long edge is over 1568 px
  is first scaled down to it (aspect kept), and none costs more than about 1,600 tokens.
- OpenAI (images and vision guide, "calculating costs"): `detail: "low"` is 85 tokens whatever the size;
  otherwise (`high`, and `auto`, counted as high) the image is scaled to fit a 2048 x 2048 square, then
  down so its shortest side is 768 px, and costs 85 + 170 per 512 px tile that covers it.

The dimensions come from the header (PNG IHDR, GIF logical screen, WebP VP8/VP8L/VP8X, JPEG SOFn),
decoded from the first few kilobytes of the base64 data: nothing is decompressed. An image given by URL
or file id, or one whose header is not one of those, has no dimensions here: it is counted as the rule's
largest image (Anthropic 1,600, OpenAI high 1,105: a 2048 x 4096 image, the guide's own example), and
`how` says so. Every count here is an estimate (the providers' own tokenizers decide); `how` says which
rule and which dimensions, and the turn's trace carries it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import math
import struct

from engine.importers.model import MediaRec

ANTHROPIC_MAX_EDGE = 1568
ANTHROPIC_MAX_TOKENS = 1600
OPENAI_LOW = 85
OPENAI_TILE = 170
OPENAI_UNKNOWN = 1105  # 2048 x 4096 at high detail: 85 + 6 tiles (the guide's example)
_HEAD_CHARS = 4096  # base64 characters decoded first (3 KB: any PNG, GIF or WebP header)
_JPEG_MAX_CHARS = 512 * 1024  # a JPEG's frame header may follow large EXIF/ICC segments (64 KB each)


def dimensions(head: bytes) -> tuple[str, int, int] | None:
    """(format, width, height) from an image's first bytes, or None when they are not a header read here
    (or the JPEG's frame header is further on than `head` reaches)."""
    if head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR" and len(head) >= 24:
        w, h = struct.unpack(">II", head[16:24])
        return "png", w, h
    if head[:6] in (b"GIF87a", b"GIF89a") and len(head) >= 10:
        w, h = struct.unpack("<HH", head[6:10])
        return "gif", w, h
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP" and len(head) >= 30:
        kind = head[12:16]
        if kind == b"VP8 " and head[23:26] == b"\x9d\x01\x2a":
            w, h = struct.unpack("<HH", head[26:30])
            return "webp", w & 0x3FFF, h & 0x3FFF
        if kind == b"VP8L" and head[20] == 0x2F:
            bits = int.from_bytes(head[21:25], "little")
            return "webp", (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
        if kind == b"VP8X":
            w = int.from_bytes(head[24:27], "little") + 1
            h = int.from_bytes(head[27:30], "little") + 1
            return "webp", w, h
        return None
    if head[:2] == b"\xff\xd8":
        return _jpeg(head)
    return None


def _jpeg(data: bytes) -> tuple[str, int, int] | None:
    """A JPEG's size from its first start-of-frame segment (SOF0-SOF15 but DHT, JPG and DAC)."""
    i = 2
    while i + 4 <= len(data):
        if data[i] != 0xFF:
            return None
        marker = data[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:  # no length
            i += 2
            continue
        (length,) = struct.unpack(">H", data[i + 2 : i + 4])
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            if i + 9 > len(data):
                return None
            h, w = struct.unpack(">HH", data[i + 5 : i + 9])
            return "jpeg", w, h
        i += 2 + length
    return None


def _b64_prefix(data: str, chars: int) -> bytes:
    """The bytes of the first `chars` base64 characters of `data` (whitespace dropped), or b""."""
    piece = "".join(data[: chars + chars // 64 + 4].split())[:chars]
    piece = piece[: len(piece) // 4 * 4]
    try:
        return base64.b64decode(piece, validate=False)
    except (binascii.Error, ValueError):
        return b""


def sniff(data: str) -> tuple[str, int, int] | None:
    """The dimensions of base64 image data, decoding only as much as its header needs."""
    head = _b64_prefix(data, _HEAD_CHARS)
    found = dimensions(head)
    if found is None and head[:2] == b"\xff\xd8" and len(data) > _HEAD_CHARS:
        found = dimensions(_b64_prefix(data, _JPEG_MAX_CHARS))
    return found


def anthropic_tokens(w: int, h: int) -> int:
    long = max(w, h)
    if long > ANTHROPIC_MAX_EDGE:
        scale = ANTHROPIC_MAX_EDGE / long
        w, h = max(1, int(w * scale)), max(1, int(h * scale))
    return min(ANTHROPIC_MAX_TOKENS, max(1, math.ceil(w * h / 750)))


def openai_tokens(w: int, h: int, detail: str = "auto") -> int:
    if detail == "low":
        return OPENAI_LOW
    if max(w, h) > 2048:
        scale = 2048 / max(w, h)
        w, h = int(w * scale), int(h * scale)
    if min(w, h) > 768:
        scale = 768 / min(w, h)
        w, h = int(w * scale), int(h * scale)
    tiles = math.ceil(max(1, w) / 512) * math.ceil(max(1, h) / 512)
    return OPENAI_LOW + OPENAI_TILE * tiles


def _ref(data: str) -> str:
    """What the engine tracks the image by: a hash of its first 64 KB and last 4 KB of base64 and its
    length (a request carries every screenshot of the history again, each parsed again: hashing them
    whole cost a pass over megabytes a call; two images alike there and as long are not told apart)."""
    sample = f"{len(data)}:{data[:65536]}:{data[-4096:]}"
    return "sha256:" + hashlib.sha256(sample.encode()).hexdigest()[:16]


def image_rec(provider: str, data: str | None, media_type: str, url: str = "", detail: str = "auto") -> MediaRec:
    """An image part as the engine counts it: `data` its base64 bytes (None when given by URL or file id:
    `url` names it), counted by `provider`'s rule ("anthropic" or "openai")."""
    found = sniff(data) if data else None
    low = provider == "openai" and detail == "low"
    if found is None:
        where = "given by URL or file id" if not data else "a header this reader does not know"
        if low:
            tokens, how = OPENAI_LOW, "openai detail low: 85 tokens whatever its size"
        elif provider == "anthropic":
            tokens, how = ANTHROPIC_MAX_TOKENS, f"estimate, size unknown ({where}): Anthropic's largest image"
        else:
            tokens, how = OPENAI_UNKNOWN, f"estimate, size unknown ({where}): a 2048x4096 image at high detail"
        size = len(data) * 3 // 4 if data else 0
        return MediaRec(media_type or "image", _ref(data) if data else url[:200], size, tokens, how)
    fmt, w, h = found
    if provider == "anthropic":
        tokens = anthropic_tokens(w, h)
        how = f"estimate: {w}x{h} {fmt} (from its header), Anthropic's width*height/750"
    else:
        tokens = openai_tokens(w, h, detail)
        rule = "detail low, 85" if low else "85 + 170 per 512px tile"
        how = f"estimate: {w}x{h} {fmt} (from its header), OpenAI's {rule}"
    return MediaRec(media_type or f"image/{fmt}", _ref(data or ""), len(data or "") * 3 // 4, tokens, how)


def data_url(url: str) -> tuple[str, str | None]:
    """(media type, base64 data) of a `data:` URL; ("", None) for any other URL."""
    if not url.startswith("data:") or "," not in url:
        return "", None
    head, data = url[5:].split(",", 1)
    if not head.endswith(";base64"):
        return "", None
    return head[: -len(";base64")], data
