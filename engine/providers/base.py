"""Shared serialization machinery: canonical fragments, cached by content hash, joined into a body.

Each provider module turns one artifact into its wire dict. Fragments are canonical JSON bytes
(sorted keys), cached by (provider, artifact hash, marked), so a steady-state turn serializes only
new content; the body is a byte join in sorted-key order, hence canonical as a whole.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from engine.artifacts import (
    Media,
    Message,
    SectionItem,
    SpillReference,
    Text,
    ToolCall,
    ToolResult,
    ToolSchema,
)
from engine.assembly import Assembly, Measure, Section, wire_order
from engine.errors import UnpairedToolResultError
from engine.hashing import canonical_json, sha256_hex
from engine.providers.policy import ProviderCachePolicy
from engine.request_diff import common_prefix_len
from engine.types import SectionKind

if TYPE_CHECKING:
    from engine.optimize.context import Marker


@dataclass(frozen=True)
class Block:
    """One unit of the serialized request, in wire order: what the cache simulator and the
    cache-break attribution compare turn to turn."""

    section: str
    segment: str  # "tools" | "system" | "messages"
    sha: str
    tokens: int
    marker: bool


@dataclass
class SerializedRequest:
    provider: str
    body: bytes
    blocks: list[Block]
    request_sha256: str
    prefix_sha256: str
    cacheable_prefix_tokens: int
    tool_shas: dict[str, str] = field(default_factory=dict)
    # sha256 of each section's block hashes joined in order (the trace's section sha256)
    section_shas: dict[str, str] = field(default_factory=dict)

    def json(self) -> Any:
        import json

        return json.loads(self.body)


def text_of(item: SectionItem) -> str:
    if isinstance(item, Text):
        return item.text
    if isinstance(item, SpillReference):
        return item.render()
    if isinstance(item, Media):
        return f"[attachment {item.media_type} {item.ref} ({item.size} bytes)]"
    raise TypeError(f"{type(item).__name__} cannot appear in a system section")


Fragment = bytes
_SHA = attrgetter("sha")
_TOKENS = attrgetter("tokens")
# The per-item caches hold fragments of what recent requests sent. Once they hold this many times the
# items of the current request (and at least CACHE_FLOOR), everything the current request did not use
# is dropped: memory follows the live window, not the session.
CACHE_SLACK = 4
CACHE_FLOOR = 512


@dataclass
class _SectionRun:
    """What the previous serialization produced for one section: its item hashes, which of its items
    carried a marker, and per item the fragment, segment, block and cache key. A history section grows
    by appending between compactions, so the next request reuses the common prefix of these lists and
    serializes only the items after it."""

    tok: str
    shas: list[str]
    marks: frozenset[int]
    frags: list[bytes]
    segments: list[str]
    blocks: list[Block]
    keys: list[tuple[str, str, str, bool]]
    # check_pairing's state after the items (history sections only)
    pairing: tuple[set[str] | frozenset[str], set[str]] | None = None
    items: tuple[SectionItem, ...] = ()
    sha: str = ""  # sha256 of the joined item hashes (the trace's section sha256)


# What the pairing scan needs from one message, a pure function of its content (keyed by its hash):
# (is assistant, its call ids, its result call ids, has parts).
_PairInfo = tuple[bool, frozenset[str], tuple[str, ...], bool]


def _pair_info(m: Message) -> _PairInfo:
    if m.role == "assistant":
        return True, frozenset(p.id for p in m.parts if isinstance(p, ToolCall)), (), bool(m.parts)
    results = tuple(p.call_id for p in m.parts if isinstance(p, ToolResult))
    return False, frozenset(), results, bool(m.parts)


def _pairing_step(
    items: Any,
    prev_calls: set[str] | frozenset[str],
    pending: set[str],
    infos: dict[str, _PairInfo] | None = None,
) -> tuple[set[str] | frozenset[str], set[str]]:
    """check_pairing's scan from a given state (what it holds after the items before `items`).
    `infos` memoizes each message's call and result ids by its content hash, so a message seen in an
    earlier request is not walked part by part again (a history is scanned once per request)."""
    memo: dict[str, _PairInfo] = {} if infos is None else infos
    for it in items:
        if not isinstance(it, Message):
            continue
        info = memo.get(it.sha)
        if info is None:
            info = memo[it.sha] = _pair_info(it)
        assistant, calls, results, has_parts = info
        if assistant:
            if pending:
                cid = sorted(pending)[0]
                raise UnpairedToolResultError(cid, "the call has no result before the next assistant message")
            prev_calls = calls
            pending = set(calls)
        else:
            for cid in results:
                if cid not in prev_calls:
                    raise UnpairedToolResultError(
                        cid,
                        "result without a matching call in the preceding assistant message; "
                        "add the assistant's tool call first, or drop the result",
                    )
                pending.discard(cid)
            if results or has_parts:
                if pending and results:
                    cid = sorted(pending)[0]
                    raise UnpairedToolResultError(cid, "the call has no result in the following user message")
                prev_calls, pending = frozenset(), set()
    return prev_calls, pending


def check_pairing(history: tuple[SectionItem, ...]) -> None:
    """Every tool result answers a call made in the assistant message right before it, and every
    call (except in the newest message) has its result in the user message right after it."""
    _pairing_step(history, set(), set())


class _PrefixHasher:
    """sha256 of successive request bodies that mostly extend earlier ones (between compactions a body
    is an earlier one plus new messages, with the same few bytes around them). For each of the last
    STREAMS bodies it keeps the hash state at every CHECKPOINT bytes; a new body resumes from the
    furthest checkpoint inside the part it shares with any of them (memcmps) and hashes only the rest:
    the same digest as hashing the whole body.

    Several bodies, not one: the same serializer builds interleaved sequences of requests (simulate
    builds each turn under the what-if, with every gate closed, and per engine policy), and each
    sequence extends its own previous body, not the one built just before it."""

    CHECKPOINT = 4096
    STREAMS = 8

    def __init__(self) -> None:
        # (body, states), most recently used first; states[i]: hash of body[: (i + 1) * CHECKPOINT]
        self._streams: list[tuple[bytes, list[Any]]] = []

    def _shared(self, prev: bytes, states: list[Any], body: bytes) -> int:
        """How many of `prev`'s checkpoints `body` repeats: the furthest n with body[: n * CHECKPOINT]
        equal to prev's (a memcmp through a memoryview; slicing bytes would copy both sides first)."""
        step = self.CHECKPOINT
        n = min(len(states), len(body) // step)
        old = memoryview(prev)
        if not n or body.startswith(old[: n * step]):
            return n
        lo, hi = 0, n - 1  # binary search for the furthest shared checkpoint
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if body.startswith(old[: mid * step]):
                lo = mid
            else:
                hi = mid - 1
        return lo

    def hexdigest(self, body: bytes) -> str:
        step = self.CHECKPOINT
        best, n = -1, 0
        for i, (prev, states) in enumerate(self._streams):
            k = self._shared(prev, states, body)
            if k > n:
                best, n = i, k
        states = self._streams[best][1][:n] if best >= 0 else []
        h = states[-1].copy() if n else hashlib.sha256()
        view = memoryview(body)
        pos = n * step
        while pos + step <= len(body):
            h.update(view[pos : pos + step])
            pos += step
            states.append(h.copy())
        h.update(view[pos:])
        if best >= 0 and n == len(self._streams[best][1]):
            del self._streams[best]  # the new body holds every checkpoint of the one it extends
        self._streams.insert(0, (body, states))
        del self._streams[self.STREAMS :]
        return h.hexdigest()


class Serializer:
    """Provider-independent driver; a provider supplies the four hooks."""

    RUNS = _PrefixHasher.STREAMS  # serializations kept per section (one per interleaved sequence)

    def __init__(
        self,
        policy: ProviderCachePolicy,
        system_block: Callable[[str, bool], dict[str, Any]],
        tool_block: Callable[[ToolSchema, bool], dict[str, Any]],
        message_blocks: Callable[[Message, bool], list[dict[str, Any]]],
        envelope: Callable[[str, int, list[bytes], list[bytes], list[bytes]], bytes],
    ) -> None:
        self.policy = policy
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
        self._pairs: dict[str, _PairInfo] = {}  # message hash -> what check_pairing needs from it
        self._kept = 0  # item cache entries left by the last prune

    def _frag(self, key: tuple[str, bool], make: Callable[[], Any]) -> bytes:
        b = self._cache.get(key)
        if b is None:
            v = make()
            if isinstance(v, list):
                b = b",".join(canonical_json(x) for x in v)
            else:
                b = canonical_json(v)
            self._cache[key] = b
        return b

    def _section(self, s: Section, marks: frozenset[int], tok: str, measure: Measure) -> _SectionRun:
        """The fragments and blocks of one section: the longest prefix whose item hashes match one of
        this section's recent serializations (markers permitting) is reused as is; the rest is looked
        up (or built) item by item. The result is the same as building every item afresh: a fragment
        and a block are pure functions of (tokenizer, section, item hash, marked)."""
        items = s.items
        runs = self._runs.setdefault(s.id, [])
        for j, r in enumerate(runs):
            if r.items is items and r.marks == marks and r.tok == tok:
                # The very same items (an unchanged system section, the tools): nothing to do.
                if j:
                    runs.insert(0, runs.pop(j))
                return r
        shas = list(map(_SHA, items))
        prev: _SectionRun | None = None
        common = 0  # items whose hashes match prev's, from the start
        for r in runs:
            if r.tok != tok:
                continue
            c = common_prefix_len(r.shas, shas)  # compared in C
            if prev is None or c > common:
                prev, common = r, c
        k = common
        if prev is not None and k and marks != prev.marks:
            k = min(k, min(marks ^ prev.marks))  # a moved marker changes that item's bytes
        if s.kind == SectionKind.HISTORY:
            # Pairing is a left-to-right scan: resume from the state after prev's items when they are
            # all still here, else scan from the start.
            if prev is not None and prev.pairing is not None and common == len(prev.shas) and common:
                pairing = _pairing_step(
                    items[common:], prev.pairing[0], set(prev.pairing[1]), self._pairs
                )
            else:
                pairing = _pairing_step(items, set(), set(), self._pairs)
        else:
            pairing = None
        if prev is not None and k > 0:
            frags, segments, blocks, keys = prev.frags[:k], prev.segments[:k], prev.blocks[:k], prev.keys[:k]
        else:
            frags, segments, blocks, keys = [], [], [], []
        cache = self._items
        sid = s.id
        for i in range(k, len(items)):
            it = items[i]
            mk = i in marks
            key = (tok, sid, shas[i], mk)
            hit = cache.get(key)
            if hit is None:
                frag, segment = self._item_fragment(s, it, mk)
                # Block identity is the artifact's content hash, not its wire bytes: a moved cache
                # marker changes the bytes but not what the provider has cached.
                hit = (frag, segment, Block(sid, segment, it.sha, measure.item(it), mk))
                cache[key] = hit
            frags.append(hit[0])
            segments.append(hit[1])
            blocks.append(hit[2])
            keys.append(key)
        run = _SectionRun(
            tok, shas, marks, frags, segments, blocks, keys, pairing, items, sha256_hex("".join(shas))
        )
        if prev is not None and common == len(prev.shas) and k == common:
            runs.remove(prev)  # the new run extends prev and holds everything it did
        runs.insert(0, run)
        del runs[self.RUNS :]
        return run

    def serialize(
        self, asm: Assembly, markers: tuple[Marker, ...], model: str, max_tokens: int, measure: Measure
    ) -> SerializedRequest:
        marked: dict[str, set[int]] = {}
        for mk in markers:
            marked.setdefault(mk.section, set()).add(mk.item)
        out: dict[str, list[bytes]] = {"system": [], "tools": [], "messages": []}
        blocks: list[Block] = []
        tool_shas: dict[str, str] = {}
        section_shas: dict[str, str] = {}
        tok = measure.counter.tokenizer.name
        last_marker = -1
        live = 0
        for s in wire_order(asm):
            marks = frozenset(i for i in marked.get(s.id, ()) if 0 <= i < len(s.items))
            run = self._section(s, marks, tok, measure)
            if run.marks:
                last_marker = len(blocks) + max(run.marks)
            segs = set(run.segments)
            if len(segs) == 1:
                out[run.segments[0]].extend(run.frags)
            else:
                for frag, seg in zip(run.frags, run.segments, strict=True):
                    out[seg].append(frag)
            if "tools" in segs:
                for it in s.items:
                    if isinstance(it, ToolSchema):
                        tool_shas[it.name] = it.sha
            blocks.extend(run.blocks)
            live += len(run.keys)
            section_shas[s.id] = run.sha
        body = self._envelope(model, max_tokens, out["system"], out["tools"], out["messages"])
        if not self.policy.supports_markers:
            # Automatic prefix caching: everything but the newest message can be served from cache.
            last_marker = len(blocks) - 2
        prefix = blocks[: last_marker + 1]
        self._prune(live)
        return SerializedRequest(
            provider=self.policy.name,
            body=body,
            blocks=blocks,
            request_sha256=self._body_hash.hexdigest(body),
            prefix_sha256=hashlib.sha256(bytes.fromhex("".join(map(_SHA, prefix)))).hexdigest(),
            cacheable_prefix_tokens=sum(map(_TOKENS, prefix)),
            tool_shas=tool_shas,
            section_shas=section_shas,
        )

    def cache_sizes(self) -> dict[str, int]:
        return {
            "items": len(self._items),
            "fragments": len(self._cache),
            "items in previous runs": sum(len(r.keys) for runs in self._runs.values() for r in runs),
            "pairing": len(self._pairs),
        }

    def _prune(self, live: int) -> None:
        """Keep the per-item caches near the size of what recent requests send (see CACHE_SLACK)."""
        # Never less than twice what the last prune kept: the recent runs of every interleaved sequence
        # can need more than CACHE_SLACK requests' worth, and a prune that keeps almost everything
        # would otherwise run (and walk the whole cache) on every request.
        if len(self._items) <= max(CACHE_FLOOR, CACHE_SLACK * live, 2 * self._kept):
            return
        keep = {key for runs in self._runs.values() for run in runs for key in run.keys}
        self._items = {key: hit for key, hit in self._items.items() if key in keep}
        self._kept = len(self._items)
        self._cache.clear()  # fragments by content: rebuilt on the next miss
        self._pairs.clear()  # likewise

    def _item_fragment(self, s: Section, it: SectionItem, mk: bool) -> tuple[bytes, str]:
        if isinstance(it, ToolSchema):
            return self._frag(("t" + it.sha, mk), lambda: self._tool_block(it, mk)), "tools"
        if isinstance(it, Message):
            return self._frag(("m" + it.sha, mk), lambda: self._message_blocks(it, mk)), "messages"
        return self._frag(("s" + it.sha, mk), lambda: self._system_block(text_of(it), mk)), "system"


def result_text(r: ToolResult) -> str:
    return r.content
