"""A streaming brotli encoder over the system's libbrotlienc (ctypes): neither `brotli` nor `brotlicffi`
is installed in the project's venv, and the stand-in compresses an event stream as a server does, each
event flushed as it is sent (BROTLI_OPERATION_FLUSH), which a one-shot compressor cannot do."""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Iterable
from typing import Any

# BrotliEncoderOperation (brotli/encode.h)
PROCESS, FLUSH, FINISH = 0, 1, 2


def libbrotlienc() -> Any:
    """The system's libbrotlienc, or None when it is not installed."""
    name = ctypes.util.find_library("brotlienc")
    if name is None:
        return None
    lib = ctypes.CDLL(name)
    lib.BrotliEncoderCreateInstance.restype = ctypes.c_void_p
    lib.BrotliEncoderCreateInstance.argtypes = [ctypes.c_void_p] * 3
    lib.BrotliEncoderDestroyInstance.argtypes = [ctypes.c_void_p]
    lib.BrotliEncoderSetParameter.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32]
    lib.BrotliEncoderCompressStream.argtypes = [
        ctypes.c_void_p,
        ctypes.c_int,
        ctypes.POINTER(ctypes.c_size_t),
        ctypes.POINTER(ctypes.c_void_p),
        ctypes.POINTER(ctypes.c_size_t),
        ctypes.POINTER(ctypes.c_void_p),
        ctypes.c_void_p,
    ]
    lib.BrotliEncoderIsFinished.argtypes = [ctypes.c_void_p]
    lib.BrotliEncoderHasMoreOutput.argtypes = [ctypes.c_void_p]
    return lib


class _Encoder:
    """One brotli stream on the system's encoder: each `run` hands it data with an operation (PROCESS,
    FLUSH or FINISH) and returns the bytes that come out."""

    def __init__(self, quality: int) -> None:
        lib = libbrotlienc()
        if lib is None:
            raise RuntimeError("the system's libbrotlienc is not installed (apt-get install libbrotli1)")
        self.lib = lib
        self.state = lib.BrotliEncoderCreateInstance(None, None, None)
        lib.BrotliEncoderSetParameter(self.state, 1, quality)  # BROTLI_PARAM_QUALITY
        self.buf = ctypes.create_string_buffer(1 << 16)

    def run(self, op: int, data: bytes) -> bytes:
        lib, state, buf = self.lib, self.state, self.buf
        out = bytearray()
        src = ctypes.create_string_buffer(data, len(data))
        avail_in = ctypes.c_size_t(len(data))
        next_in = ctypes.c_void_p(ctypes.addressof(src))
        while True:
            avail_out = ctypes.c_size_t(len(buf))
            next_out = ctypes.c_void_p(ctypes.addressof(buf))
            ok = lib.BrotliEncoderCompressStream(
                state,
                op,
                ctypes.byref(avail_in),
                ctypes.byref(next_in),
                ctypes.byref(avail_out),
                ctypes.byref(next_out),
                None,
            )
            if not ok:
                raise RuntimeError("libbrotlienc refused the data")
            out += buf.raw[: len(buf) - avail_out.value]
            done = lib.BrotliEncoderIsFinished(state) if op == FINISH else avail_in.value == 0
            if done and not lib.BrotliEncoderHasMoreOutput(state):
                return bytes(out)

    def close(self) -> None:
        self.lib.BrotliEncoderDestroyInstance(self.state)


def compress_flushed(pieces: list[bytes]) -> list[bytes]:
    """Each piece compressed and flushed (its bytes decode on their own once the earlier ones have), the
    stream's end appended to the last: what a brotli-compressing server writes, piece by piece."""
    enc = _Encoder(5)  # a server's usual middle quality
    try:
        out = [enc.run(FLUSH, p) for p in pieces]
        return out[:-1] + [out[-1] + enc.run(FINISH, b"")]
    finally:
        enc.close()


def compress_stream(blocks: Iterable[bytes]) -> bytes:
    """The blocks compressed as one stream, fast (quality 1), taken one at a time (the input is never
    whole: a bomb of gigabytes of zeros is made from a generator)."""
    enc = _Encoder(1)
    out = bytearray()
    try:
        for block in blocks:
            out += enc.run(PROCESS, block)
        out += enc.run(FINISH, b"")
    finally:
        enc.close()
    return bytes(out)
