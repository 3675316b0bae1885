"""One request/response pair as the proxy saw it: what the recording hook is handed."""

from __future__ import annotations

import gzip
import io
import zlib
from dataclasses import dataclass, field

from engine.capture.proxy.routes import Route


def decode(raw: bytes, encoding: str, what: str = "response") -> bytes:
    """`raw` with its Content-Encoding undone (gzip, deflate, zstd; br when brotli is installed).

    The proxy forwards bodies still encoded (the far side decodes them); the recorder wants the text.
    Codings are listed in the order they were applied, so they are undone last first (RFC 9110 8.4).
    Raises ValueError, naming the body and the coding, for one it cannot undo or bytes that do not decode.
    """
    for enc in reversed([e.strip().lower() for e in encoding.split(",") if e.strip()]):
        if enc == "identity":
            continue
        try:
            raw = _undo(raw, enc, what)
        except ValueError:
            raise
        except Exception as exc:  # zlib.error, BadGzipFile, EOFError, zstd's errors: one clear kind
            raise ValueError(
                f"the {what} is {enc}-encoded but does not decode ({type(exc).__name__}: {exc})"
            ) from None
    return raw


def _undo(raw: bytes, enc: str, what: str) -> bytes:
    if enc in ("gzip", "x-gzip"):
        return gzip.decompress(raw)
    if enc == "deflate":
        try:
            return zlib.decompress(raw)
        except zlib.error:
            return zlib.decompress(raw, -zlib.MAX_WBITS)  # raw deflate, as some servers send it
    if enc == "zstd":
        import zstandard  # a dependency of the engine (recordings are zstd-compressed)

        # A stream reader: an HTTP body's frames often omit their content size, and may be several.
        with zstandard.ZstdDecompressor().stream_reader(io.BytesIO(raw), read_across_frames=True) as r:
            return r.read()
    if enc == "br":
        try:
            import brotli  # type: ignore[import-not-found]
        except ImportError:
            raise ValueError(f"the {what} is brotli-compressed and brotli is not installed") from None
        return bytes(brotli.decompress(raw))
    raise ValueError(f"the {what} uses content-encoding {enc!r}, which the recorder cannot decode")


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
