"""Redaction for the probe stream: prompt text replaced by its SHA-256 and size, structure kept."""

from __future__ import annotations

import hashlib
from typing import Any

REDACT_KEYS = frozenset({"content", "text"})


def _digest(value: str | bytes) -> dict[str, Any]:
    raw = value.encode("utf-8") if isinstance(value, str) else value
    return {"sha256": hashlib.sha256(raw).hexdigest(), "size": len(raw)}


def _redact_value(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: (_digest(v) if k in REDACT_KEYS and isinstance(v, str | bytes) else _redact_value(v))
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [_redact_value(v) for v in value]
    return value


def redact_event(event: dict[str, Any]) -> dict[str, Any]:
    """A copy of `event` with prompt text replaced by `{"sha256", "size"}` (the original is untouched).

    Blob data is replaced (its "h" kept, so the inspector can still match blobs to sections), and so is
    every str/bytes value under a key named "content" or "text", at any depth (message content, content
    blocks, tool output). Sizes are in bytes of UTF-8.
    """
    out = _redact_value(event)
    if event.get("k") == "blob" and isinstance(event.get("data"), str | bytes):
        out["data"] = _digest(event["data"])
    return out  # type: ignore[no-any-return]
