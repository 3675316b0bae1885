"""One request/response pair as the proxy saw it: what the recording hook is handed."""

from __future__ import annotations

import zlib
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from engine.capture.proxy.routes import Route
from engine.errors import ContextPipeError

# What a body may decode to before the recorder gives up on it: the recorder's own ceiling on a body
# (recording.MAX_RECORD_BYTES). A few kilobytes of gzip or zstd can claim gigabytes (a decompression
# bomb, or a client's bug); decoded whole, one such body took the proxy's memory with it.
MAX_DECODED_BYTES = 256 * 1024 * 1024


class Truncated(ContextPipeError, ValueError):
    """A body whose coding stops before its end (the HTTP body ended all the same, so nothing else says it
    was cut): `decoded` is what its bytes decode to up to there."""

    def __init__(self, message: str, decoded: bytes) -> None:
        super().__init__(message)
        self.decoded = decoded


def decode(
    raw: bytes, encoding: str, what: str = "response", limit: int = MAX_DECODED_BYTES, partial: bool = False
) -> bytes:
    """`raw` with its Content-Encoding undone (gzip, deflate, zstd; br when brotli is installed).

    The proxy forwards bodies still encoded (the far side decodes them); the recorder wants the text.
    Codings are listed in the order they were applied, so they are undone last first (RFC 9110 8.4).
    Raises ValueError, naming the body and the coding, for one it cannot undo, bytes that do not decode,
    or a body that decodes past `limit` bytes (stopped there: nothing larger is ever built); Truncated
    (a ValueError) for data that stops before its coding's end, with what it decodes to up to there.
    `partial`: the body was cut off (the upstream or the agent went away mid-response): what its bytes
    decode to up to the cut, not an error for the missing end, so a compressed stream that broke off
    is recorded with the events that arrived, as an uncompressed one is.
    """
    cut_in: str | None = None  # the coding whose data stopped early
    for enc in reversed([e.strip().lower() for e in encoding.split(",") if e.strip()]):
        if enc == "identity":
            continue
        try:
            try:
                raw = _undo(raw, enc, what, limit, partial or cut_in is not None)
            except EOFError:
                # Decoded again, up to where the data stops: the caller decides what a cut body is worth
                # (the recorder keeps the events that arrived), as it does for one it knows was cut.
                raw = _undo(raw, enc, what, limit, True)
                cut_in = cut_in or enc
        except ValueError:
            raise
        except Exception as exc:  # zlib.error, BadGzipFile, zstd's errors: one clear kind
            raise ValueError(
                f"the {what} is {enc}-encoded but does not decode ({type(exc).__name__}: {exc})"
            ) from None
    if cut_in is not None:
        raise Truncated(
            f"the {what} is {cut_in}-encoded but does not decode (its data stops before the {cut_in} end: "
            "the body was cut short)",
            raw,
        )
    return raw


def _undo(raw: bytes, enc: str, what: str, limit: int, partial: bool = False) -> bytes:
    if enc in ("gzip", "x-gzip"):
        return _inflate(raw, 16 + zlib.MAX_WBITS, what, limit, members=True, partial=partial)
    if enc == "deflate":
        try:
            return _inflate(raw, zlib.MAX_WBITS, what, limit, partial=partial)
        except zlib.error:  # raw deflate, as some servers send it
            return _inflate(raw, -zlib.MAX_WBITS, what, limit, partial=partial)
    if enc == "zstd":
        return _unzstd(raw, what, limit, partial)
    if enc == "br":
        return _unbrotli(raw, what, limit, partial)
    raise ValueError(f"the {what} uses content-encoding {enc!r}, which the recorder cannot decode")


# A zstd block decodes to at most 128 KiB and takes at least its 3-byte header (RFC 8878 3.1.1.2,
# Block_Maximum_Size): the most output one more input byte can bring.
_ZSTD_MOST_PER_BYTE = (128 * 1024) // 3 + 1


def _unzstd(raw: bytes, what: str, limit: int, partial: bool = False) -> bytes:
    """zstd data decoded to at most about `limit` bytes, frame after frame (an HTTP body's frames often
    omit their content size, and may be several). The decompressor object, not the stream reader: the
    reader ends quietly where the data stops, so a body cut mid-frame read as whole; the object says
    whether the frame's end came (`eof`). It takes no output limit, so it is fed so little input at a time
    that the output cannot pass the room left by more than 22 blocks (64 bytes' worth, under 3 MiB)."""
    import zstandard  # a dependency of the engine (recordings are zstd-compressed)

    dctx = zstandard.ZstdDecompressor()
    out = bytearray()
    pos = 0
    while pos < len(raw):
        d = dctx.decompressobj()
        while not d.eof and pos < len(raw):
            step = max(64, (limit + 1 - len(out)) // _ZSTD_MOST_PER_BYTE)
            piece = raw[pos : pos + step]
            pos += len(piece)
            out += d.decompress(piece)
            if len(out) > limit:  # (not _within: it copies what it checks)
                raise _too_large(what, limit)
        if not d.eof:
            if partial:  # cut mid-frame: what decoded before the cut
                return bytes(out)
            raise EOFError("zstd data ended before the end of its frame")
        pos -= len(d.unused_data)  # the next frame's start, fed with the last piece
    return bytes(out)


def _inflate(
    raw: bytes, wbits: int, what: str, limit: int, members: bool = False, partial: bool = False
) -> bytes:
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
            if partial:
                return bytes(out)
            raise EOFError("compressed data ended before the end-of-stream marker was reached")
        data = d.unused_data
        if not (members and data.lstrip(b"\0")):  # trailing zero padding after the last member is allowed
            return bytes(out)


def _unbrotli(raw: bytes, what: str, limit: int, partial: bool = False) -> bytes:
    """brotli data decoded to at most `limit` bytes, by the first decoder here that can stop there: the
    `brotli` package's streaming Decompressor (1.2 and later take an output limit), else the system's
    libbrotlidec through ctypes. brotli's one-shot call builds the whole output first: a few hundred
    bytes of brotli can claim gigabytes, so it is never used."""
    mod = _brotli_module()
    if mod is not None:
        return _unbrotli_module(mod, raw, what, limit, partial)
    lib = _libbrotlidec()
    if lib is not None:
        return _unbrotli_lib(lib, raw, what, limit, partial)
    raise ValueError(
        f"the {what} is brotli-compressed and no brotli decoder that can bound its output is installed "
        "(pip install 'brotli>=1.2', or the system's libbrotli): it was forwarded as sent but not recorded"
    )


def _brotli_module() -> Any:
    try:
        import brotli  # type: ignore[import-not-found]
    except ImportError:
        return None
    # Before 1.2 the Decompressor takes no output limit: such a module is passed over.
    return brotli if hasattr(getattr(brotli, "Decompressor", None), "can_accept_more_data") else None


def _unbrotli_module(mod: Any, raw: bytes, what: str, limit: int, partial: bool = False) -> bytes:
    d = mod.Decompressor()
    out = bytearray()
    data = raw
    while True:
        # Input is given once; while the output is held back by the limit, process() is called with none.
        out += d.process(data, output_buffer_limit=limit + 1 - len(out))
        data = b""
        _within(out, what, limit)
        if d.is_finished():
            return bytes(out)
        if d.can_accept_more_data():  # every byte given and no more output: the data ended early
            if partial:
                return bytes(out)
            raise EOFError("brotli data ended before its end")


_lib: Any = None  # libbrotlidec, once looked for (False: not found)


def _libbrotlidec() -> Any:
    global _lib
    if _lib is None:
        import ctypes
        import ctypes.util

        _lib = False
        name = ctypes.util.find_library("brotlidec")
        if name:
            try:
                lib = ctypes.CDLL(name)
                lib.BrotliDecoderCreateInstance.restype = ctypes.c_void_p
                lib.BrotliDecoderCreateInstance.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
                lib.BrotliDecoderDestroyInstance.argtypes = [ctypes.c_void_p]
                lib.BrotliDecoderDecompressStream.restype = ctypes.c_int
                lib.BrotliDecoderDecompressStream.argtypes = [
                    ctypes.c_void_p,
                    ctypes.POINTER(ctypes.c_size_t),
                    ctypes.POINTER(ctypes.c_void_p),
                    ctypes.POINTER(ctypes.c_size_t),
                    ctypes.POINTER(ctypes.c_void_p),
                    ctypes.c_void_p,
                ]
                lib.BrotliDecoderGetErrorCode.restype = ctypes.c_int
                lib.BrotliDecoderGetErrorCode.argtypes = [ctypes.c_void_p]
                lib.BrotliDecoderErrorString.restype = ctypes.c_char_p
                lib.BrotliDecoderErrorString.argtypes = [ctypes.c_int]
                _lib = lib
            except (OSError, AttributeError):
                _lib = False
    return _lib or None


class BrotliDataError(ContextPipeError):
    """libbrotlidec refused the data (decode() says which body and coding)."""


_BROTLI_SUCCESS, _BROTLI_NEEDS_MORE_INPUT, _BROTLI_NEEDS_MORE_OUTPUT = 1, 2, 3
_BROTLI_OUT = 1 << 20  # decoded a megabyte at a time


def _unbrotli_lib(lib: Any, raw: bytes, what: str, limit: int, partial: bool = False) -> bytes:
    """BrotliDecoderDecompressStream (brotli/decode.h): it writes at most the output room it is given."""
    import ctypes

    state = lib.BrotliDecoderCreateInstance(None, None, None)
    if not state:
        raise MemoryError("brotli decoder")
    try:
        src = ctypes.create_string_buffer(raw, len(raw))
        avail_in = ctypes.c_size_t(len(raw))
        next_in = ctypes.c_void_p(ctypes.addressof(src))
        buf = ctypes.create_string_buffer(_BROTLI_OUT)
        out = bytearray()
        while True:
            room = min(_BROTLI_OUT, limit + 1 - len(out))
            avail_out = ctypes.c_size_t(room)
            next_out = ctypes.c_void_p(ctypes.addressof(buf))
            rc = lib.BrotliDecoderDecompressStream(
                state, ctypes.byref(avail_in), ctypes.byref(next_in), ctypes.byref(avail_out), ctypes.byref(next_out), None
            )
            out += buf.raw[: room - avail_out.value]
            _within(out, what, limit)
            if rc == _BROTLI_SUCCESS:
                if avail_in.value:
                    raise BrotliDataError(f"{avail_in.value} bytes after the end of the brotli data")
                return bytes(out)
            if rc == _BROTLI_NEEDS_MORE_INPUT:
                if partial:
                    return bytes(out)
                raise EOFError("brotli data ended before its end")
            if rc != _BROTLI_NEEDS_MORE_OUTPUT:
                code = lib.BrotliDecoderGetErrorCode(state)
                raise BrotliDataError((lib.BrotliDecoderErrorString(code) or b"error").decode("ascii", "replace"))
    finally:
        lib.BrotliDecoderDestroyInstance(state)


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
    """One request through the proxy and the upstream's answer, as the recorder journals it."""
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
    # An error's Retry-After (429, 503, Anthropic's 529): how long the agent's SDK waits before it tries
    # again, which is the gap the recording shows before the next call. The one header it keeps.
    retry_after: str = ""
    # The SDK's attempt number (`x-stainless-retry-count`: 0 first, 1 its first retry; None: not sent):
    # a failed call sent again is an attempt of the same turn (engine/capture/proxy/retries.py).
    retry_count: int | None = None
    handed: bool = False  # given to the recording hook already (forward._relay, before the body's end)
    # Wall clock when the answer ended (it was handed to the recorder): the outcome's time in the journal,
    # which the recorder's worker writes later (its queue can lag behind a fast agent).
    ended: float | None = None
    upstream: str = ""  # the URL the request was forwarded to (the spans' server.address and server.port)
    # The agent's address and the proxy's, of the connection the request came on: which local process made
    # a conversation's calls (engine/capture/proxy/peer.py; None when the transport does not say).
    peer: tuple[str, int] | None = None
    local: tuple[str, int] | None = None
    # The look-up of the process at `peer`, started when the request arrived (peer.look_up).
    peer_lookup: Future[Any] | None = None

    @property
    def streamed(self) -> bool:
        return self.content_type.split(";")[0].strip().lower() == "text/event-stream"

    def request_body(self) -> bytes:
        """The request body decoded from its Content-Encoding. Raises ValueError as `decode` does."""
        return decode(self.request, self.request_encoding, "request")

    def body(self) -> bytes:
        """The response body, decoded when the upstream compressed it (the agent got the compressed
        bytes; the recording wants the text). Raises ValueError for an encoding it can't undo. A body
        cut off (the upstream or the agent went away, or its coding stops before its end) is decoded as
        far as it arrived; the last is marked here as cut (upstream_cut, error), as the others are."""
        cut = self.upstream_cut or self.client_gone
        try:
            return decode(b"".join(self.response), self.content_encoding, "response", partial=cut)
        except Truncated as exc:
            # The HTTP body ended cleanly but its coding did not: the upstream cut it all the same (a
            # server whose compressor died mid-stream, a middlebox). Recorded as a body that broke off,
            # with the events that arrived: a chat stream without [DONE] must not read as whole.
            self.upstream_cut = True
            self.error = self.error or str(exc)
            return exc.decoded
