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
    pairing: tuple[set[str], set[str]] | None = None  # check_pairing's state after the items (history)
    items: tuple[SectionItem, ...] = ()
    sha: str = ""  # sha256 of the joined item hashes (the trace's section sha256)


def _pairing_step(
    items: Any, prev_calls: set[str], pending: set[str]
) -> tuple[set[str], set[str]]:
    """check_pairing's scan from a given state (what it holds after the items before `items`)."""
    for it in items:
        if not isinstance(it, Message):
            continue
        if it.role == "assistant":
            if pending:
                cid = sorted(pending)[0]
                raise UnpairedToolResultError(cid, "the call has no result before the next assistant message")
            prev_calls = {p.id for p in it.parts if isinstance(p, ToolCall)}
            pending = set(prev_calls)
        else:
            results = [p for p in it.parts if isinstance(p, ToolResult)]
            for r in results:
                if r.call_id not in prev_calls:
                    raise UnpairedToolResultError(
                        r.call_id,
                        "result without a matching call in the preceding assistant message; "
                        "add the assistant's tool call first, or drop the result",
                    )
                pending.discard(r.call_id)
            if results or it.parts:
                if pending and results:
                    cid = sorted(pending)[0]
                    raise UnpairedToolResultError(cid, "the call has no result in the following user message")
                prev_calls, pending = set(), set()
    return prev_calls, pending


def check_pairing(history: tuple[SectionItem, ...]) -> None:
    """Every tool result answers a call made in the assistant message right before it, and every
    call (except in the newest message) has its result in the user message right after it."""
    _pairing_step(history, set(), set())


class _PrefixHasher:
    """sha256 of successive request bodies that mostly extend each other (between compactions a body
    is the previous one plus new messages, with the same few bytes around them). It keeps the hash state
    at every CHECKPOINT bytes of the last body, resumes from the furthest one inside the part this body
    shares with it (a memcmp), and hashes only the rest: the same digest as hashing the whole body."""

    CHECKPOINT = 4096

    def __init__(self) -> None:
        self._body = b""
        self._states: list[Any] = []  # _states[i]: hash of self._body[: (i + 1) * CHECKPOINT]

    def hexdigest(self, body: bytes) -> str:
        step = self.CHECKPOINT
        prev, states = self._body, self._states
        n = min(len(states), len(body) // step)
        # The furthest checkpoint whose bytes this body repeats (usually the first one tried); compared
        # through a memoryview, which is a memcmp (slicing bytes would copy both sides first).
        old = memoryview(prev)
        while n and not body.startswith(old[: n * step]):
            n = n - 1 if n < 4 else n // 2
        states = states[:n]
        h = states[-1].copy() if n else hashlib.sha256()
        view = memoryview(body)
        pos = n * step
        while pos + step <= len(body):
            h.update(view[pos : pos + step])
            pos += step
            states.append(h.copy())
        h.update(view[pos:])
        self._body, self._states = body, states
        return h.hexdigest()


class Serializer:
    """Provider-independent driver; a provider supplies the four hooks."""

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
        self._runs: dict[str, _SectionRun] = {}  # section id -> its previous serialization
        self._body_hash = _PrefixHasher()

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
        """The fragments and blocks of one section: the longest prefix whose item hashes and markers
        match the previous serialization of this section is reused as is; the rest is looked up (or
        built) item by item. The result is the same as building every item afresh: a fragment and a
        block are pure functions of (tokenizer, section, item hash, marked)."""
        items = s.items
        prev = self._runs.get(s.id)
        if prev is not None and prev.items is items and prev.marks == marks and prev.tok == tok:
            return prev  # the very same items (an unchanged system section, the tools): nothing to do
        shas = list(map(_SHA, items))
        common = 0  # items whose hashes match the previous run's, from the start
        if prev is not None and prev.tok == tok:
            n = min(len(prev.shas), len(shas))
            if prev.shas[:n] == shas[:n]:  # compared in C; the usual case between compactions
                common = n
            else:
                common = next(i for i in range(n) if prev.shas[i] != shas[i])
        k = common
        if prev is not None and k and marks != prev.marks:
            k = min(k, min(marks ^ prev.marks))  # a moved marker changes that item's bytes
        if s.kind == SectionKind.HISTORY:
            # Pairing is a left-to-right scan: resume from the state after the previous run's items
            # when they are all still here, else scan from the start.
            if prev is not None and prev.pairing is not None and common == len(prev.shas) and common:
                pairing = _pairing_step(items[common:], set(prev.pairing[0]), set(prev.pairing[1]))
            else:
                pairing = _pairing_step(items, set(), set())
        else:
            pairing = None
        if prev is not None and k > 0:
            frags, segments, blocks, keys = prev.frags[:k], prev.segments[:k], prev.blocks[:k], prev.keys[:k]
        else:
            frags, segments, blocks, keys = [], [], [], []
        cache = self._items
        for i in range(k, len(items)):
            it = items[i]
            mk = i in marks
            key = (tok, s.id, shas[i], mk)
            hit = cache.get(key)
            if hit is None:
                frag, segment = self._item_fragment(s, it, mk)
                # Block identity is the artifact's content hash, not its wire bytes: a moved cache
                # marker changes the bytes but not what the provider has cached.
                hit = (frag, segment, Block(s.id, segment, it.sha, measure.item(it), mk))
                cache[key] = hit
            frags.append(hit[0])
            segments.append(hit[1])
            blocks.append(hit[2])
            keys.append(key)
        run = _SectionRun(
            tok, shas, marks, frags, segments, blocks, keys, pairing, items, sha256_hex("".join(shas))
        )
        self._runs[s.id] = run
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
            "items in previous runs": sum(len(r.keys) for r in self._runs.values()),
        }

    def _prune(self, live: int) -> None:
        """Keep the per-item caches near the size of what recent requests send (see CACHE_SLACK)."""
        if len(self._items) <= max(CACHE_FLOOR, CACHE_SLACK * live):
            return
        keep = {key for run in self._runs.values() for key in run.keys}
        self._items = {key: hit for key, hit in self._items.items() if key in keep}
        self._cache.clear()  # fragments by content: rebuilt on the next miss

    def _item_fragment(self, s: Section, it: SectionItem, mk: bool) -> tuple[bytes, str]:
        if isinstance(it, ToolSchema):
            return self._frag(("t" + it.sha, mk), lambda: self._tool_block(it, mk)), "tools"
        if isinstance(it, Message):
            return self._frag(("m" + it.sha, mk), lambda: self._message_blocks(it, mk)), "messages"
        return self._frag(("s" + it.sha, mk), lambda: self._system_block(text_of(it), mk)), "system"


def result_text(r: ToolResult) -> str:
    return r.content
