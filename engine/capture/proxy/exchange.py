"""One request/response pair as the proxy saw it: what the recording hook is handed."""

from __future__ import annotations

import gzip
import zlib
from dataclasses import dataclass, field

from engine.capture.proxy.routes import Route


@dataclass
class Exchange:
    route: Route
    request: bytes  # the request body exactly as the agent sent it
    started: float  # wall clock when the request arrived
    session_header: str | None = None
    status: int | None = None  # the upstream's status; None when it was never reached
    content_type: str = ""
    content_encoding: str = ""
    response: list[bytes] = field(default_factory=list)  # the body chunks, as passed to the agent
    error: str | None = None  # what went wrong on the proxy's side (upstream down, cut stream)
    client_gone: bool = False  # the agent disconnected before the response ended
    upstream_cut: bool = False  # the upstream ended the body early

    @property
    def streamed(self) -> bool:
        return self.content_type.split(";")[0].strip().lower() == "text/event-stream"

    def body(self) -> bytes:
        """The response body, decoded from gzip/deflate when the upstream compressed it (the agent got the
        compressed bytes; the recording wants the text). Raises ValueError for an encoding it can't undo."""
        raw = b"".join(self.response)
        enc = self.content_encoding.strip().lower()
        if enc in ("", "identity"):
            return raw
        if enc == "gzip":
            return gzip.decompress(raw)
        if enc == "deflate":
            try:
                return zlib.decompress(raw)
            except zlib.error:
                return zlib.decompress(raw, -zlib.MAX_WBITS)  # raw deflate, as some servers send it
        if enc == "br":
            try:
                import brotli  # type: ignore[import-not-found]
            except ImportError:
                raise ValueError("the response is brotli-compressed and brotli is not installed") from None
            return bytes(brotli.decompress(raw))
        raise ValueError(f"the response uses content-encoding {enc!r}, which the recorder cannot decode")
