"""Shared serialization machinery: canonical fragments, cached by content hash, joined into a body
(`Serializer`: its hooks, the fragment and per-item caches and their bounds).

Each provider module turns one artifact into its wire dict. Fragments are canonical JSON bytes
(sorted keys), cached by (provider, artifact hash, marked), so a steady-state turn serializes only
new content; the body is a byte join in sorted-key order, hence canonical as a whole.

Serializer's bases: a section's runs reused turn to turn (`section_runs`: a history serialized only
where it grew) and the body joined or spliced from them (`request_body`). Beside it: the request it
makes (`serialized_request`: Block, SerializedRequest, PrefixDigest), the tool-call pairing check
(`tool_pairing`) and the body's resumed hash (`prefix_hasher`); their names are imported here as before.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engine.artifacts import (
    Media,
    Message,
    SectionItem,
    SpillReference,
    Text,
    ToolSchema,
)
from engine.assembly import Measure, Section
from engine.hashing import canonical_json
from engine.providers.hex_chain import ChainHasher
from engine.providers.policy import ProviderCachePolicy
from engine.providers.prefix_hasher import _PrefixHasher
from engine.providers.request_body import RequestBody, _BodyAt
from engine.providers.section_runs import _SectionRun as _SectionRun
from engine.providers.serialized_request import Block, DigestChain

# What this module's importers take from it (the request types moved to serialized_request.py).
from engine.providers.serialized_request import DeferredPrefixRequest as DeferredPrefixRequest
from engine.providers.serialized_request import PrefixDigest as PrefixDigest
from engine.providers.serialized_request import SerializedRequest as SerializedRequest
from engine.providers.serialized_request import _prefix_hex as _prefix_hex

# The pairing steps engine/sim/block_layout.py resumes, imported from here as before.
from engine.providers.tool_pairing import _START as _START
from engine.providers.tool_pairing import _info as _info
from engine.providers.tool_pairing import _pair_info as _pair_info
from engine.providers.tool_pairing import _pair_one as _pair_one
from engine.providers.tool_pairing import _pair_state as _pair_state
from engine.providers.tool_pairing import _pair_stretched as _pair_stretched
from engine.providers.tool_pairing import _PairInfo as _PairInfo
from engine.providers.tool_pairing import _PairState as _PairState


def text_of(item: SectionItem) -> str:
    if isinstance(item, Text):
        return item.text
    if isinstance(item, SpillReference):
        return item.render()
    if isinstance(item, Media):
        return f"[attachment {item.media_type} {item.ref} ({item.size} bytes)]"
    raise TypeError(f"{type(item).__name__} cannot appear in a system section")


Fragment = bytes


def _canonical(v: Any) -> bytes:
    """A provider hook's fragment as canonical bytes: bytes it wrote itself as they are, else its
    dicts through the canonical encoder."""
    if isinstance(v, bytes):
        return v
    if isinstance(v, list):
        return b",".join(canonical_json(x) for x in v)
    return canonical_json(v)


def comma_joined(head: bytes, frags: list[bytes], tail: bytes) -> list[bytes]:
    """[head, f0, b",", f1, ..., fn, tail]: a request body's parts for ONE b"".join. Joining the
    fragments first and the envelope around them after copies the body twice, and measured on a
    200 KB body the nested join costs 18x the single one (each copy is a fresh large allocation)."""
    if not frags:
        return [head, tail]
    parts = [b","] * (2 * len(frags) + 1)
    parts[1::2] = frags
    parts[0] = head
    parts[-1] = tail
    return parts


# The per-item caches hold fragments of what recent requests sent. Once they hold this many times the
# items of the current request (and at least CACHE_FLOOR), everything the current request did not use
# is dropped: memory follows the live window, not the session.
CACHE_SLACK = 4
CACHE_FLOOR = 512
# The same bound in bytes of fragments: 512 entries of a session whose tool outputs run to hundreds of KB
# held a hundred MB or more. Past the floor, the caches are pruned once they hold twice what the last
# prune kept (what recent runs send). Ordinary sessions' fragments are ~1 KB: the count bound acts first.
CACHE_FLOOR_BYTES = 8 << 20


class Serializer(RequestBody):
    """Provider-independent driver; a provider supplies the four hooks."""

    RUNS = _PrefixHasher.STREAMS  # serializations kept per section (one per interleaved sequence)

    def __init__(
        self,
        policy: ProviderCachePolicy,
        system_block: Callable[[str, bool], dict[str, Any]],
        tool_block: Callable[[ToolSchema, bool], dict[str, Any]],
        message_blocks: Callable[[Message, bool], list[dict[str, Any]] | bytes],
        envelope: Callable[[str, int, list[bytes], list[bytes], list[bytes]], bytes],
        unmarked: Callable[[bytes], bytes | None] | None = None,
    ) -> None:
        self.policy = policy
        # A marked message fragment -> the same message's unmarked one (None: not derivable, built
        # then): the tail breakpoint moves every turn, and the message it leaves is written again
        # without it (see _item_hit).
        self._unmarked = unmarked
        self._system_block = system_block
        self._tool_block = tool_block
        self._message_blocks = message_blocks
        self._envelope = envelope
        self._cache: dict[tuple[str, bool], bytes] = {}
        # (tokenizer, section, item hash, marked) -> (fragment, segment, block): an unchanged item costs
        # one lookup per turn. Token counts are a pure function of (tokenizer, content), hence the key.
        self._items: dict[tuple[str, str, str, bool], tuple[bytes, str, Block]] = {}
        # section id -> its last RUNS serializations, most recently used first (one per interleaved
        # sequence of requests; see _PrefixHasher)
        self._runs: dict[str, list[_SectionRun]] = {}
        self._body_hash = _PrefixHasher()
        # Section hashes (sha256 of the items' hashes joined) and the prefix hash (of the prefix blocks'
        # hashes as bytes), each resumed from an earlier string it extends (see hex_chain).
        self._section_hash = ChainHasher(keep=4 * self.RUNS)
        self._prefix_hash = ChainHasher(bytes.fromhex, keep=self.RUNS)
        self._digests = DigestChain(keep=self.RUNS)  # what deferred prefix hashes resume from
        self._pairs: dict[str, _PairInfo] = {}  # message hash -> what check_pairing needs from it
        self._kept = 0  # item cache entries left by the last prune
        self._held = 0  # bytes of the item cache's fragments (an entry's, each time one is added)
        self._held_kept = 0  # the same, left by the last prune
        # The bytes after the last message in the last body whose messages' end was found (see
        # _messages_end_of): the envelope's tail, the same turn after turn.
        self._tail: bytes | None = None
        # The last request's layout (see request_of).
        self.layout: list[tuple[Section, _SectionRun]] = []
        # The last request's body and what a body extending it is spliced from (see _spliced).
        self._body_at: _BodyAt | None = None
        # The last run _appended made (run, the run it extends, its items reused as they were): what
        # _spliced knows of the history's new run without comparing its fragments.
        # (Also the bytes of the fragments written again, with their commas, and the last fragment, as
        # the last body held them: with `own` that run's lists were cut back.)
        self._grew: tuple[_SectionRun, _SectionRun, int, int, bytes] | None = None

    def _frag(self, key: tuple[str, bool], make: Callable[[], Any]) -> bytes:
        b = self._cache.get(key)
        if b is None:
            b = self._cache[key] = _canonical(make())
        return b

    def cache_sizes(self) -> dict[str, int]:
        return {
            "items": len(self._items),
            "fragments": len(self._cache),
            "items in previous runs": sum(len(r.keys) for runs in self._runs.values() for r in runs),
            "pairing": len(self._pairs),
        }

    def cache_bytes(self) -> int:
        """Bytes of the fragments the per-item cache holds (the content cache's are the same objects)."""
        return sum(len(hit[0]) for hit in self._items.values())

    def _item_hit(
        self, s: Section, it: SectionItem, key: tuple[str, str, str, bool], measure: Measure
    ) -> tuple[bytes, str, Block]:
        """An item's (fragment, segment, block) under `key` (tokenizer, section, item hash, marked),
        built and kept in the per-item cache: asked on a miss there (every caller looks the key up first,
        in line: `cache.get(key) or self._item_hit(...)`, so looking again here would always miss). Block
        identity is the artifact's content hash, not its wire bytes: a moved cache marker changes the
        bytes but not what is cached."""
        mk = key[3]
        if isinstance(it, Message):
            # What _item_fragment does for a message, without its closure and two calls: a turn's
            # new messages are the usual misses.
            fkey = ("m" + it.sha, mk)
            frag = self._cache.get(fkey)
            if frag is None:
                # The message the tail breakpoint just left (Anthropic, Bedrock): its marked bytes
                # less the marker, not the message written again (its parts re-escaped, a tool
                # call's arguments parsed and re-encoded).
                was = None if mk or self._unmarked is None else self._cache.get(("m" + it.sha, True))
                frag = self._unmarked(was) if was is not None else None  # type: ignore[misc]
                if frag is None:
                    v = self._message_blocks(it, mk)
                    frag = v if isinstance(v, bytes) else _canonical(v)
                self._cache[fkey] = frag
            segment = "messages"
        else:
            frag, segment = self._item_fragment(s, it, mk)
        hit = self._items[key] = (frag, segment, Block(s.id, segment, it.sha, measure.item(it), mk))
        self._held += len(frag)
        return hit

    def _prune(self, live: int) -> None:
        """Keep the per-item caches near the size of what recent requests send (see CACHE_SLACK)."""
        # Never less than twice what the last prune kept: the recent runs of every interleaved sequence
        # can need more than CACHE_SLACK requests' worth, and a prune that keeps almost everything
        # would otherwise run (and walk the whole cache) on every request.
        if len(self._items) <= max(CACHE_FLOOR, CACHE_SLACK * live, 2 * self._kept) and self._held <= max(
            CACHE_FLOOR_BYTES, 2 * self._held_kept
        ):
            return
        keep = {key for runs in self._runs.values() for run in runs for key in run.keys}
        self._items = {key: hit for key, hit in self._items.items() if key in keep}
        self._kept = len(self._items)
        self._held = self._held_kept = sum(len(hit[0]) for hit in self._items.values())
        self._cache.clear()  # fragments by content: rebuilt on the next miss
        self._pairs.clear()  # likewise

    def _item_fragment(self, s: Section, it: SectionItem, mk: bool) -> tuple[bytes, str]:
        if isinstance(it, ToolSchema):
            return self._frag(("t" + it.sha, mk), lambda: self._tool_block(it, mk)), "tools"
        if isinstance(it, Message):
            return self._frag(("m" + it.sha, mk), lambda: self._message_blocks(it, mk)), "messages"
        return self._frag(("s" + it.sha, mk), lambda: self._system_block(text_of(it), mk)), "system"
