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
from dataclasses import dataclass
from itertools import islice
from operator import attrgetter, itemgetter
from typing import TYPE_CHECKING, Any, NamedTuple

from engine.artifacts import (
    Media,
    Message,
    SectionItem,
    SpillReference,
    Text,
    ToolSchema,
)
from engine.assembly import Assembly, Measure, Section, wire_order
from engine.common_prefix import common_prefix_len
from engine.hashing import canonical_json
from engine.providers.hex_chain import ChainHasher
from engine.providers.policy import ProviderCachePolicy
from engine.providers.prefix_hasher import _PrefixHasher
from engine.providers.recent_runs import same_run
from engine.providers.serialized_request import (
    Block,
    DeferredPrefixRequest,
    DigestChain,
    PrefixDigest,
    SerializedRequest,
    _prefix_hex,
)
from engine.providers.stretch import SLICE_MIN, find_stretch
from engine.providers.tool_pairing import (
    _START,
    _info,
    _pair_checked,
    _pair_info,
    _pair_one,
    _pair_state,
    _pair_stretched,
    _PairInfo,
)
from engine.providers.tool_pairing import _PairState as _PairState  # (engine/sim/block_layout.py's)
from engine.types import SectionKind

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


_SHA = attrgetter("sha")
_TOKENS = attrgetter("tokens")
_SEGMENT, _BLOCK = itemgetter(1), itemgetter(2)  # of an item hit (fragment, segment, block)
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
    items: tuple[SectionItem, ...] = ()
    sha: str = ""  # sha256 of the joined item hashes (the trace's section sha256)
    # The item hashes joined (what `sha` hashes), kept when all are 64 hex digits: the request's prefix
    # hash is then a cut of the sections' strings (see _prefix_hex).
    hexes: str | None = None
    where: dict[str, int] | None = None  # item hash -> a position of it (see _index)
    # Read by serialize every request and carried to a run that extends this one in place (see
    # _appended), so a turn does not walk every block of the history for them: the set of `segments`
    # and the sum of the blocks' tokens. None: not known yet (serialize computes and keeps them).
    segset: frozenset[str] | None = None
    tokens: int | None = None
    # The sha256 state after `hexes` (its own: no other run or hasher updates it), kept by a run
    # _appended made so the next turn's run, which extends these hashes, resumes its section hash here:
    # the history's hashes are not searched for in the chain hasher's texts and compared again (~64
    # characters an item, every turn). None: resumed through the chain hasher.
    hstate: Any = None


def _index(run: _SectionRun) -> dict[str, int]:
    """Item hash -> a position of it in the run (built once per run, on first need)."""
    if run.where is None:
        run.where = {sha: j for j, sha in enumerate(run.shas)}
    return run.where


class Serializer:
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

    def _section(
        self, s: Section, marks: frozenset[int], tok: str, measure: Measure, own: bool = False
    ) -> _SectionRun:
        """The fragments and blocks of one section: the longest prefix whose item hashes match one of
        this section's recent serializations (markers permitting) is reused as is; the rest is looked
        up (or built) item by item. The result is the same as building every item afresh: a fragment
        and a block are pure functions of (tokenizer, section, item hash, marked). `own`: see
        _appended."""
        items = s.items
        runs = self._runs.setdefault(s.id, [])
        same = same_run(runs, items, marks, tok)
        if same is not None:
            return same  # the very same items (an unchanged system section, the tools): nothing to do
        if runs and s.kind == SectionKind.HISTORY:
            # Any recent run, not only the newest: simulate interleaves two builds a turn (the what-if
            # and every gate closed), so the run this history extends is usually the one before last.
            n = len(items)
            for j, r in enumerate(runs):
                if 0 < n - len(r.items) <= SLICE_MIN:
                    fast = self._appended(s, j, marks, tok, measure, own)
                    if fast is not None:
                        return fast
            if not marks and len(items) > 2 * SLICE_MIN:
                fast = self._shifted(s, tok, measure)
                if fast is not None:
                    return fast
        shas = list(map(_SHA, items))
        prev: _SectionRun | None = None
        common = 0  # items whose hashes match prev's, from the start
        for r in runs:
            # A run can only beat the best so far if it matches at the best's first mismatch.
            if r.tok != tok:
                continue
            if prev is not None and (common >= min(len(r.shas), len(shas)) or r.shas[common] != shas[common]):
                continue
            c = common_prefix_len(r.shas, shas)  # compared in C
            if prev is None or c > common:
                prev, common = r, c
        k = common
        if prev is not None and k and marks != prev.marks:
            k = min(k, min(marks ^ prev.marks))  # a moved marker changes that item's bytes
        # Tool-call pairing is checked as the items are laid out (history sections only): what is reused
        # from prev passed there, so only the joins with anything new are checked (see _pair_checked).
        hist = s.kind == SectionKind.HISTORY
        memo = self._pairs
        pairing = _pair_state(items, k, memo) if hist else _START
        if prev is not None and k > 0:
            frags, segments, blocks, keys = prev.frags[:k], prev.segments[:k], prev.blocks[:k], prev.keys[:k]
        else:
            frags, segments, blocks, keys = [], [], [], []
        cache = self._items
        sid = s.id
        n = len(items)
        i = k
        # What is left is usually new items (an append) or, after a compaction or in a sliding window,
        # stretches that recent runs of this section also sent, further along: reused as slices, found
        # through each run's hash index (prev's first).
        olds = [prev] + [r for r in runs if r is not prev and r.tok == tok] if prev is not None else []
        if n - i <= SLICE_MIN:
            olds = []
        while i < n:
            m = 0
            for old in olds:
                at = _index(old).get(shas[i])
                if at is None:
                    continue
                m = common_prefix_len(old.shas[at:], shas[i:])
                # A marker changes an item's bytes: the slice stops before any marked item on either side.
                for x in marks:
                    if i <= x < i + m:
                        m = x - i
                for x in old.marks:
                    if at <= x < at + m:
                        m = x - at
                if m > 0:
                    if hist:
                        pairing = _pair_checked(items, i, i + m, pairing, memo)
                    frags += old.frags[at : at + m]
                    segments += old.segments[at : at + m]
                    blocks += old.blocks[at : at + m]
                    keys += old.keys[at : at + m]
                    i += m
                    break
            if m > 0:
                continue
            it = items[i]
            if hist and isinstance(it, Message):
                pairing = _pair_one(_info(it, memo), pairing)
            key = (tok, sid, shas[i], i in marks)
            hit = cache.get(key) or self._item_hit(s, it, key, measure)
            frags.append(hit[0])
            segments.append(hit[1])
            blocks.append(hit[2])
            keys.append(key)
            i += 1
        hexes = "".join(shas)
        uniform = not shas or set(map(len, shas)) == {64}
        run = _SectionRun(
            tok,
            shas,
            marks,
            frags,
            segments,
            blocks,
            keys,
            items,
            self._section_hash.hexdigest(hexes),
            hexes if uniform else None,
        )
        if prev is not None and common == len(prev.shas) and k == common:
            runs.remove(prev)  # the new run extends prev and holds everything it did
        runs.insert(0, run)
        del runs[self.RUNS :]
        return run

    def grown(
        self, s: Section, prev: _SectionRun, marks: frozenset[int], tok: str, measure: Measure
    ) -> _SectionRun:
        """_section(s, marks, tok, measure, own=True) for the express lane's history section, which is
        the last request's (whose run was `prev`) with a few messages appended: when `prev` is still this
        section's most recent run (as the lane's last turn left it), _appended extends it straight
        away. _section would come to the same call after two walks of the section's runs (the first
        looks for the very same items: a new tuple never is); anything else goes through _section."""
        runs = self._runs.get(s.id)
        if runs and runs[0] is prev and 0 < len(s.items) - len(prev.items) <= SLICE_MIN:
            fast = self._appended(s, 0, marks, tok, measure, True)
            if fast is not None:
                return fast
        return self._section(s, marks, tok, measure, True)

    def _appended(
        self, s: Section, j: int, marks: frozenset[int], tok: str, measure: Measure, own: bool = False
    ) -> _SectionRun | None:
        """The history's usual turn between compactions: one of the section's recent runs (runs[j])
        holds the first items of these (the same objects, or equal ones) and a few messages were
        appended. What _section's
        general path computes, without copying or comparing the reused part item by item:

        - no marker moved (OpenAI, DeepSeek, the generic prefix policy have none): the new run takes over
          that run's lists and extends them in place (it drops out of `runs` anyway, as a run the new
          one extends), and its section hash resumes from the run's joined hashes;
        - markers (Anthropic, Bedrock), which move as the history grows (the tail breakpoint is on the
          newest message): the items before the first one whose marking changed are reused, the few
          from there on are written (a moved marker changes an item's bytes); the run is kept beside
          the new one, as the general path keeps it. With `own` (the express lane, whose next turn
          extends the new run) the new run takes over that run's lists too, cut back to the reused
          items, and it drops out of `runs`: five copies of the history's lists a turn fewer (a run is
          a cache: a request that wants the old marking again writes it from the per-item cache).

        None when the turn is not like that (the general path then decides)."""
        runs = self._runs[s.id]
        last = runs[j]
        items = s.items
        old = last.items
        k = len(old)
        n = len(items)
        if (
            last.tok != tok
            or not 0 < k < n
            or n - k > SLICE_MIN
            or last.hexes is None
            or items[:k] != old  # identity first, in C; equal items have equal hashes and fragments
        ):
            return None
        # The first of the reused items whose marking changed: its bytes (and everything after it) are
        # written again. A marker on an appended item changes nothing before it.
        # (A plain loop over the few markers: a generator is a frame and a resume each.)
        d = k
        if marks or last.marks:  # (OpenAI, DeepSeek, the prefix policy: never a marker)
            for x in marks.symmetric_difference(last.marks):
                if x < d:
                    d = x
        if k - d > SLICE_MIN:
            return None
        new = items[d:]
        new_shas = list(map(_SHA, items[k:]))
        if set(map(len, new_shas)) != {64}:
            return None
        memo = self._pairs
        # Pairing checked from the first appended item: those written again (d <= i < k) are that run's
        # own items, checked when it was made, so the scan's state after them is _pair_state's.
        pairing = _pair_state(items, k, memo)
        for it in items[k:]:
            if isinstance(it, Message):
                info = memo.get(it.sha)  # _info(it, memo) in line (a frame fewer a new message)
                if info is None:
                    info = memo[it.sha] = _pair_info(it)
                pairing = _pair_one(info, pairing)
        sid = s.id
        shas_new = last.shas[d:k] + new_shas  # the hashes of items[d:]
        cache = self._items
        # Plain loops, not comprehensions: each of those is a frame of its own, and a turn appends two.
        keys_new: list[tuple[str, str, str, bool]] = []
        hits: list[tuple[bytes, str, Block]] = []
        for at, (it, sha) in enumerate(zip(new, shas_new, strict=True), d):
            key = (tok, sid, sha, at in marks)
            keys_new.append(key)
            hits.append(cache.get(key) or self._item_hit(s, it, key, measure))
        # Nothing raised: only now is a run changed. What the body held of the items written again (their
        # fragments and the commas between them, its last fragment) and their tokens, read first.
        rewritten = sum(map(len, last.frags[d:k])) + (k - 1 - d) if d < k else 0
        was_last = last.frags[k - 1]
        gone = sum(map(_TOKENS, last.blocks[d:k])) if d < k else 0
        if d == k or own:  # the new run extends that one and takes its place
            frags, segments, blocks, keys, shas = last.frags, last.segments, last.blocks, last.keys, last.shas
            if d < k:
                del frags[d:], segments[d:], blocks[d:], keys[d:]
        else:
            frags, segments, blocks, keys = last.frags[:d], last.segments[:d], last.blocks[:d], last.keys[:d]
            shas = last.shas[:]
        for frag, segment, block in hits:
            frags.append(frag)
            segments.append(segment)
            blocks.append(block)
        keys += keys_new
        shas += new_shas
        added = "".join(new_shas)
        hexes = last.hexes + added
        h = last.hstate
        if h is None:
            hasher = self._section_hash
            if type(hasher) is ChainHasher:
                sha, h = hasher.hexdigest_state(hexes)
            else:  # a stand-in that hashes nothing (simulate's block layout: engine/sim/blocks.py)
                sha = hasher.hexdigest(hexes)
        else:
            if frags is last.frags:
                last.hstate = None  # taken over with its lists: that run is not extended again
            else:
                h = h.copy()  # that run is kept beside the new one
            h.update(added.encode())  # (64 hex digits an item: ASCII, as the chain hasher encodes them)
            sha = h.hexdigest()
        run = _SectionRun(tok, shas, marks, frags, segments, blocks, keys, items, sha, hexes)
        run.hstate = h
        self._grew = (run, last, d, rewritten, was_last)
        if frags is last.frags:
            # In place of the run it extends (which gave it its lists), moved to the front as the most
            # recently used, as the general path moves it. Its hash index, if one was built, is taken
            # over too, with the appended items' positions: the same dict _index would build (the last
            # position of a repeated hash), for the few new items instead of all of them. So are its
            # segment set and token sum, with the appended items' (the same sets and sums).
            if last.segset is not None and last.tokens is not None:
                run.segset = last.segset.union(map(_SEGMENT, hits))
                run.tokens = last.tokens - gone + sum(map(_TOKENS, map(_BLOCK, hits)))
            where = last.where
            if where is not None:
                for x, sha in enumerate(new_shas, k):
                    where[sha] = x
                run.where = where
            del runs[j]
            runs.insert(0, run)
        else:
            # Beside the run it came from (kept, as the general path keeps it). Its segment set and token
            # sum from that run's, less the items written again and with the new ones (the same items'
            # blocks have the same tokens and segment): serialize would walk every block for them.
            if last.segset is not None and last.tokens is not None:
                run.segset = last.segset.union(map(_SEGMENT, hits))
                run.tokens = last.tokens - gone + sum(map(_TOKENS, map(_BLOCK, hits)))
            runs.insert(0, run)
            del runs[self.RUNS :]
        return run

    def _shifted(self, s: Section, tok: str, measure: Measure) -> _SectionRun | None:
        """A sliding window's turn (simulate's gates-closed column, a trimmed history): the items are a
        few new ones, then a stretch that ends one of the section's recent runs (the same objects),
        then a few new ones: head + run.items[a:] + tail, head and tail of at most SLICE_MIN items. The
        stretch's hashes, fragments, blocks and keys are taken from that run as slices, and only head
        and tail are looked up: what the general path builds (each is a pure function of tokenizer,
        section, item hash and marking), without reading every hash, joining them again or indexing
        older runs to find the stretch. Markers only where neither side has any (a marker changes an
        item's bytes); None when the turn is not like that (the general path then decides)."""
        items = s.items
        for last in self._runs[s.id]:
            if last.tok != tok or last.marks or last.hexes is None:
                continue
            found = find_stretch(items, last.items)
            if found is None:
                continue
            h, e, a = found
            head, tail = items[:h], items[e:]
            head_shas, tail_shas = list(map(_SHA, head)), list(map(_SHA, tail))
            if any(len(x) != 64 for x in head_shas) or any(len(x) != 64 for x in tail_shas):
                return None
            # Pairing as the general path checks it (raises as it would).
            _pair_stretched(items, h, e, self._pairs)
            sid = s.id
            cache = self._items
            head_keys = [(tok, sid, sha, False) for sha in head_shas]
            tail_keys = [(tok, sid, sha, False) for sha in tail_shas]
            head_hits = [
                cache.get(key) or self._item_hit(s, it, key, measure)
                for it, key in zip(head, head_keys, strict=True)
            ]
            tail_hits = [
                cache.get(key) or self._item_hit(s, it, key, measure)
                for it, key in zip(tail, tail_keys, strict=True)
            ]
            frags = [x[0] for x in head_hits] + last.frags[a:] + [x[0] for x in tail_hits]
            segments = [x[1] for x in head_hits] + last.segments[a:] + [x[1] for x in tail_hits]
            blocks = [x[2] for x in head_hits] + last.blocks[a:] + [x[2] for x in tail_hits]
            keys = head_keys + last.keys[a:] + tail_keys
            shas = head_shas + last.shas[a:] + tail_shas
            hexes = "".join(head_shas) + last.hexes[64 * a :] + "".join(tail_shas)
            run = _SectionRun(
                tok,
                shas,
                frozenset(),
                frags,
                segments,
                blocks,
                keys,
                items,
                self._section_hash.hexdigest(hexes),
                hexes,
            )
            runs = self._runs[sid]
            runs.insert(0, run)
            del runs[self.RUNS :]
            return run
        return None

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

    def _laid_out(
        self, asm: Assembly, markers: tuple[Marker, ...], measure: Measure
    ) -> list[tuple[Section, _SectionRun]]:
        """Each section of `asm` in wire order with its run (markers placed), the per-item caches then
        pruned to what recent runs hold: the part of a request serialize and simulate's block layout
        (engine/sim/blocks.py) share."""
        marked: dict[str, set[int]] = {}
        for mk in markers:
            marked.setdefault(mk.section, set()).add(mk.item)
        tok = measure.counter.tokenizer.name
        out: list[tuple[Section, _SectionRun]] = []
        live = 0
        for s in wire_order(asm):
            got = marked.get(s.id)
            marks = frozenset(i for i in got if 0 <= i < len(s.items)) if got else frozenset()
            run = self._section(s, marks, tok, measure)
            out.append((s, run))
            live += len(run.keys)
        self._prune(live)
        return out

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
