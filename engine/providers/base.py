"""Shared serialization machinery: canonical fragments, cached by content hash, joined into a body.

Each provider module turns one artifact into its wire dict. Fragments are canonical JSON bytes
(sorted keys), cached by (provider, artifact hash, marked), so a steady-state turn serializes only
new content; the body is a byte join in sorted-key order, hence canonical as a whole.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
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
from engine.hashing import canonical_json
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


def check_pairing(history: tuple[SectionItem, ...]) -> None:
    """Every tool result answers a call made in the assistant message right before it, and every
    call (except in the newest message) has its result in the user message right after it."""
    prev_calls: set[str] = set()
    pending: set[str] = set()
    for it in history:
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


Fragment = bytes


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

    def _frag(self, key: tuple[str, bool], make: Callable[[], Any]) -> bytes:
        b = self._cache.get(key)
        if b is None:
            v = make()
            if isinstance(v, list):
                b = b",".join(canonical_json(x) for x in v)
            else:
                b = canonical_json(v)
            self._cache[key] = b
            if len(self._cache) > 50_000:  # bound memory in very long sessions
                self._cache.clear()
                self._cache[key] = b
        return b

    def serialize(
        self, asm: Assembly, markers: tuple[Marker, ...], model: str, max_tokens: int, measure: Measure
    ) -> SerializedRequest:
        marked = {(mk.section, mk.item) for mk in markers}
        system: list[bytes] = []
        tools: list[bytes] = []
        msgs: list[bytes] = []
        blocks: list[Block] = []
        tool_shas: dict[str, str] = {}
        cache = self._items
        tok = measure.counter.tokenizer.name
        for s in wire_order(asm):
            if s.kind == SectionKind.HISTORY:
                check_pairing(s.items)
            for i, it in enumerate(s.items):
                mk = (s.id, i) in marked
                key = (tok, s.id, it.sha, mk)
                hit = cache.get(key)
                if hit is None:
                    frag, segment = self._item_fragment(s, it, mk)
                    # Block identity is the artifact's content hash, not its wire bytes: a moved cache
                    # marker changes the bytes but not what the provider has cached.
                    hit = (frag, segment, Block(s.id, segment, it.sha, measure.item(it), mk))
                    if len(cache) > 50_000:  # bound memory in very long sessions
                        cache.clear()
                    cache[key] = hit
                frag, segment, block = hit
                if segment == "tools":
                    tools.append(frag)
                    assert isinstance(it, ToolSchema)
                    tool_shas[it.name] = it.sha
                elif segment == "system":
                    system.append(frag)
                else:
                    msgs.append(frag)
                blocks.append(block)
        body = self._envelope(model, max_tokens, system, tools, msgs)
        last_marker = max((k for k, b in enumerate(blocks) if b.marker), default=-1)
        if not self.policy.supports_markers:
            # Automatic prefix caching: everything but the newest message can be served from cache.
            last_marker = len(blocks) - 2
        h = hashlib.sha256()
        for b in blocks[: last_marker + 1]:
            h.update(bytes.fromhex(b.sha))
        return SerializedRequest(
            provider=self.policy.name,
            body=body,
            blocks=blocks,
            request_sha256=hashlib.sha256(body).hexdigest(),
            prefix_sha256=h.hexdigest(),
            cacheable_prefix_tokens=sum(b.tokens for b in blocks[: last_marker + 1]),
            tool_shas=tool_shas,
        )

    def _item_fragment(self, s: Section, it: SectionItem, mk: bool) -> tuple[bytes, str]:
        if isinstance(it, ToolSchema):
            return self._frag(("t" + it.sha, mk), lambda: self._tool_block(it, mk)), "tools"
        if isinstance(it, Message):
            return self._frag(("m" + it.sha, mk), lambda: self._message_blocks(it, mk)), "messages"
        return self._frag(("s" + it.sha, mk), lambda: self._system_block(text_of(it), mk)), "system"


def result_text(r: ToolResult) -> str:
    return r.content
