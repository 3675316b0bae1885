"""A request's body from its sections' runs (`RequestBody`, a base of Serializer): `serialize` lays the
sections out (section_runs.py) and `request_of` joins their fragments into the provider's envelope, with
the blocks, markers, section hashes and the prefix hash (at once, or deferred: `PrefixDigest`); a body
that extends the last one by the history's new messages is spliced from it (`_spliced`: the bytes before
the messages' end kept, the new fragments written after them) rather than joined again, which needs
where the last body's messages end (`_messages_end_exact`, `_messages_end_of`, `_messages_end`).
"""

from __future__ import annotations

from itertools import islice
from typing import TYPE_CHECKING, NamedTuple

from engine.artifacts import ToolSchema
from engine.assembly import Assembly, Measure, Section
from engine.providers.section_runs import _TOKENS, SectionRuns, _SectionRun
from engine.providers.serialized_request import (
    Block,
    DeferredPrefixRequest,
    Hexes,
    PrefixDigest,
    SerializedRequest,
    _prefix_hex,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from engine.optimize.context import Marker
    from engine.providers.hex_chain import ChainHasher
    from engine.providers.policy import ProviderCachePolicy
    from engine.providers.prefix_hasher import _PrefixHasher
    from engine.providers.serialized_request import DigestChain


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
    hexes: list[Hexes] | None  # (never written to: each run makes a new list)


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


class RequestBody(SectionRuns):
    """Serializer's request bodies (the state is Serializer's, set in its __init__)."""

    policy: ProviderCachePolicy
    layout: list[tuple[Section, _SectionRun]]
    _envelope: Callable[[str, int, list[bytes], list[bytes], list[bytes]], bytes]
    _body_hash: _PrefixHasher
    _prefix_hash: ChainHasher
    _digests: DigestChain
    _tail: bytes | None
    _body_at: _BodyAt | None

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
