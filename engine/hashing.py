"""Canonical bytes and content hashes.

Everything the engine hashes goes through `canonical_json`, so the same logical value always
gives the same bytes (sorted keys, no whitespace, UTF-8) regardless of dict insertion order.
"""

from __future__ import annotations

import hashlib
import json
from json.encoder import encode_basestring, encode_basestring_ascii
from typing import Any

# One encoder built once: json.dumps with non-default options builds a JSONEncoder per call, which
# costs more than encoding a small value (and the engine and store hash thousands per turn).
_encode = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode


def canonical_json(value: Any) -> bytes:
    """Stable JSON bytes: sorted keys, compact separators, UTF-8 (non-ASCII kept as is)."""
    return _encode(value).encode("utf-8")


# The JSON string literals of the last few long strings escaped (see json_string): a tool's output is
# escaped for its ToolResult's content hash and again for its request fragment, the same turn.
_ESCAPED: dict[str, str] = {}
ESCAPE_MEMO = 16  # strings kept
ESCAPE_MIN = 256  # shorter strings are escaped afresh (cheaper than the memo's look-up and upkeep)


def escaped(text: str) -> str:
    """encode_basestring(text): `text` as a JSON string literal, non-ASCII kept as is. An ASCII string
    (str.isascii reads a flag the string carries: no scan) without DEL goes through the ASCII escaper,
    which writes the same literal for it (the two differ only on U+007F and above: it escapes them,
    encode_basestring keeps them) ~1.5x as fast: the shared trajectories' tool outputs and arguments
    4.5 against 7 ns a character (tests/test_input_json_literal.py holds the two equal)."""
    return encode_basestring_ascii(text) if text.isascii() and "\x7f" not in text else encode_basestring(text)


def json_string(text: str) -> str:
    """`text` as canonical_json writes it (a JSON string literal, non-ASCII kept as is), from a memo of
    the last few long strings: callers that put the same long string into two JSON values (a content
    hash and a request fragment) escape it once."""
    if len(text) < ESCAPE_MIN:
        return encode_basestring(text)
    got = _ESCAPED.get(text)
    if got is None:
        got = escaped(text)
        if len(_ESCAPED) >= ESCAPE_MEMO:
            # Emptied rather than trimmed to the oldest: one call, safe while pipelines on other threads
            # use the memo (iterating to find the oldest is not); a pair split by it escapes twice.
            _ESCAPED.clear()
        _ESCAPED[text] = got
    return got


# A new hash is a copy of this empty one, not hashlib.sha256(data): the same digest, but hashlib.sha256
# finds the digest by its name and sets up a fresh OpenSSL context every call (py_digest_by_name,
# EVP_DigestInit_ex), code a cold turn reads from memory again for its ~13 hashes (an agent call's texts,
# parts, message, blobs), while a copy runs the code the body hasher's copies run anyway
# (engine/providers/prefix_hasher.py). The prototype is never updated, so copies share nothing.
# The hashes an agent's call makes call it and update the copy in line (`h = new_sha256()`,
# `h.update(data)`, `h.hexdigest()`): a function doing the two was a Python frame a hash (~12 bytecodes,
# 8 frames a steady turn, as hashlib.sha256(data) was not).
new_sha256 = hashlib.sha256().copy


def result_hash(call_id: str, content: str, is_error: bool, form: str) -> str:
    """content_hash(["result", call_id, content, is_error, form]) (the same digest), the content escaped
    through json_string's memo, where the request fragment finds it again."""
    h = new_sha256()
    h.update((
        '["result",' + encode_basestring(call_id) + "," + json_string(content)
        + (",true," if is_error else ",false,") + encode_basestring(form) + "]"
    ).encode())  # fmt: skip
    return h.hexdigest()


def call_hash(call_id: str, name: str, arguments: str) -> str:
    """content_hash(["call", call_id, name, arguments]) (the same digest), the arguments escaped through
    json_string's memo."""
    h = new_sha256()
    h.update((
        '["call",' + encode_basestring(call_id) + "," + encode_basestring(name) + "," + json_string(arguments) + "]"
    ).encode())  # fmt: skip
    return h.hexdigest()


def sha256_hex(data: bytes | str) -> str:
    if isinstance(data, str):
        data = data.encode("utf-8")
    h = new_sha256()
    h.update(data)
    return h.hexdigest()


def content_hash(value: Any) -> str:
    """SHA-256 of the canonical JSON of `value`."""
    return sha256_hex(canonical_json(value))


def short(h: str, n: int = 8) -> str:
    return h[:n]
