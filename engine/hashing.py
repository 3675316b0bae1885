"""Canonical bytes and content hashes.

Everything the engine hashes goes through `canonical_json`, so the same logical value always
gives the same bytes (sorted keys, no whitespace, UTF-8) regardless of dict insertion order.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

# One encoder built once: json.dumps with non-default options builds a JSONEncoder per call, which
# costs more than encoding a small value (and the engine and store hash thousands per turn).
_encode = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode


def canonical_json(value: Any) -> bytes:
    """Stable JSON bytes: sorted keys, compact separators, UTF-8 (non-ASCII kept as is)."""
    return _encode(value).encode("utf-8")


def sha256_hex(data: bytes | str) -> str:
    if isinstance(data, str):
        data = data.encode("utf-8")
    return hashlib.sha256(data).hexdigest()


def content_hash(value: Any) -> str:
    """SHA-256 of the canonical JSON of `value`."""
    return sha256_hex(canonical_json(value))


def short(h: str, n: int = 8) -> str:
    return h[:n]
