"""PDFs and audio in a request counted as their providers bill them, where the rule is documented.

A PDF or an audio clip was kept as a "[document]" / "[file]" / "[input_audio]" placeholder of a few
tokens, where the provider bills thousands: the plan, the pressure and simulate's figures left them out.
What the providers document, and what is counted here:

- PDFs, Anthropic (PDF support: "the system converts each page of the document into an image; the text
  from each page is extracted and provided alongside each page's image", billed as text plus images by
  the vision rule) and OpenAI (file inputs: "both the extracted text and an image of each page" go into
  the model's context): each page's text, plus each page as an image by the provider's image rule
  (engine.importers.image_tokens) at the page's shape (its MediaBox) rendered to the rule's largest
  size: Anthropic's 1568 px long edge (at most 1,600 tokens), OpenAI's high detail (neither documents
  the resolution pages are rendered at: the largest size is said as the estimate it is). The pages are
  counted from the file's page objects (in compressed object streams too) and the text from the strings
  its pages' content streams show (literal strings a character each, hex strings two bytes a glyph), at
  about 4 characters a token (the usual English figure: the providers' tokenizers decide).
- Audio, OpenAI (input_audio; the Realtime cost guide: "audio tokens in user messages are 1 token per
  100 ms of audio"): the clip's duration from its header (WAV: the byte rate and the data's size; MP3:
  its first frame's bitrate over the frames' bytes, a constant bitrate assumed), 10 tokens a second.
  Chat's audio models document no rate of their own: the same rate is said as the estimate it is.

A PDF given by URL or file id, or audio whose duration cannot be read, has no size here (nothing is
fetched: there is no network at run time): it is counted as the rule's smallest case and `how` says
the size is unknown. Every count is an estimate; `how` says on what it rests, and the turn's trace
carries it (engine.importers.ingest.MEDIA_KEY).
"""

from __future__ import annotations

import base64
import binascii
import math
import re
import zlib
from collections import OrderedDict

from engine.importers.image_tokens import _ref, anthropic_tokens, openai_tokens
from engine.importers.model import MediaRec

CHARS_PER_TOKEN = 4  # the usual English figure for the extracted text's estimate
AUDIO_TOKENS_PER_S = 10  # OpenAI: user audio is 1 token per 100 ms
ANTHROPIC_PAGE_EDGE = 1568  # the vision rule's longest edge before it scales an image down
OPENAI_PAGE_EDGE = 2048  # high detail's square before the 768 px shortest-side step
_LETTER = (612.0, 792.0)  # a page without a readable MediaBox: US Letter, in points
_MAX_INFLATED = 64 * 2**20  # decompressed stream bytes read of one PDF (a bound on a hostile file)
_CACHE = 64  # PDFs remembered by reference: a request carries each again every call

_PAGE = re.compile(rb"/Type\s*/Page(?![a-zA-Z])")
_COUNT = re.compile(rb"/Type\s*/Pages\b[^>]*?/Count\s+(\d+)|/Count\s+(\d+)[^>]*?/Type\s*/Pages\b", re.S)
_MEDIABOX = re.compile(rb"/MediaBox\s*\[\s*(-?[\d.]+)\s+(-?[\d.]+)\s+(-?[\d.]+)\s+(-?[\d.]+)\s*\]")
_STREAM = re.compile(rb"stream\r?\n(.*?)\r?\nendstream", re.S)
_LITERAL = re.compile(rb"\((?:\\.|[^\\)])*\)", re.S)
_HEX = re.compile(rb"<([0-9A-Fa-f\s]+)>")
_SHOWN = re.compile(rb"BT(.*?)ET", re.S)

_pdfs: OrderedDict[str, tuple[int, tuple[float, float], int]] = OrderedDict()


def _b64(data: str) -> bytes:
    try:
        return base64.b64decode("".join(data.split()), validate=False)
    except (binascii.Error, ValueError):
        return b""


def _inflated(raw: bytes) -> list[bytes]:
    """Every stream of the file decompressed (Flate; those that are not are kept as they are)."""
    out: list[bytes] = []
    total = 0
    for m in _STREAM.finditer(raw):
        body = m.group(1)
        try:
            body = zlib.decompressobj().decompress(body, _MAX_INFLATED - total)
        except zlib.error:
            pass
        total += len(body)
        out.append(body)
        if total >= _MAX_INFLATED:
            break
    return out


def pdf_facts(raw: bytes) -> tuple[int, tuple[float, float], int]:
    """(pages, the first page's (width, height) in points, characters of text its pages show)."""
    streams = _inflated(raw)
    pages = len(_PAGE.findall(raw)) + sum(len(_PAGE.findall(s)) for s in streams)
    for text in (raw, *streams):  # the page tree's own count, when the page objects were not all seen
        for m in _COUNT.finditer(text):
            pages = max(pages, int(m.group(1) or m.group(2)))
    box = _MEDIABOX.search(raw) or next((b for s in streams if (b := _MEDIABOX.search(s))), None)
    size = _LETTER
    if box is not None:
        x0, y0, x1, y1 = (float(v) for v in box.groups())
        if abs(x1 - x0) > 1 and abs(y1 - y0) > 1:
            size = (abs(x1 - x0), abs(y1 - y0))
    chars = 0
    for s in streams:
        for shown in _SHOWN.finditer(s):
            block = shown.group(1)
            chars += sum(len(t) - 2 for t in _LITERAL.findall(block))
            chars += sum(len(re.sub(rb"\s", b"", h)) // 4 for h in _HEX.findall(block))
    return pages, size, chars


def _page_image(provider: str, size: tuple[float, float]) -> tuple[int, str]:
    """A page as the provider's image rule counts it, rendered to the rule's largest size."""
    w, h = size
    edge = ANTHROPIC_PAGE_EDGE if provider == "anthropic" else OPENAI_PAGE_EDGE
    scale = edge / max(w, h)
    px, py = max(1, round(w * scale)), max(1, round(h * scale))
    if provider == "anthropic":
        return anthropic_tokens(px, py), f"{px}x{py} px, Anthropic's width*height/750 (at most 1,600)"
    return openai_tokens(px, py, "high"), f"{px}x{py} px, OpenAI's high detail"


def pdf_rec(provider: str, data: str | None, media_type: str = "application/pdf", ref: str = "") -> MediaRec:
    """A PDF part as the engine counts it: `data` its base64 bytes (None when given by URL or file id:
    `ref` names it), by `provider`'s rule ("anthropic" or "openai")."""
    if not data:
        image, rendered = _page_image(provider, _LETTER)
        how = (
            f"estimate, size unknown (given by URL or file id, not fetched): one page's image ({image}: "
            f"{rendered}), its text not known"
        )
        return MediaRec(media_type or "application/pdf", ref[:200], 0, image, how)
    key = _ref(data)
    if not _b64(data[:8]).startswith(b"%PDF"):
        image, rendered = _page_image(provider, _LETTER)
        how = f"estimate, not a PDF ({media_type or 'a type not said'}): counted as one page's image ({image}: {rendered})"
        return MediaRec(media_type or "application/octet-stream", key, len(data) * 3 // 4, image, how)
    facts = _pdfs.get(key)
    if facts is None:
        facts = pdf_facts(_b64(data))
        _pdfs[key] = facts
        while len(_pdfs) > _CACHE:
            _pdfs.popitem(last=False)
    else:
        _pdfs.move_to_end(key)
    pages, size, chars = facts
    pages = max(1, pages)
    image, rendered = _page_image(provider, size)
    text = math.ceil(chars / CHARS_PER_TOKEN)
    tokens = pages * image + text
    said = "text" if chars else "no text its pages show (a scan, or text this reader cannot read)"
    how = (
        f"estimate: {pages} page{'s' if pages != 1 else ''} of {size[0]:.0f}x{size[1]:.0f} pt, each an image "
        f"({image}: {rendered}, at the largest size: the render size is not documented) plus its {said}"
        + (f" ({chars:,} characters, {text:,} tokens at about {CHARS_PER_TOKEN} a token)" if chars else "")
    )
    return MediaRec(media_type or "application/pdf", key, len(data) * 3 // 4, tokens, how)


# ------------------------------------------------------------------------------------ audio

_MP3_KBPS = {  # MPEG-1 Layer III; MPEG-2/2.5 Layer III (kbit/s by the header's bitrate index)
    3: (0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320),
    2: (0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160),
}


def wav_seconds(raw: bytes, total: int | None = None) -> float | None:
    """A WAV clip's duration: its data chunk's size over the fmt chunk's byte rate (`raw` its first
    bytes, `total` its size: the data chunk's own size is bounded by what the file holds)."""
    total = len(raw) if total is None else total
    if raw[:4] != b"RIFF" or raw[8:12] != b"WAVE":
        return None
    i, rate, size = 12, 0, None
    while i + 8 <= len(raw):
        kind, n = raw[i : i + 4], int.from_bytes(raw[i + 4 : i + 8], "little")
        if kind == b"fmt " and i + 20 <= len(raw):
            rate = int.from_bytes(raw[i + 16 : i + 20], "little")
        elif kind == b"data":
            size = min(n, total - i - 8)
            break
        i += 8 + n + (n & 1)
    return size / rate if rate and size is not None else None


def mp3_seconds(raw: bytes, total: int | None = None) -> float | None:
    """An MP3 clip's duration at its first frame's bitrate, a constant bitrate assumed (`raw` its first
    bytes, `total` its size)."""
    total = len(raw) if total is None else total
    i = 0
    if raw[:3] == b"ID3" and len(raw) >= 10:  # an ID3v2 tag first: its size is 4 syncsafe bytes
        i = 10 + ((raw[6] & 0x7F) << 21 | (raw[7] & 0x7F) << 14 | (raw[8] & 0x7F) << 7 | (raw[9] & 0x7F))
    while i + 4 <= len(raw):
        if raw[i] == 0xFF and raw[i + 1] & 0xE0 == 0xE0 and (raw[i + 1] >> 1) & 3 == 1:  # Layer III sync
            version = (raw[i + 1] >> 3) & 3  # 3: MPEG-1, 2: MPEG-2, 0: MPEG-2.5
            index = raw[i + 2] >> 4
            if 0 < index < 15 and version != 1:
                kbps = _MP3_KBPS[3 if version == 3 else 2][index]
                return max(0, total - i) * 8 / (kbps * 1000)
        i += 1
    return None


def audio_rec(data: str | None, fmt: str) -> MediaRec:
    """An OpenAI input_audio part (`data` its base64 bytes, `fmt` "wav" or "mp3") counted at OpenAI's
    documented 1 token per 100 ms of user audio."""
    media_type = f"audio/{fmt or 'unknown'}"
    if not data:
        return MediaRec(media_type, "", 0, 0, "estimate, duration unknown (no audio data): not counted")
    head = data[: 64 * 1024]  # (the header: a WAV's chunks before its data, an MP3's ID3 tag)
    raw = _b64(head[: len(head) // 4 * 4])
    size = len(data) * 3 // 4 - (2 if data.endswith("==") else 1 if data.endswith("=") else 0)
    seconds = wav_seconds(raw, size) if fmt == "wav" else mp3_seconds(raw, size) if fmt == "mp3" else None
    if seconds is None:
        how = (
            f"estimate, duration unknown (a {fmt or 'format'} header this reader does not read): not counted"
        )
        return MediaRec(media_type, _ref(data), size, 0, how)
    tokens = math.ceil(seconds * AUDIO_TOKENS_PER_S)
    how = (
        f"estimate: {seconds:.1f} s of {fmt} (from its header), OpenAI's 1 token per 100 ms of user audio "
        "(the Realtime cost guide's rate)"
    )
    return MediaRec(media_type, _ref(data), size, tokens, how)
