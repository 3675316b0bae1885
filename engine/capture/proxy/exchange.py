"""One request/response pair as the proxy saw it: what the recording hook is handed."""

from __future__ import annotations

import io
import zlib
from dataclasses import dataclass, field

from engine.capture.proxy.routes import Route

# What a body may decode to before the recorder gives up on it: the recorder's own ceiling on a body
# (recording.MAX_RECORD_BYTES). A few kilobytes of gzip or zstd can claim gigabytes (a decompression
# bomb, or a client's bug); decoded whole, one such body took the proxy's memory with it.
MAX_DECODED_BYTES = 256 * 1024 * 1024


def decode(raw: bytes, encoding: str, what: str = "response", limit: int = MAX_DECODED_BYTES) -> bytes:
    """`raw` with its Content-Encoding undone (gzip, deflate, zstd; br when brotli is installed).

    The proxy forwards bodies still encoded (the far side decodes them); the recorder wants the text.
    Codings are listed in the order they were applied, so they are undone last first (RFC 9110 8.4).
    Raises ValueError, naming the body and the coding, for one it cannot undo, bytes that do not decode,
    or a body that decodes past `limit` bytes (stopped there: nothing larger is ever built).
    """
    for enc in reversed([e.strip().lower() for e in encoding.split(",") if e.strip()]):
        if enc == "identity":
            continue
        try:
            raw = _undo(raw, enc, what, limit)
        except ValueError:
            raise
        except Exception as exc:  # zlib.error, BadGzipFile, EOFError, zstd's errors: one clear kind
            raise ValueError(
                f"the {what} is {enc}-encoded but does not decode ({type(exc).__name__}: {exc})"
            ) from None
    return raw


def _undo(raw: bytes, enc: str, what: str, limit: int) -> bytes:
    if enc in ("gzip", "x-gzip"):
        return _inflate(raw, 16 + zlib.MAX_WBITS, what, limit, members=True)
    if enc == "deflate":
        try:
            return _inflate(raw, zlib.MAX_WBITS, what, limit)
        except zlib.error:
            return _inflate(raw, -zlib.MAX_WBITS, what, limit)  # raw deflate, as some servers send it
    if enc == "zstd":
        import zstandard  # a dependency of the engine (recordings are zstd-compressed)

        # A stream reader: an HTTP body's frames often omit their content size, and may be several.
        with zstandard.ZstdDecompressor().stream_reader(io.BytesIO(raw), read_across_frames=True) as r:
            return _within(r.read(limit + 1), what, limit)
    if enc == "br":
        try:
            import brotli  # type: ignore[import-not-found]
        except ImportError:
            raise ValueError(f"the {what} is brotli-compressed and brotli is not installed") from None
        # brotli's one-shot call has no output bound; checked after (brotli is optional, rarely installed).
        return _within(bytes(brotli.decompress(raw)), what, limit)
    raise ValueError(f"the {what} uses content-encoding {enc!r}, which the recorder cannot decode")


def _inflate(raw: bytes, wbits: int, what: str, limit: int, members: bool = False) -> bytes:
    """zlib/gzip data decoded to at most `limit` bytes; a gzip body may be several members back to back
    (gzip.decompress reads them all, so this does too). Truncated data raises as gzip.decompress did."""
    out = bytearray()
    data = raw
    while True:
        d = zlib.decompressobj(wbits)
        out += d.decompress(data, limit + 1 - len(out))
        _within(out, what, limit)
        if d.unconsumed_tail:  # stopped by the bound with input left: more than `limit`
            raise _too_large(what, limit)
        out += d.flush()
        _within(out, what, limit)
        if not d.eof:
            raise EOFError("compressed data ended before the end-of-stream marker was reached")
        data = d.unused_data
        if not (members and data.lstrip(b"\0")):  # trailing zero padding after the last member is allowed
            return bytes(out)


def _within(data: bytes | bytearray, what: str, limit: int) -> bytes:
    if len(data) > limit:
        raise _too_large(what, limit)
    return bytes(data) if isinstance(data, bytearray) else data


def _too_large(what: str, limit: int) -> ValueError:
    return ValueError(
        f"the {what} decodes to more than {limit / 2**20:.0f} MiB, the recorder's ceiling: it was forwarded "
        "as sent but not recorded"
    )


@dataclass
class Exchange:
    route: Route
    request: bytes  # the request body exactly as the agent sent it (still encoded if it was)
    started: float  # wall clock when the request arrived
    session_header: str | None = None
    status: int | None = None  # the upstream's status; None when it was never reached
    content_type: str = ""
    content_encoding: str = ""
    response: list[bytes] = field(default_factory=list)  # the body chunks, as passed to the agent
    error: str | None = None  # what went wrong on the proxy's side (upstream down, cut stream)
    client_gone: bool = False  # the agent disconnected before the response ended
    upstream_cut: bool = False  # the upstream ended the body early
    request_encoding: str = ""  # the request's Content-Encoding (some clients compress what they send)
    location: str = ""  # a redirect's Location, as passed to the agent

    @property
    def streamed(self) -> bool:
        return self.content_type.split(";")[0].strip().lower() == "text/event-stream"

    def request_body(self) -> bytes:
        """The request body decoded from its Content-Encoding. Raises ValueError as `decode` does."""
        return decode(self.request, self.request_encoding, "request")

    def body(self) -> bytes:
        """The response body, decoded when the upstream compressed it (the agent got the compressed
        bytes; the recording wants the text). Raises ValueError for an encoding it can't undo."""
        return decode(b"".join(self.response), self.content_encoding, "response")
