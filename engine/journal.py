"""The append-only journal: every input and decision as an event; sinks (recorder, probe) subscribe.

Content is stored once by hash (`blob` events); other events refer to blobs by hash, so a session's
journal grows with new content, not with turns x context size.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .hashing import sha256_hex

Event = dict[str, Any]
Sink = Callable[[Event], None]


class Journal:
    def __init__(self) -> None:
        self.events: list[Event] = []
        self.blobs: dict[str, str] = {}
        self._sinks: list[Sink] = []
        self.sink_errors = 0

    def subscribe(self, sink: Sink) -> None:
        self._sinks.append(sink)

    def append(self, event: Event) -> None:
        self.events.append(event)
        for sink in self._sinks:
            try:
                sink(event)
            except Exception:  # an observer must never break the agent
                self.sink_errors += 1

    def blob(self, text: str) -> str:
        h = sha256_hex(text)
        if h not in self.blobs:
            self.blobs[h] = text
            self.append({"k": "blob", "h": h, "data": text})
        return h

    def snapshot(self) -> list[Event]:
        return list(self.events)
