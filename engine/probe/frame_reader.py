"""The probe client's frame decoder: frames read, one at a time, from the bytes its socket (or a shared-memory
ring) delivers, without re-copying the unread tail for each frame (engine.probe.client reads through it)."""

from __future__ import annotations

from typing import Any

from engine.recording.frames import HEADER_SIZE, MAX_FRAME_BYTES, decode_header, decode_payload


class _FrameReader:
    """Incremental frame decoder over a byte stream (no re-copying of the unread tail per frame)."""

    def __init__(self, limit: int = MAX_FRAME_BYTES, checked: bool = True) -> None:
        self._buf = bytearray()
        self._pos = 0
        self._limit = limit
        self._checked = checked  # False: crc32s not checked (a shared-memory ring's: see ring, "Checksums")
        self.offset = 0  # stream position of _buf[0], for error messages

    def feed(self, data: bytes) -> None:
        if self._pos and self._pos * 2 >= len(self._buf):
            del self._buf[: self._pos]
            self.offset += self._pos
            self._pos = 0
        self._buf += data

    def next(self) -> dict[str, Any] | None:
        avail = len(self._buf) - self._pos
        if avail < HEADER_SIZE:
            return None
        at = self.offset + self._pos
        length, crc = decode_header(bytes(self._buf[self._pos : self._pos + HEADER_SIZE]), at, self._limit)
        end = self._pos + HEADER_SIZE + length
        if end > len(self._buf):
            return None
        frame = decode_payload(bytes(self._buf[self._pos + HEADER_SIZE : end]), crc, at, checked=self._checked)
        self._pos = end
        return frame
