"""simulate's Blocks of a request, section by section, as the provider serializer lays them out.

`Serializer._laid_out` (engine/providers/base.py) keeps, per section run, six parallel lists (fragments,
segments, Blocks, cache keys, item hashes and their joined string) for the request body, the trace's
section hashes and the prefix hash; simulate reads only the Blocks (~60 us a layout, two layouts a turn:
~115 ms of a 930-turn simulate). This lays out the same Blocks keeping only them: a Block is a pure
function of (tokenizer, section, item hash, marked) (`Block(section, segment, sha, tokens, marker)`,
the segment by the item's kind), so a Block list reused from an earlier request for the same items is
the one a fresh layout makes. The same shapes are reused as there: a section whose items are a recent
run's (system, tools), a history that extends a recent run by a few items (between compactions), and a
sliding window (a few new items, a stretch that ends a recent run, a few new items); anything else is
laid out item by item.

The history's tool-call pairing is checked as the provider's layout checks it (the same helpers, the
same error for the same request): a reused stretch passed in the run it comes from, so only its joins
are checked. tests/test_sim_block_layout.py holds every layout to the provider serializer's on random
request sequences.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.artifacts import Message, ToolSchema
from engine.assembly import Assembly, Measure, Section, SectionItem, wire_order
from engine.providers.base import (
    _START,
    CACHE_FLOOR,
    CACHE_SLACK,
    Block,
    Serializer,
    _info,
    _pair_info,
    _pair_one,
    _pair_state,
    _pair_stretched,
    _PairInfo,
    _PairState,
)
from engine.providers.recent_runs import same_run
from engine.providers.stretch import SLICE_MIN, find_stretch
from engine.types import SectionKind

if TYPE_CHECKING:
    from engine.optimize.context import Marker

_NO_MARKS: frozenset[int] = frozenset()
RUNS = Serializer.RUNS  # runs kept per section: one per interleaved sequence of requests, as there


class _Run:
    """One earlier layout of a section: its items, markers and Blocks (its own list: every caller gets
    a copy, so a run extended by the next request's append is changed in place), and the pairing scan's
    state after its items (a history's; they passed), which a run extending it starts from."""

    __slots__ = ("tok", "items", "marks", "blocks", "state", "own")

    def __init__(
        self,
        tok: str,
        items: tuple[SectionItem, ...],
        marks: frozenset[int],
        blocks: list[Block],
        state: _PairState = _START,
        own: _Own = None,
    ) -> None:
        self.tok, self.items, self.marks, self.blocks, self.state = tok, items, marks, blocks, state
        self.own = own  # (log, n): items[:n] are the log's own messages [0, n) (BlockLayout.sections)


# (log, n): a history section's first n items are the log's own messages [0, n), the very objects, the log
# only appending (SimBuilt.log_own); None: not known.
_Own = tuple[object, int] | None


def _known_same(was: _Own, now: _Own) -> int:
    """How many first items of two histories are known to be the same objects without comparing them:
    both the same append-only log's own messages, as far as the earlier one's were (0: none known)."""
    if was is None or now is None or was[0] is not now[0] or was[1] > now[1]:
        return 0
    return was[1]


def _segment(it: SectionItem) -> str:
    # As Serializer._item_hit / _item_fragment name an item's segment.
    if isinstance(it, Message):
        return "messages"
    return "tools" if isinstance(it, ToolSchema) else "system"


class BlockLayout:
    """The Blocks of each section of a request, in wire order (see module doc)."""

    def __init__(self) -> None:
        self._runs: dict[str, list[_Run]] = {}  # section id -> recent runs, most recently used first
        self._blocks: dict[tuple[str, str, str, bool], Block] = {}  # (tokenizer, section, hash, marked)
        self._pairs: dict[str, _PairInfo] = {}  # message hash -> what the pairing check reads of it
        self._kept = 0  # Block cache entries left by the last prune
        self._own: _Own = None  # the history's, for the sections() call under way

    def sections(
        self, asm: Assembly, markers: tuple[Marker, ...], measure: Measure, own: _Own = None
    ) -> list[tuple[Section, list[Block]]]:
        """Each section of `asm` in wire order with its Blocks (the layout's own list: not to be changed).

        `own` (log, n): the history section's first n items are `log`'s own messages [0, n), the log
        only appending (the build pass's whole-conversation build: SimBuilt.log_own). A history laid out
        so is then known to extend an earlier one laid out so as far as that one's log part went, and
        only the rest is compared (the whole conversation's prefix compared every turn, in C but
        O(session) a turn, was ~0.09 s of a 3,000-turn what-if)."""
        tok = measure.counter.tokenizer.name
        self._own = own
        out: list[tuple[Section, list[Block]]] = []
        live = 0
        if not markers:  # (OpenAI, DeepSeek, the prefix policy: never a marker)
            for s in wire_order(asm):
                blocks = self._section(s, _NO_MARKS, tok, measure)
                out.append((s, blocks))
                live += len(blocks)
        else:
            marked: dict[str, set[int]] = {}
            for mk in markers:
                marked.setdefault(mk.section, set()).add(mk.item)
            for s in wire_order(asm):
                got = marked.get(s.id)
                marks = frozenset(i for i in got if 0 <= i < len(s.items)) if got else _NO_MARKS
                blocks = self._section(s, marks, tok, measure)
                out.append((s, blocks))
                live += len(blocks)
        self._own = None
        if len(self._blocks) > max(CACHE_FLOOR, CACHE_SLACK * live, 2 * self._kept):
            self._prune()
        return out

    def _prune(self) -> None:
        """Keep the Block cache to what recent runs hold (as the serializer prunes its item cache)."""
        keep = {id(b) for runs in self._runs.values() for run in runs for b in run.blocks}
        self._blocks = {k: b for k, b in self._blocks.items() if id(b) in keep}
        self._kept = len(self._blocks)
        self._pairs.clear()

    def _block(self, s: Section, it: SectionItem, key: tuple[str, str, str, bool], measure: Measure) -> Block:
        b = self._blocks.get(key)
        if b is None:
            b = self._blocks[key] = Block(s.id, _segment(it), it.sha, measure.item(it), key[3])
        return b

    def _section(self, s: Section, marks: frozenset[int], tok: str, measure: Measure) -> list[Block]:
        items = s.items
        runs = self._runs.setdefault(s.id, [])
        same = same_run(runs, items, marks, tok)
        if same is not None:
            return same.blocks  # the very same items (an unchanged system section, the tools)
        hist = s.kind == SectionKind.HISTORY
        if runs and hist:
            n = len(items)
            for j, r in enumerate(runs):
                if 0 < n - len(r.items) <= SLICE_MIN:
                    got = self._appended(s, j, marks, tok, measure)
                    if got is not None:
                        return got
            if not marks and n > 2 * SLICE_MIN:
                got = self._shifted(s, tok, measure)
                if got is not None:
                    return got
        # Item by item; the history's pairing scanned whole (what any reuse above checks in part).
        memo = self._pairs
        state = _START
        sid = s.id
        blocks: list[Block] = []
        cache = self._blocks
        for i, it in enumerate(items):
            if hist and isinstance(it, Message):
                state = _pair_one(_info(it, memo), state)
            key = (tok, sid, it.sha, i in marks)
            blocks.append(cache.get(key) or self._block(s, it, key, measure))
        runs.insert(0, _Run(tok, items, marks, blocks, state, self._own if hist else None))
        del runs[RUNS:]
        return blocks

    def _appended(
        self, s: Section, j: int, marks: frozenset[int], tok: str, measure: Measure
    ) -> list[Block] | None:
        """runs[j]'s items with a few appended (Serializer._appended's shape): its Blocks up to the first
        item whose marking changed, then the rest looked up. None when the turn is not like that."""
        runs = self._runs[s.id]
        last = runs[j]
        items = s.items
        old = last.items
        k = len(old)
        n = len(items)
        if last.tok != tok or not 0 < k < n or n - k > SLICE_MIN:
            return None
        own = self._own  # (a history's: only histories reach here)
        b = _known_same(last.own, own)  # items[:b] is old[:b]; the rest compared (all of it when b is 0)
        if items[b:k] != old[b:]:
            return None
        d = k
        if marks or last.marks:
            for x in marks.symmetric_difference(last.marks):
                if x < d:
                    d = x
        if k - d > SLICE_MIN:
            return None
        memo = self._pairs
        # The scan's state after items[:d]: the run's own when nothing of it is written again.
        state = last.state if d == k else _pair_state(items, d, memo)
        for it in items[d:]:
            if isinstance(it, Message):
                info = memo.get(it.sha)  # _info(it, memo) in line: a frame fewer a new message
                if info is None:
                    info = memo[it.sha] = _pair_info(it)
                state = _pair_one(info, state)
        sid = s.id
        cache = self._blocks
        new: list[Block] = []
        for at in range(d, n):
            it = items[at]
            key = (tok, sid, it.sha, at in marks)
            new.append(cache.get(key) or self._block(s, it, key, measure))
        if d == k:
            # Extends that run, which it replaces (its list is this layout's only: callers copy).
            blocks = last.blocks
            blocks += new
            del runs[j]
            runs.insert(0, _Run(tok, items, marks, blocks, state, own))
            return blocks
        blocks = last.blocks[:d]
        blocks += new
        runs.insert(0, _Run(tok, items, marks, blocks, state, own))
        del runs[RUNS:]
        return blocks

    def _shifted(self, s: Section, tok: str, measure: Measure) -> list[Block] | None:
        """A sliding window (Serializer._shifted's shape): head + run.items[a:] + tail, head and tail of
        at most SLICE_MIN items, no markers on either side. None when the turn is not like that."""
        items = s.items
        for last in self._runs[s.id]:
            if last.tok != tok or last.marks:
                continue
            found = find_stretch(items, last.items)
            if found is None:
                continue
            h, e, a = found
            state = _pair_stretched(items, h, e, self._pairs)
            sid = s.id
            cache = self._blocks
            blocks: list[Block] = []
            for it in items[:h]:
                key = (tok, sid, it.sha, False)
                blocks.append(cache.get(key) or self._block(s, it, key, measure))
            blocks += last.blocks[a:]
            for it in items[e:]:
                key = (tok, sid, it.sha, False)
                blocks.append(cache.get(key) or self._block(s, it, key, measure))
            runs = self._runs[sid]
            runs.insert(0, _Run(tok, items, _NO_MARKS, blocks, state, self._own))
            del runs[RUNS:]
            return blocks
        return None
