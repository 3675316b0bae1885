"""A serialized request and its parts: the body's blocks in wire order (`Block`), the request with its
hashes (`SerializedRequest`), and the prefix hash a turn nothing observes leaves to whoever reads it
(`PrefixDigest`, `DeferredPrefixRequest`, sharing a `DigestChain`). The serializer that makes them is
`base.Serializer`.
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass, field
from operator import attrgetter
from typing import TYPE_CHECKING, Any, cast

from engine.providers.hex_chain import ChainHasher

if TYPE_CHECKING:
    pass


@dataclass(frozen=True, init=False)
class Block:
    """One unit of the serialized request, in wire order: what the cache simulator and the
    cache-break attribution compare turn to turn."""

    section: str
    segment: str  # "tools" | "system" | "messages"
    sha: str
    tokens: int
    marker: bool

    def __init__(self, section: str, segment: str, sha: str, tokens: int, marker: bool) -> None:
        # Stored into the instance's dict one by one (see engine.assembly.Section.__init__; ~2x faster
        # than __dict__.update(...), which builds a dict of keywords first): each new item of a turn
        # makes one.
        d = self.__dict__
        d["section"] = section
        d["segment"] = segment
        d["sha"] = sha
        d["tokens"] = tokens
        d["marker"] = marker


@dataclass
class SerializedRequest:
    """A request as the provider receives it: the body bytes, its blocks, and the hashes the trace and cache
    checks use."""

    provider: str
    body: bytes
    blocks: list[Block]
    request_sha256: str
    prefix_sha256: str
    cacheable_prefix_tokens: int
    tool_shas: dict[str, str] = field(default_factory=dict)
    # sha256 of each section's block hashes joined in order (the trace's section sha256)
    section_shas: dict[str, str] = field(default_factory=dict)
    # Index of the last block with a cache marker (-1: none); None when not known (made elsewhere).
    last_marked: int | None = None

    def json(self) -> Any:
        import json

        return json.loads(self.body)

    def prefix_digest(self) -> str | PrefixDigest:
        """prefix_sha256, or what computes it when it is still to be computed (a trace built later keeps
        that instead of reading it now: see PrefixDigest)."""
        return self.prefix_sha256


class PrefixDigest:
    """A request's prefix hash (sha256 of its prefix blocks' hashes as bytes), computed when first read.

    Only a turn's trace reads it, so a turn nothing observes (Pipeline's unobserved build, whose trace is
    built when read: engine/trace_lazy.py) leaves it to whoever reads it (`serialize(prefix_hash=False)`):
    ~3 us a turn (joining ~4 KB of block hashes, cutting the prefix off and hashing what is new). It
    holds the sections' joined item hashes (the strings the serializer keeps for its section runs
    anyway; the history's is made anew each turn, ~64 characters a block) until read, and gives the
    digest the serializer's resumed hash gives: sha256 of the same bytes.

    The digests of one serializer's requests resume from each other (`chain`, a DigestChain): a trace
    read every turn, or built as the journal spills its turns in order, hashes only what its prefix adds
    to an earlier one's, as the eager build's resumed hash does. Each hashed anew cost the reader ~25 us
    a turn more than the eager build at ~300 blocks (issue 15 item 4: a trace read at once was dearer
    deferred than built at the request)."""

    __slots__ = ("_hexes", "_prefix", "_value", "_chain")

    def __init__(self, hexes: list[Hexes], prefix: int, chain: DigestChain | None = None) -> None:
        self._hexes: list[Hexes] | None = hexes  # each section's item hashes (see Hexes)
        self._prefix = prefix  # blocks in the prefix
        self._value: str | None = None
        self._chain = chain

    def value(self) -> str:
        v = self._value
        if v is None:
            hexes = self._hexes
            assert hexes is not None
            # Idempotent: two threads reading at once compute the same string.
            text = _prefix_hex(hexes, self._prefix)
            chain = self._chain
            if chain is None:
                v = hashlib.sha256(bytes.fromhex(text)).hexdigest()
            else:
                v = chain.hexdigest(text)
            self._value = v
            self._hexes = self._chain = None
        return v


class DigestChain:
    """The resumed hash (hex_chain.ChainHasher) the deferred prefix digests of one serializer share: its
    own, not the serializer's (which the agent's thread uses unlocked at an eager build), and locked,
    since a digest may be read on any thread (a live probe's I/O thread reads traces)."""

    __slots__ = ("_hasher", "_lock")

    def __init__(self, keep: int) -> None:
        self._hasher = ChainHasher(bytes.fromhex, keep=keep)
        self._lock = threading.Lock()

    def hexdigest(self, text: str) -> str:
        with self._lock:
            return self._hasher.hexdigest(text)

    # A copied or pickled request's digest still computes the same value: a copy shares the chain (it
    # is a cache; its lock cannot be copied) and a pickled one gets a fresh chain.
    def __copy__(self) -> DigestChain:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> DigestChain:
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return (DigestChain, (self._hasher.keep,))


class DeferredPrefixRequest(SerializedRequest):
    """A SerializedRequest whose prefix_sha256 is computed on first read (serialize(prefix_hash=False)): the
    same value, the same fields."""

    def _get_prefix(self) -> str:
        v = self.__dict__["_prefix"]
        if isinstance(v, PrefixDigest):
            v = self.__dict__["_prefix"] = v.value()
        return cast(str, v)

    def _set_prefix(self, value: str | PrefixDigest) -> None:
        self.__dict__["_prefix"] = value

    # The dataclass's __init__ assigns the field, which this property takes.
    prefix_sha256 = property(_get_prefix, _set_prefix)  # type: ignore[assignment]

    def prefix_digest(self) -> str | PrefixDigest:
        # (Not through typing.cast: a Python call, every turn.)
        return self.__dict__["_prefix"]  # type: ignore[no-any-return]


_SHA = attrgetter("sha")

# A section's item hashes (64 hex digits each, what its section sha256 hashes joined): the first n of a
# run's `shas`. Not joined into one string each turn (the express lane's history grew by a copy of all of
# them, 64 bytes a message, every turn): a run that extends another in place takes over its list and
# appends to it, never changes what is there, so the first n stay this run's, whatever its lineage
# appends later; a run that forks (a moved marker, a compaction, a window) has a list of its own.
# Joined only when read (a prefix digest, an eager prefix hash).
Hexes = tuple[list[str], int]


def _prefix_hex(hexes: list[Hexes] | None, prefix: list[Block] | int) -> str:
    """The prefix blocks' hashes joined: the first blocks' of the sections' item hashes (a block's hash
    is its item's) when every one is 64 hex digits, else joined afresh (`prefix` then the blocks)."""
    if hexes is None:
        assert not isinstance(prefix, int)
        return "".join(map(_SHA, prefix))
    left = prefix if isinstance(prefix, int) else len(prefix)
    parts: list[str] = []
    for shas, n in hexes:
        if left <= 0:
            break
        m = n if n < left else left
        parts += shas[:m]  # (a cut: the list may have grown past n since, see Hexes)
        left -= m
    return "".join(parts)
