"""sha256 of strings of joined content hashes that mostly extend strings hashed before.

A section's hash is the sha256 of its items' hashes joined, and the request's prefix hash the sha256 of
the prefix blocks' hashes (as bytes): between compactions each is last turn's string plus the hashes of
the new items, so hashing the whole string again (~60-150 items, 10-20 us each, every turn) is mostly
repeated work. `ChainHasher` keeps the hash state after each of the last few strings and, when a new
string starts with one of them, hashes only the rest: the same digest as hashing it whole.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any


def utf8(text: str) -> bytes:
    return text.encode("utf-8")


class ChainHasher:
    """sha256 of to_bytes(text) for successive texts, resumed from the longest remembered text that the
    new one starts with. `to_bytes` must map a concatenation to the concatenation of its parts' bytes,
    split where the remembered texts end (UTF-8 encoding; bytes.fromhex, every remembered text having
    been read whole, so of even length)."""

    def __init__(self, to_bytes: Callable[[str], bytes] = utf8, keep: int = 16) -> None:
        self.to_bytes = to_bytes
        self.keep = keep  # texts remembered: a few interleaved sequences of a few sections each
        self._states: list[tuple[str, Any]] = []  # (text, hash state after it), most recent first
        self.hashed = 0  # characters hashed (what resuming saved is the rest)

    def hexdigest(self, text: str) -> str:
        return self._hashed(text).hexdigest()  # leaves the state as it is

    def hexdigest_state(self, text: str) -> tuple[str, Any]:
        """hexdigest(text) and a copy of the hash state after `text`, the caller's own to update: it
        resumes from there without this hasher (see providers.base._SectionRun.hstate)."""
        h = self._hashed(text)
        return h.hexdigest(), h.copy()

    def _hashed(self, text: str) -> Any:
        """The hash state after `text` (remembered here: not to be updated by the caller)."""
        best, start = -1, 0
        for i, (old, _state) in enumerate(self._states):
            if len(old) > start and text.startswith(old):
                best, start = i, len(old)
        if best >= 0:
            # The new text extends this one, so it takes its place (resuming from the new text is as
            # good): its state is carried on, not copied.
            h = self._states.pop(best)[1]
        else:
            h = hashlib.sha256()
        if start < len(text):
            h.update(self.to_bytes(text[start:]))
            self.hashed += len(text) - start
        if text:
            self._states.insert(0, (text, h))
            del self._states[self.keep :]
        return h
