"""The requests an agent actually sent, as a recording holds them: `actual` events, each the previous
request's first `base` message hashes plus the hashes in `add` (written by the importers, the tap and
the proxy; see engine/importers/ingest.py).

Its own small module so that a reader of recordings (simulate's `as_sent` column) folds these events
without importing the importers package and every format parser in it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def actual_requests(events: Iterable[dict[str, Any]]) -> dict[int, list[str]]:
    """turn -> message blob hashes of the request the agent actually sent."""
    out: dict[int, list[str]] = {}
    prev: list[str] = []
    for ev in events:
        if ev.get("k") == "actual":
            cur = prev[: ev["base"]] + list(ev["add"])
            out[ev["turn"]] = cur
            prev = cur
    return out
