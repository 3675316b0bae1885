"""Shared serialization machinery: canonical fragments, cached by content hash, joined into a body
(`Serializer`).

Each provider module turns one artifact into its wire dict. Fragments are canonical JSON bytes
(sorted keys), cached by (provider, artifact hash, marked), so a steady-state turn serializes only
new content; the body is a byte join in sorted-key order, hence canonical as a whole.

Beside it: the request it makes (`serialized_request`: Block, SerializedRequest, PrefixDigest), the
tool-call pairing check (`tool_pairing`) and the body's resumed hash (`prefix_hasher`); their names are
imported here as before.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import islice
from typing import TYPE_CHECKING, Any, NamedTuple

from engine.artifacts import (
    Media,
    Message,
    SectionItem,
    SpillReference,
    Text,
    ToolSchema,
)
from engine.assembly import Assembly, Measure, Section
from engine.hashing import canonical_json
from engine.providers.hex_chain import ChainHasher
from engine.providers.policy import ProviderCachePolicy
from engine.providers.prefix_hasher import _PrefixHasher
from engine.providers.section_runs import _TOKENS, SectionRuns
from engine.providers.section_runs import _SectionRun as _SectionRun
from engine.providers.serialized_request import (
    Block,
    DeferredPrefixRequest,
    DigestChain,
    PrefixDigest,
    SerializedRequest,
    _prefix_hex,
)

# The pairing steps engine/sim/block_layout.py resumes, imported from here as before.
from engine.providers.tool_pairing import _START as _START
from engine.providers.tool_pairing import _info as _info
from engine.providers.tool_pairing import _pair_info as _pair_info
from engine.providers.tool_pairing import _pair_one as _pair_one
from engine.providers.tool_pairing import _pair_state as _pair_state
from engine.providers.tool_pairing import _pair_stretched as _pair_stretched
from engine.providers.tool_pairing import _PairInfo as _PairInfo
from engine.providers.tool_pairing import _PairState as _PairState

if TYPE_CHECKING:
    from engine.optimize.context import Marker


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


_MESSAGES = frozenset(("messages",))
_STAND_IN = b"\x00"  # a message fragment no canonical JSON holds (see Serializer._messages_end_exact)


class _BodyAt(NamedTuple):
    """The last request's body and what Serializer._spliced reads of it."""

    layout: list[tuple[Section, _SectionRun]]
    body: bytes
    model: str
    max_tokens: int
    end: int | None  # where its messages end (None: not known yet)
    before: _Before | None  # request_of's sums over the runs before the grown one (None: not made)


class _Before(NamedTuple):
    """What request_of had summed over a layout's runs before the one at `at` (the express lane's
    history run), when it reached that run: a request spliced from that layout (the same runs before
    `at`, the very objects: _spliced checks them) starts its walk from here at `at`, not from the first
    run (the tools and system runs, unchanged between compactions)."""

    at: int
    blocks: list[Block]  # (copied before it is extended)
    total: int
    last_marker: int
    tail_marked: bool
    tool_shas: dict[str, str]  # (copied: the request's own is written to)
    section_shas: dict[str, str]  # (likewise)
    hexes: list[str] | None  # (never written to: each run makes a new list)


class Serializer(SectionRuns):
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

    def serialize(
        self,
        asm: Assembly,
        markers: tuple[Marker, ...],
        model: str,
        max_tokens: int,
        measure: Measure,
        body: bool = True,
        prefix_hash: bool = True,
    ) -> SerializedRequest:
        """The request for `asm`. With body=False only what the cache simulator and the trace's sections
        need (blocks, section and tool hashes, the cacheable prefix's tokens): the body is left empty and
        neither it nor the prefix is hashed (request_sha256 and prefix_sha256 are ""). simulate builds
        every turn of a session under several settings and reads none of them; a sliding window's body
        is new from its first message on, so hashing it cost ~0.25 ms per 200 KB, every turn.
        prefix_hash=False: the prefix hash is computed when first read (a DeferredPrefixRequest; see
        PrefixDigest), where the blocks' hashes allow it."""
        return self.request_of(self._laid_out(asm, markers, measure), model, max_tokens, body, prefix_hash)

    def request_of(
        self,
        layout: list[tuple[Section, _SectionRun]],
        model: str,
        max_tokens: int,
        body: bool = True,
        prefix_hash: bool = True,
        grown: int = -1,
    ) -> SerializedRequest:
        """The request of a laid-out assembly (each section in wire order with its run): serialize's
        second half, which the express lane (engine/pipeline_express.py) calls with the last layout and the
        history's appended run. `grown`: the index of that run in `layout` (the rest is the last
        request's layout as it was), whose body is then spliced from the last body (see _spliced)."""
        self.layout = layout  # what the express lane carries to the next turn
        was = self._body_at
        spliced = self._spliced(layout, grown, model, max_tokens) if body and grown >= 0 else None
        fill = body and spliced is None  # the envelope's lists are built
        out: dict[str, list[bytes]] = {"system": [], "tools": [], "messages": []}
        got = was.before if spliced is not None and was is not None else None
        walk = layout
        # The grown run, where the sums over the runs before it are kept for the next spliced request.
        at_run = layout[grown][1] if grown >= 0 else None
        before: _Before | None = None
        if got is not None and got.at == grown:
            # A spliced body: the runs before `grown` are the last request's, which summed them.
            before, at_run, walk = got, None, layout[grown:]
            blocks = got.blocks.copy()
            tool_shas = got.tool_shas.copy()
            section_shas = got.section_shas.copy()
            last_marker, tail_marked, hexes, total = got.last_marker, got.tail_marked, got.hexes, got.total
        else:
            blocks = []
            tool_shas = {}
            section_shas = {}
            last_marker = -1
            tail_marked = False  # whether the newest message carries a marker
            hexes = []
            total = 0  # the blocks' tokens
        for s, run in walk:
            if run is at_run:
                before = tuple.__new__(
                    _Before,
                    (
                        grown,
                        blocks.copy(),
                        total,
                        last_marker,
                        tail_marked,
                        tool_shas.copy(),
                        section_shas.copy(),
                        hexes,
                    ),
                )
            if run.marks:
                last_marker = len(blocks) + max(run.marks)
            segs = run.segset
            if segs is None:
                segs = run.segset = frozenset(run.segments)
            n = run.tokens
            if n is None:
                n = run.tokens = sum(map(_TOKENS, run.blocks))
            total += n
            if run.marks and "messages" in segs:
                last_msg = len(run.segments) - 1
                while run.segments[last_msg] != "messages":
                    last_msg -= 1
                tail_marked = last_msg in run.marks
            elif "messages" in segs:
                tail_marked = False
            if fill and len(segs) == 1:
                out[run.segments[0]].extend(run.frags)
            elif fill:
                for frag, seg in zip(run.frags, run.segments, strict=True):
                    out[seg].append(frag)
            if "tools" in segs:
                for it in s.items:
                    if isinstance(it, ToolSchema):
                        tool_shas[it.name] = it.sha
            blocks.extend(run.blocks)
            section_shas[s.id] = run.sha
            if hexes is not None:
                hexes = None if run.hexes is None else [*hexes, run.hexes]
        marked = last_marker  # the last block with a marker (-1: none)
        if not self.policy.supports_markers:
            # Automatic prefix caching: everything but the newest message can be served from cache.
            last_marker = len(blocks) - 2
        # The prefix's length (what blocks[: last_marker + 1] holds), not a copy of it: the prefix is
        # nearly the whole request (a list as long as the history, every turn), and only its tokens and,
        # without the item hashes, its blocks' hashes are read.
        plen = min(max(last_marker + 1, 0), len(blocks))
        # The prefix's tokens: all the blocks' less those after it (a few: the prefix ends at the last
        # marker or before the newest message), or summed when it is the shorter side.
        after = len(blocks) - plen
        if after <= plen:
            prefix_tokens = total - sum(map(_TOKENS, blocks[plen:]))
        else:
            prefix_tokens = sum(map(_TOKENS, islice(blocks, plen)))
        kind = SerializedRequest
        prefix_sha: str | PrefixDigest
        if body:
            if spliced is None:
                data = self._envelope(model, max_tokens, out["system"], out["tools"], out["messages"])
                mark = self._messages_end_of(data, out["messages"])
                base, shared, end = None, 0, None
                last_frag = out["messages"][-1] if out["messages"] else b""
            else:
                data, end, base, shared = spliced
                mark = end
                last_frag = layout[grown][1].frags[-1]
            # (tuple's constructor, in C: the NamedTuple's generated __new__ is a Python frame, every request)
            self._body_at = tuple.__new__(_BodyAt, (layout, data, model, max_tokens, end, before))
            if tail_marked and mark:
                # The tail breakpoint (Anthropic, Bedrock) is on the newest message and moves to the next
                # newest next turn, which rewrites this message without it: the next body repeats this
                # one up to this message's start, not its end. Kept there, the hash state lets it resume
                # with one memcmp instead of searching the checkpoints and re-hashing up to 16 KB.
                mark -= len(last_frag)
            request_sha = self._body_hash.hexdigest(data, mark, base, shared)
            if prefix_hash or hexes is None:
                prefix_sha = self._prefix_hash.hexdigest(
                    _prefix_hex(hexes, blocks[:plen] if hexes is None else plen)
                )
            else:
                prefix_sha, kind = PrefixDigest(hexes, plen, self._digests), DeferredPrefixRequest
        else:
            data, request_sha, prefix_sha = b"", "", ""
            self._body_at = None
        # Positional, in field order (provider, body, blocks, request_sha256, prefix_sha256 (a PrefixDigest:
        # DeferredPrefixRequest's), cacheable_prefix_tokens, tool_shas, section_shas, last_marked).
        return kind(
            self.policy.name,
            data,
            blocks,
            request_sha,
            prefix_sha,  # type: ignore[arg-type]
            prefix_tokens,
            tool_shas,
            section_shas,
            marked,
        )

    def _spliced(
        self, layout: list[tuple[Section, _SectionRun]], at: int, model: str, max_tokens: int
    ) -> tuple[bytes, int, bytes, int] | None:
        """The body of `layout` made from the last request's body, when the two layouts differ only in
        the run at `at`, a history run _appended made from the last layout's run there (its first d
        fragments that run's), whose fragments end the body's messages: (body, where its messages end,
        the last body, how many of its bytes the new one starts with); None otherwise (the envelope
        then joins every fragment).

        A steady turn's body is the last one with a few messages appended (and at Anthropic and Bedrock
        the old tail message written again unmarked): the bytes before the first fragment written again
        and the envelope's tail after the messages (the model, system, tools: a function of the other
        runs, the model and max_tokens, all unchanged) are taken from the last body as two slices, so
        one copy of the body is made, not a list of every fragment joined with its commas, and the body
        hash resumes at the last body's mark without comparing what the splice already knows is shared.
        The same bytes as the envelope's (tests/test_express_splice.py)."""
        b = self._body_at
        grew = self._grew
        if b is None or grew is None or b.model != model or b.max_tokens != max_tokens:
            return None
        was = b.layout
        run = layout[at][1]
        new_run, old, d, rewritten, was_last = grew
        if new_run is not run or len(was) != len(layout) or was[at][1] is not old:
            return None
        for i, pair in enumerate(layout):
            if pair is not was[i] and i != at:
                return None
        # The history's fragments end the messages: every one a message, no message in a run after it.
        segs = run.segset
        if segs is None:
            segs = run.segset = frozenset(run.segments)
        if segs != _MESSAGES or old.segset != _MESSAGES:
            return None
        for _s, r in layout[at + 1 :]:
            if r.segset is None or "messages" in r.segset:
                return None
        prev = b.body
        end = b.end
        k = len(old.items)
        if end is None:
            end = self._messages_end_exact(was, model, max_tokens, prev, was_last)
            if end is None:
                return None
        new = run.frags[d:]
        if not new:
            return None
        view = memoryview(prev)
        # Where the first fragment written again starts (d < k), or where the last one ends (d == k: the
        # appended ones follow it after a comma).
        start = end - rewritten
        # [head, f0, b",", f1, ..., fn, tail], as comma_joined lays them out (a comma after the head when
        # the appended fragments follow the last one).
        parts: list[bytes | memoryview] = [b","] * (2 * len(new) + 1)
        parts[1::2] = new
        parts[0] = view[:start]
        parts[-1] = view[end:]
        if d == k:
            parts.insert(1, b",")
        data = b"".join(parts)
        return data, end + len(data) - len(prev), prev, start

    def _messages_end_exact(
        self, layout: list[tuple[Section, _SectionRun]], model: str, max_tokens: int, body: bytes, last: bytes
    ) -> int | None:
        """Where the messages end in `body` (the body of `layout`, whose last message fragment is `last`):
        the envelope's bytes after the messages depend only on the model, max_tokens, the system and
        tool fragments, so the envelope of those with one stand-in message (a NUL byte: never in JSON)
        gives them exactly. None when the body does not end that way."""
        system: list[bytes] = []
        tools: list[bytes] = []
        for _s, r in layout:
            segs = r.segset if r.segset is not None else frozenset(r.segments)
            if segs == _MESSAGES:
                continue
            for frag, seg in zip(r.frags, r.segments, strict=True):
                if seg == "system":
                    system.append(frag)
                elif seg == "tools":
                    tools.append(frag)
        probe = self._envelope(model, max_tokens, system, tools, [_STAND_IN])
        at = probe.find(_STAND_IN)
        if at < 0 or probe.find(_STAND_IN, at + 1) >= 0:
            return None
        tail = probe[at + len(_STAND_IN) :]
        end = len(body) - len(tail)
        if not body.endswith(tail) or end < len(last) or not body.startswith(last, end - len(last)):
            return None
        return end

    def _messages_end_of(self, body: bytes, msgs: list[bytes]) -> int:
        """_messages_end(body, msgs), found where the last body's was when this body ends with the same
        tail (the model, tools and closing brackets after the messages: the same every turn of a session)
        and its last message fragment lies right before it: two comparisons instead of searching
        backwards over the tail for the fragment (~16,000 instructions a turn). The offset is only where
        the body hash keeps its state for the next body (any offset gives the same digest)."""
        if not msgs:
            return 0
        last, tail = msgs[-1], self._tail
        if tail is not None and body.endswith(tail):
            end = len(body) - len(tail)
            if end >= len(last) and body.startswith(last, end - len(last)):
                return end
        end = _messages_end(body, msgs)
        self._tail = body[end:] if end else None
        return end

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


# How far back from a body's end its last message is looked for (the envelope's tail after the messages:
# the model and tools, or at Anthropic the system prompt and tools).
TAIL_SEARCH = 1 << 17


def _messages_end(body: bytes, msgs: list[bytes]) -> int:
    """Where the body's last message fragment ends (0: no messages, or not found near the end): the next
    request of a session repeats the body up to there and appends, so its hash resumes there. Any
    offset gives the same digest; this one only decides how much the next body re-hashes."""
    if not msgs:
        return 0
    last = msgs[-1]
    at = body.rfind(last, max(0, len(body) - len(last) - TAIL_SEARCH))
    return at + len(last) if at >= 0 else 0
