"""A section's serialization and how the next request reuses it (`SectionRuns`, a base of Serializer):
`_SectionRun` keeps what the last serialization of a section produced (its items' hashes, fragments,
segments, blocks, cache keys); a history section that grew by appending is extended in place from the
common prefix (`_appended`, `grown`), one whose items shifted is found again by its stretches
(`_shifted`, engine/providers/stretch.py), anything else is serialized item by item (`_section`);
`_laid_out` runs every section of a request through them.
"""

from __future__ import annotations

from dataclasses import dataclass
from operator import attrgetter, itemgetter
from typing import TYPE_CHECKING, Any

from engine.artifacts import Message, SectionItem
from engine.assembly import Assembly, Measure, Section, wire_order
from engine.common_prefix import common_prefix_len
from engine.providers.hex_chain import ChainHasher
from engine.providers.recent_runs import same_run
from engine.providers.serialized_request import Block, Hexes
from engine.providers.stretch import SLICE_MIN, find_stretch
from engine.providers.tool_pairing import (
    _START,
    _info,
    _pair_checked,
    _pair_info,
    _pair_one,
    _pair_state,
    _pair_stretched,
)
from engine.types import SectionKind

if TYPE_CHECKING:
    from engine.optimize.context import Marker
    from engine.providers.tool_pairing import _PairInfo


_SHA = attrgetter("sha")
_TOKENS = attrgetter("tokens")
_SEGMENT, _BLOCK = itemgetter(1), itemgetter(2)  # of an item hit (fragment, segment, block)


@dataclass(slots=True)
class _SectionRun:
    """What the previous serialization produced for one section: its item hashes, which of its items
    carried a marker, and per item the fragment, segment, block and cache key. A history section grows
    by appending between compactions, so the next request reuses the common prefix of these lists and
    serializes only the items after it. Slotted: a lane turn makes one and reads the last one's fields
    cold (fourteen slots are ~3 cache lines; a dict of them ~10)."""

    tok: str
    shas: list[str]
    marks: frozenset[int]
    frags: list[bytes]
    segments: list[str]
    blocks: list[Block]
    keys: list[tuple[str, str, str, bool]]
    items: tuple[SectionItem, ...] = ()
    sha: str = ""  # sha256 of the joined item hashes (the trace's section sha256)
    # The item hashes (what `sha` hashes joined), kept when all are 64 hex digits: (shas, len(items)),
    # not joined (see serialized_request.Hexes); the request's prefix hash is then joined from the
    # sections' (see _prefix_hex).
    hexes: Hexes | None = None
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


class SectionRuns:
    """Serializer's section runs (the state is Serializer's, set in its __init__; the per-item cache,
    `_item_hit` and `_prune`, is Serializer's too)."""

    RUNS: int
    _items: dict[tuple[str, str, str, bool], tuple[bytes, str, Block]]
    _runs: dict[str, list[_SectionRun]]
    _section_hash: ChainHasher
    _pairs: dict[str, _PairInfo]
    _grew: tuple[_SectionRun, _SectionRun, int, int, bytes] | None

    if TYPE_CHECKING:

        def _item_hit(
            self, s: Section, it: SectionItem, key: tuple[str, str, str, bool], measure: Measure
        ) -> tuple[bytes, str, Block]: ...

        def _prune(self, live: int) -> None: ...

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
            (shas, n) if uniform else None,
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
        h = last.hstate
        if h is None:
            hasher = self._section_hash
            joined = "".join(shas)
            if type(hasher) is ChainHasher:
                sha, h = hasher.hexdigest_state(joined)
            else:  # a stand-in that hashes nothing (simulate's block layout: engine/sim/blocks.py)
                sha = hasher.hexdigest(joined)
        else:
            if frags is last.frags:
                last.hstate = None  # taken over with its lists: that run is not extended again
            else:
                h = h.copy()  # that run is kept beside the new one
            h.update(added.encode())  # (64 hex digits an item: ASCII, as the chain hasher encodes them)
            sha = h.hexdigest()
        run = _SectionRun(tok, shas, marks, frags, segments, blocks, keys, items, sha, (shas, n))
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
            run = _SectionRun(
                tok,
                shas,
                frozenset(),
                frags,
                segments,
                blocks,
                keys,
                items,
                self._section_hash.hexdigest("".join(shas)),
                (shas, len(shas)),
            )
            runs = self._runs[sid]
            runs.insert(0, run)
            del runs[self.RUNS :]
            return run
        return None

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
