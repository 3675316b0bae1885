"""PDFs and audio counted as their providers document billing them, not as a "[document]" placeholder.

Anthropic and OpenAI both put a PDF's extracted text and an image of each page in the model's context;
OpenAI bills user audio at 1 token per 100 ms (engine/importers/media_tokens.py). The files here are
real: a PDF laid out as the PDF specification says (its page tree, Flate-compressed content streams
showing text), a WAV written by Python's own `wave` module, MPEG Layer III frame headers as the MPEG
spec lays them out. Then the real SDKs send them through the proxy: the recorded turn counts each at its
rule's tokens, in the engine's plan and simulate's as-sent column, and its trace says each count is an
estimate and on what it rests; a PDF given by URL or file id says its size is unknown (not fetched).
"""

from __future__ import annotations

import base64
import io
import json
import math
import wave
import zlib
from pathlib import Path
from typing import Any

import anthropic
import openai

from engine.importers.ingest import MEDIA_KEY
from engine.importers.media_tokens import audio_rec, mp3_seconds, pdf_facts, pdf_rec, wav_seconds
from engine.recording.journal import trace_of
from engine.sim.simulate import simulate_file
from tests.capture.conftest import Proxied, events_of, verify_ok

PAGE_TEXT = "Quarterly report: revenue grew, costs fell."  # 43 characters a page


def make_pdf(
    pages: int, size: tuple[int, int] = (612, 792), text: str = PAGE_TEXT, compress: bool = True
) -> bytes:
    """A whole PDF of `pages` pages, each showing `text` (in a Flate-compressed content stream), with
    its cross-reference table: objects 1 catalog, 2 page tree, 3 font, then a page and its content."""
    objs: list[bytes] = []
    kids = " ".join(f"{4 + 2 * i} 0 R" for i in range(pages))
    objs.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    objs.append(f"<< /Type /Pages /Kids [{kids}] /Count {pages} >>".encode())
    objs.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    for i in range(pages):
        content = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode()
        filt = b""
        if compress:
            content, filt = zlib.compress(content), b" /Filter /FlateDecode"
        objs.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 {size[0]} {size[1]}] "
            f"/Resources << /Font << /F1 3 0 R >> >> /Contents {5 + 2 * i} 0 R >>".encode()
        )
        objs.append(b"<< /Length %d%s >>\nstream\n" % (len(content), filt) + content + b"\nendstream")
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for n, body in enumerate(objs, 1):
        offsets.append(out.tell())
        out.write(f"{n} 0 obj\n".encode() + body + b"\nendobj\n")
    xref = out.tell()
    out.write(f"xref\n0 {len(objs) + 1}\n0000000000 65535 f \n".encode())
    for off in offsets:
        out.write(f"{off:010d} 00000 n \n".encode())
    out.write(f"trailer\n<< /Size {len(objs) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode())
    return out.getvalue()


def make_wav(seconds: float, rate: int = 16000) -> bytes:
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(b"\x00\x00" * int(rate * seconds))
    return buf.getvalue()


def make_mp3(seconds: float, kbps: int = 128) -> bytes:
    """MPEG-1 Layer III frames at 44.1 kHz (`kbps`: 128 is bitrate index 9), an ID3v2 tag before them."""
    index = {128: 9, 64: 5}[kbps]
    header = bytes([0xFF, 0xFB, (index << 4) | 0x00, 0x00])  # sync, MPEG-1, Layer III, no CRC; 44.1 kHz
    frame = header + b"\x00" * (144 * kbps * 1000 // 44100 - 4)
    tag = b"ID3\x03\x00\x00\x00\x00\x00\x0a" + b"\x00" * 10  # 10 bytes of tag body
    frames = int(seconds * 44100 / 1152)  # 1,152 samples a frame
    return tag + frame * frames


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def test_pdf_pages_shape_and_text() -> None:
    pages, size, chars = pdf_facts(make_pdf(3, (595, 842)))
    assert (pages, size, chars) == (3, (595.0, 842.0), 3 * len(PAGE_TEXT))
    assert pdf_facts(make_pdf(2, compress=False))[0::2] == (2, 2 * len(PAGE_TEXT))
    # Anthropic: each page an image at the 1568 px long edge (A4: 1108x1568, capped at 1,600), then the text
    rec = pdf_rec("anthropic", b64(make_pdf(3, (595, 842))))
    text = math.ceil(3 * len(PAGE_TEXT) / 4)
    assert rec.tokens == 3 * 1600 + text and rec.media_type == "application/pdf"
    assert rec.how.startswith("estimate: 3 pages of 595x842 pt, each an image (1600: 1108x1568 px")
    assert f"({3 * len(PAGE_TEXT)} characters, {text} tokens at about 4 a token)" in rec.how
    # OpenAI: high detail, 2048 then 768 on the shortest side (768x1087: 2 x 3 tiles, 85 + 6 * 170)
    assert pdf_rec("openai", b64(make_pdf(3, (595, 842)))).tokens == 3 * (85 + 6 * 170) + text
    # a wide label (3:1): 1568x523 px, under the cap; no text shown
    small = pdf_rec("anthropic", b64(make_pdf(1, (300, 100), text="")))
    assert small.tokens == math.ceil(1568 * 523 / 750) and "no text its pages show" in small.how
    unknown = pdf_rec("anthropic", None, ref="https://example.com/report.pdf")
    assert unknown.tokens == 1600 and unknown.ref == "https://example.com/report.pdf"
    assert unknown.how.startswith("estimate, size unknown (given by URL or file id, not fetched)")


def test_audio_durations() -> None:
    assert abs(wav_seconds(make_wav(2.5)) - 2.5) < 1e-6  # type: ignore[operator]
    assert abs(mp3_seconds(make_mp3(4.0)) - 4.0) < 0.05  # type: ignore[operator]
    rec = audio_rec(b64(make_wav(2.5)), "wav")
    assert rec.tokens == 25 and rec.media_type == "audio/wav"
    assert rec.how.startswith("estimate: 2.5 s of wav (from its header), OpenAI's 1 token per 100 ms")
    assert audio_rec(b64(make_mp3(4.0)), "mp3").tokens == 40
    odd = audio_rec(b64(b"OggS" + b"\x00" * 100), "ogg")
    assert odd.tokens == 0 and "duration unknown" in odd.how


def _media_parts(path: Path) -> list[dict[str, Any]]:
    return [e["part"] for e in events_of(path) if e["k"] == "part" and e["part"].get("t") == "media"]


def test_an_anthropic_pdf_through_the_proxy(proxied: Proxied) -> None:
    client = anthropic.Anthropic(base_url=proxied.url, api_key="k", max_retries=0)
    pdf = make_pdf(5)
    doc = {
        "type": "document",
        "title": "Q3",
        "source": {"type": "base64", "media_type": "application/pdf", "data": b64(pdf)},
    }
    by_url = {"type": "document", "source": {"type": "url", "url": "https://example.com/q2.pdf"}}
    msgs: list[Any] = [{"role": "user", "content": [doc, by_url, {"type": "text", "text": "Summarize."}]}]
    client.messages.create(model="claude-sonnet-4", max_tokens=64, messages=msgs)
    (path,) = proxied.finish()
    expected = 5 * 1600 + math.ceil(5 * len(PAGE_TEXT) / 4)
    assert [p["tokens"] for p in _media_parts(path)] == [expected, 1600]
    (turn,) = [trace_of(e) for e in events_of(path) if e["k"] == "turn"]
    notes = turn[MEDIA_KEY]
    assert notes[0]["how"].startswith("estimate: 5 pages of 612x792 pt") and "size unknown" in notes[1]["how"]
    assert turn["final_tokens"] > expected + 1600  # the engine's plan counts them
    as_sent = simulate_file(path).policies["as_sent"]
    assert as_sent is not None and as_sent.turns[0].to_json()["prompt_tokens"] > expected + 1600
    verify_ok(path)


def test_openai_pdf_and_audio_through_the_proxy(proxied: Proxied) -> None:
    client = openai.OpenAI(base_url=proxied.url + "/v1", api_key="k", max_retries=0)
    msgs: Any = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Read the file, then answer the question asked."},
                {
                    "type": "file",
                    "file": {
                        "filename": "q3.pdf",
                        "file_data": "data:application/pdf;base64," + b64(make_pdf(2)),
                    },
                },
                {"type": "input_audio", "input_audio": {"data": b64(make_wav(3.2)), "format": "wav"}},
            ],
        }
    ]
    client.chat.completions.create(model="gpt-4o-audio-preview", messages=msgs)
    (path,) = proxied.finish()
    pdf_tokens = 2 * (85 + 4 * 170) + math.ceil(
        2 * len(PAGE_TEXT) / 4
    )  # letter at high detail: 768x994, 2 x 2 tiles
    assert [p["tokens"] for p in _media_parts(path)] == [pdf_tokens, 32]
    blobs = {e["h"]: e["data"] for e in events_of(path) if e["k"] == "blob"}
    sent = [json.loads(blobs[h]) for e in events_of(path) if e["k"] == "actual" for h in e["add"]]
    assert sum(x["tokens"] for d in sent for x in d.get("media", ())) == pdf_tokens + 32
    verify_ok(path)
