"""The in-flight assembly that Optimize rules transform: ordered sections of typed items.

Sections are immutable; a rule returns a new assembly. `Measure` counts tokens of items with
caching by content hash, and includes the per-message overhead a chat API adds.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import accumulate, islice, repeat
from operator import attrgetter
from typing import Any

from engine.artifacts import (
    Media,
    Message,
    SectionItem,
    SpillReference,
    Text,
    Thinking,
    ToolCall,
    ToolResult,
    ToolSchema,
)
from engine.dropped_history import DroppedSums, Rounds, Sums, dropped_rounds
from engine.history_rounds import _extend_rounds, history_rounds
from engine.lineage_memo import LineageMemo
from engine.tokens import MESSAGE_OVERHEAD_TOKENS, REPLY_PRIMING_TOKENS, TokenCounter
from engine.types import ANCHOR_KINDS, CacheScope, Form, Priority, SectionKind

RECENT_RUNS = 3  # remembered item runs per section id (the full, the sent and a trimmed history)
# Section totals remembered by identity: a turn makes a dozen or so sections. Each entry pins its
# section, and a history section pins a tuple of the whole conversation, so this stays a few turns'
# worth: a thousand entries held hundreds of full-history tuples in a long session.
SECTION_MEMO = 64
# Remembered history splits (Measure.rounds). A build splits the history it sends and, after a trim, the
# trimmed one; a what-if (simulate) builds two to five columns a turn from one Measure, each its own
# lineage of histories that only grow between compactions. Each entry pins one item tuple.
RECENT_ROUNDS = 6
# Verified prefixes (Measure.starts_with): one link per item tuple, to the longest tuple it was found to
# start with. A build checks its history against the previous build's in several memos (section runs,
# running sums, rounds, the remembered cuts and lineage); a what-if builds a few columns a turn. Each
# entry pins two item tuples.
PREFIX_LINKS = 16
# Links followed from a tuple before comparing by value: one a turn, back to a remembered cut's history
# (chosen a turn or two ago).
PREFIX_DEPTH = 4
# Shorter prefixes are compared by value: the comparison in C costs less than following links in Python
# (a sent history within a window is a few hundred items at most; an uncompacted one grows without end).
PREFIX_MIN = 256


@dataclass(frozen=True, init=False)
class Section:
    """One section of the assembled context: its items in order, cache scope, priority and what trimming took out."""
    id: str
    name: str
    kind: SectionKind
    scope: CacheScope
    priority: Priority
    items: tuple[SectionItem, ...]
    form: Form = Form.FULL
    omitted: int = 0  # tokens removed by trimming/clearing/dropping in this turn
    note: str = ""  # why the form is what it is (degraded binder, spill key, ...)

    def __init__(
        self,
        id: str,
        name: str,
        kind: SectionKind,
        scope: CacheScope,
        priority: Priority,
        items: tuple[SectionItem, ...],
        form: Form = Form.FULL,
        omitted: int = 0,
        note: str = "",
    ) -> None:
        # The fields stored one by one, in field order: a frozen dataclass's own __init__ sets each through
        # object.__setattr__ (~2.5 us for the nine, half of it the calls), __dict__.update(...) builds a
        # dict of keywords first (~2x the stores), and every turn makes several sections. Frozen as
        # before: assigning a field still raises.
        d = self.__dict__
        d["id"] = id
        d["name"] = name
        d["kind"] = kind
        d["scope"] = scope
        d["priority"] = priority
        d["items"] = items
        d["form"] = form
        d["omitted"] = omitted
        d["note"] = note

    @property
    def is_anchor(self) -> bool:
        return self.kind in ANCHOR_KINDS

    def with_items(
        self, items: tuple[SectionItem, ...], form: Form | None = None, omitted: int = 0
    ) -> Section:
        new_form = form if form is not None else self.form
        # The constructor directly: dataclasses.replace() re-reads every field by name, and rules call
        # this several times a turn.
        return Section(
            self.id,
            self.name,
            self.kind,
            self.scope,
            self.priority,
            items,
            new_form,
            self.omitted + omitted,
            self.note,
        )


Assembly = tuple[Section, ...]


class Measure:
    """Token counts for items and sections. Message totals are cached by message hash."""

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter
        self._msg: dict[str, int] = {}
        # Section totals by object identity. Sections are immutable and an unchanged one is passed from
        # rule to rule, so a turn sums each section once instead of once per rule. The entry holds the
        # section itself, so its id cannot be reused while cached.
        self._sec: dict[int, tuple[Section, int]] = {}
        self._big: dict[str, int] = {}  # message hash -> tokens of its largest full tool result
        self._primed: tuple[Section | None, int] = (None, 0)
        self._tot: dict[int, tuple[Assembly, int]] = {}  # totals of recent assemblies, by identity
        # Recent sums by section id: (items, total). A history section is the previous one plus what
        # was appended (between compactions), so its total is the previous total plus the new items:
        # a turn sums what is new, not everything it sends. The prefix is compared in C.
        self._runs: dict[str, list[tuple[tuple[SectionItem, ...], int]]] = {}
        # Verified prefixes, by identity (see starts_with): id(items) -> (items, the longest tuple
        # `items` was found to start with). Let go of with the lineages' entries (lineage_memo).
        self._links: dict[int, tuple[tuple[Any, ...], tuple[Any, ...]]] = {}
        # Running sums of item tokens and first_over's scans, one entry per lineage of histories.
        self._lineages = LineageMemo(self.starts_with, self._links)
        # Recent history splits into rounds, newest first: (items, history_rounds(items)).
        self._rounds: list[tuple[tuple[SectionItem, ...], Rounds]] = []
        # Recent history cuts of the budget guarantee, newest first (trim_sections._carried_drop reads
        # and writes them; each holds the raw history it was chosen in).
        self.drops: list[Any] = []
        # Recent placements of the markers rule, newest first (markers._carried reads them, _placed
        # writes them): an append turn carries the last one's markers on the same sections.
        self.placed: list[Any] = []
        # Carried scans of the history by Optimize rules, by scan name, newest first: (items, result)
        # (engine/optimize/history_scans.py reads and writes them).
        self.scans: dict[str, list[tuple[tuple[SectionItem, ...], Any]]] = {}
        # Cleared forms of messages by (message hash, part index): (the message, tokens freed), or
        # (None, 0) for a result too small to clear (engine/optimize/clear_results.py).
        self.cleared: dict[tuple[str, int], tuple[Any, int]] = {}
        # The last history cleared_from recorded, and the one it was cleared from (one slot: a turn
        # clears one history).
        self._cleared_from: tuple[tuple[SectionItem, ...], tuple[SectionItem, ...]] = ((), ())
        # The places cleared there (cleared_from's `at`), None when not given.
        self._cleared_at: list[tuple[int, int]] | None = None
        # The last kept history drop_range made: (kept, the raw history it was cut from, start, end, the
        # first item's token change); one slot, as _cleared_from (engine/dropped_history.py).
        self._dropped: tuple[tuple[SectionItem, ...], tuple[SectionItem, ...], int, int, int] = ((), (), 0, 0, 0)
        # The last cleared history, a message index where it differs from the history it was cleared
        # from, and that history's message there (see starts_with).
        self._differs: tuple[tuple[SectionItem, ...], int, SectionItem | None] = ((), 0, None)
        self.prefix_min = PREFIX_MIN  # (tests set it: 1 follows links for every prefix, a huge one never)

    def starts_with(self, items: tuple[Any, ...], prev: tuple[Any, ...]) -> bool:
        """items[:len(prev)] == prev (a history that only grew since `prev`), remembered.

        Tuples are immutable, so a prefix found once holds for as long as both objects live (each link
        holds them, so their ids are not reused), and prefixes chain: a tuple that starts with one that
        starts with `prev` starts with `prev`. Every memo of a build (section runs, running sums, rounds,
        first_over, the remembered cuts, the policy's lineage) asks whether this build's history starts
        with one an earlier build saw; by value that is an O(n) copy and comparison each time (the
        gates-closed column of a long simulate compares its whole uncompacted conversation several
        times a build). Here the first answer is by value, the later ones follow links."""
        k = len(prev)
        if k > len(items):
            return False
        if items is prev or k == 0:
            return True
        # The ends first (cheap rejections: another column's or a trimmed history nearly always differs
        # at its first or last shared item), identity before `!=` (which runs a dataclass's __eq__).
        x, y = items[k - 1], prev[k - 1]
        if x is not y and x != y:
            return False
        x, y = items[0], prev[0]
        if x is not y and x != y:
            return False
        # A cleared history against a history holding the message it cleared (this turn's raw history
        # against last turn's cleared one, in the rounds memo): the two differ there, known in one
        # lookup. By value they agree up to the first cleared result, most of a long conversation.
        cut, p, was = self._differs
        if (cut is prev or cut is items) and p < k:
            x = items[p] if cut is prev else prev[p]
            if x is was or x == was:
                return False
        if k < self.prefix_min:
            return items[:k] == prev
        links = self._links
        a = items
        for _ in range(PREFIX_DEPTH):
            got = links.get(id(a))
            if got is None or got[0] is not a:
                break
            a = got[1]
            if a is prev:
                return True
            if len(a) < k:
                break
        if items[:k] != prev:
            return False
        got = links.get(id(items))
        if got is None or got[0] is not items or len(got[1]) < k:
            if len(links) >= PREFIX_LINKS:
                links.clear()
            links[id(items)] = (items, prev)
        return True

    def grew(self, items: tuple[Any, ...], prev: tuple[Any, ...]) -> None:
        """Record that `items` starts with `prev`, known from how `items` was made (the pipeline's
        whole history from a log that only appends, read after `prev` was): starts_with then answers
        by the link instead of comparing the whole conversation by value once per new history (wave 1
        and simulate's columns ask it of every turn's history, several times a build)."""
        if len(prev) < self.prefix_min or len(prev) > len(items):
            return
        links = self._links
        got = links.get(id(items))
        if got is not None and got[0] is items and len(got[1]) >= len(prev):
            return
        if len(links) >= PREFIX_LINKS:
            links.clear()
        links[id(items)] = (items, prev)

    def part(self, p: object) -> int:
        c = self.counter
        if isinstance(p, Text):
            return c.count(p.text, p.sha)
        if isinstance(p, ToolResult):
            return c.count(p.content, p.sha) + 4
        if isinstance(p, ToolCall):
            return c.count(p.name + " " + p.arguments, p.sha) + 4
        if isinstance(p, Thinking):
            return c.count(p.text, p.sha)
        if isinstance(p, Media):
            return p.tokens
        if isinstance(p, SpillReference):
            return c.count(p.render(), p.sha)
        if isinstance(p, ToolSchema):
            return c.count(p.name + "\n" + p.description + "\n" + p.parameters_json, p.sha) + 4
        raise TypeError(f"unknown artifact {type(p).__name__}")

    def item(self, it: SectionItem) -> int:
        if isinstance(it, Message):
            n = self._msg.get(it.sha)
            if n is None:
                n = MESSAGE_OVERHEAD_TOKENS
                for p in it.parts:  # a plain loop: a generator is a frame and a resume per part
                    n += self.part(p)
                self._msg[it.sha] = n
            return n
        if isinstance(it, ToolSchema):
            return self.part(it)
        # A system text block is one message-like unit in every provider's accounting.
        return MESSAGE_OVERHEAD_TOKENS + self.part(it)

    def section(self, s: Section) -> int:
        hit = self._sec.get(id(s))
        if hit is not None and hit[0] is s:
            return hit[1]
        if self._primed[0] is s:
            return self._primed[1]
        items = s.items
        n = -1
        runs = self._runs.get(s.id)
        if runs is None:
            runs = self._runs[s.id] = []
        for prev, total in runs:
            k = len(prev)
            if self.starts_with(items, prev):
                item = self.item
                n = total + sum(item(i) for i in items[k:])
                break
        if n < 0:
            n = sum(self.item(i) for i in items)
        self._remember(s, n, runs)
        return n

    def derived(self, s: Section, total: int) -> None:
        """Record the total of a section made from a measured one by an edit whose token change the
        caller knows (the history after dropping rounds: the old total minus the rounds, the task
        message swapped for one carrying the omission marker). Its first item is new, so no recent run
        matches and section() would walk every kept item again: at 10x the gates-closed column's trim
        did that once a turn. `total` must equal what section() sums (tests/test_trim_total.py)."""
        runs = self._runs.get(s.id)
        if runs is None:
            runs = self._runs[s.id] = []
        self._remember(s, total, runs)

    def _remember(self, s: Section, n: int, runs: list[tuple[tuple[SectionItem, ...], int]]) -> None:
        runs.insert(0, (s.items, n))
        del runs[RECENT_RUNS:]
        if len(self._sec) >= SECTION_MEMO:  # a few turns' worth; older sections are garbage anyway
            self._sec.clear()
        self._sec[id(s)] = (s, n)

    def forget(self, messages: Iterable[Message]) -> None:
        """Drop the per-message entries of messages the session moved out of memory (Pipeline.history
        behind the compaction cut): kept, they would grow with every message the session ever saw. A
        message read back later is counted again from its parts (the same figures)."""
        msg, big = self._msg, self._big
        for m in messages:
            msg.pop(m.sha, None)
            big.pop(m.sha, None)

    def cache_sizes(self) -> dict[str, int]:
        """Entries in the per-turn memos, and the longest item tuple they hold (a memo that held the whole
        conversation would pin every message of it, once per entry)."""
        held = [s.items for s, _ in self._sec.values()] + self._lineages.held()
        held += [t for runs in self._runs.values() for t, _ in runs]
        held += [t for t, _ in self._rounds] + [d.items for d in self.drops] + [p.task for p in self.placed]
        held += [t for pair in self._links.values() for t in pair]
        held += [t for memo in self.scans.values() for t, _ in memo] + list(self._cleared_from)
        held += list(self._dropped[:2]) + [self._differs[0]]
        return {
            "section totals": len(self._sec),
            "assembly totals": len(self._tot),
            "verified prefixes": len(self._links),
            "longest item tuple held": max(map(len, held), default=0),
        }

    def cumulative(self, items: tuple[SectionItem, ...]) -> Sums:
        """Running token sums: result[i] is the tokens of items[:i] for i <= len(items), so the tokens of
        any slice are one subtraction. One list per lineage of histories (engine/lineage_memo.py),
        extended in place by what a turn appended: index it, never by its end (it may already be longer,
        by a later history of the lineage). Do not modify the list. A history drop_range kept gets the
        cut one's list read in place (DroppedSums), when that one's is remembered."""
        e = self._lineages.get(items)
        sums = e.sums
        k = len(sums) - 1
        if k < len(items):
            if k == 0 and self._dropped[0] is items:
                derived = self._sums_dropped()
                if derived is not None:
                    e.sums = derived
                    return derived
            if k == 0 and isinstance(sums, list) and all(map(isinstance, items, repeat(Message))):
                try:  # counted messages: their remembered counts, read in C (see items())
                    sums += accumulate(map(self._msg.__getitem__, map(_SHA, items)))
                    return sums
                except KeyError:
                    del sums[1:]
            sums.extend(islice(accumulate(map(self.item, items[k:]), initial=sums[-1]), 1, None))
        return sums

    def first_over(self, items: tuple[SectionItem, ...], limit: int) -> int:
        """Index of the first message in `items` holding a full tool result over `limit` tokens, or
        len(items) when none does. Remembered per lineage of histories (engine/lineage_memo.py): a
        history that only grew since the last scan is scanned from where that one ended."""
        e = self._lineages.get(items)
        start, found = e.over.get(limit, (0, -1))
        if found >= 0:
            return found
        if start == 0:
            was, like = self._cleared_from
            if was is items and items:
                # Clearing only removes full results: no message before like's first holds one over
                # the limit here either.
                start = self.first_over(like, limit)
        n = len(items)
        big = self.largest_result
        for i in range(start, n):
            it = items[i]
            if isinstance(it, Message) and big(it) > limit:
                e.over[limit] = (i + 1, i)
                return i
        e.over[limit] = (n, -1)
        return n

    def rounds(self, items: tuple[SectionItem, ...]) -> Rounds:
        """history_rounds(items), remembered: the same tuple again is one lookup, and a history that
        only grew since a recent split (appended messages, the usual turn between compactions) is
        split from where that one ended, so a turn pays for its new messages, not for the whole
        history. Anything else (an edit, a compaction, another column's history) is split afresh.
        The result is shared: do not modify it."""
        n = len(items)
        memo = self._rounds
        for j, (prev, bounds) in enumerate(memo):
            k = len(prev)
            # By value, not identity: the message closed from pending parts at a build is a new object
            # when it enters the history, and a revision-1 note rides on a new task message every turn
            # (starts_with checks the first and last shared items before the whole prefix).
            if k == 0 or not self.starts_with(items, prev):
                continue
            if k == n:
                if j:
                    memo.insert(0, memo.pop(j))
                return bounds
            out = _extend_rounds(bounds, items, k)
            break
        else:
            got = self._rounds_dropped() if self._dropped[0] is items else None
            out = history_rounds(items) if got is None else got
        memo.insert(0, (items, out))
        del memo[RECENT_ROUNDS:]
        return out

    def dropped_from(
        self, items: tuple[SectionItem, ...], raw: tuple[SectionItem, ...], start: int, end: int, head: int
    ) -> None:
        """Remember that `items` is raw[:start] + raw[end:] (drop_range's kept history: whole rounds
        [start, end) gone, 1 <= start <= end), its first item `head` tokens more than raw[0] and of the same
        role. A fresh split or running sum of `items` is then raw's remembered one with the range taken
        out (engine/dropped_history.py), when raw's is remembered; else it is computed as before."""
        self._dropped = (items, raw, start, end, head)

    def _sums_dropped(self) -> DroppedSums | None:
        _, raw, start, end, head = self._dropped
        n = len(raw)
        for e in self._lineages.entries:  # raw's running sums, if its lineage is remembered this far
            if e.items is raw and len(e.sums) > n:
                return DroppedSums(e.sums, n, start, end, head)
        return None

    def _rounds_dropped(self) -> Rounds | None:
        _, raw, start, end, _ = self._dropped
        for prev, bounds in self._rounds:
            if prev is raw:
                return dropped_rounds(bounds, start, end)
        return None

    def largest_result(self, msg: Message) -> int:
        """Tokens of the largest not-yet-cleared/spilled tool result in `msg` (0 when none), cached by
        message hash: a rule looking for big results skips every other message with one lookup."""
        n = self._big.get(msg.sha)
        if n is None:
            n = 0
            for p in msg.parts:  # a plain loop, as in item()
                if isinstance(p, ToolResult) and p.form == "full":
                    n = max(n, self.part(p))
            self._big[msg.sha] = n
        return n

    def prime(self, s: Section, total: int) -> None:
        """Record a section's total computed elsewhere (the pipeline keeps a running sum of its
        history), so measuring it does not walk every item. `total` must equal what section() sums.
        One slot: a primed section holds the whole conversation, and only this turn's is needed."""
        self._primed = (s, total)

    def items(self, items: Iterable[SectionItem]) -> int:
        seq = items if isinstance(items, (tuple, list)) else tuple(items)
        # Messages counted before are one lookup each, read in C: a dropped range is thousands of
        # messages (wave 1 drops rounds from the whole history every turn). Only messages: another
        # item's hash is not a key of the message counts.
        if all(map(isinstance, seq, repeat(Message))):
            try:
                return sum(map(self._msg.__getitem__, map(_SHA, seq)))
            except KeyError:
                pass
        return sum(self.item(i) for i in seq)

    def cleared_from(
        self,
        items: tuple[SectionItem, ...],
        like: tuple[SectionItem, ...],
        at: tuple[tuple[int, int], ...] | None = None,
    ) -> None:
        """Remember that `items` is `like` with some tool results cleared, item for item (clear_tool_results'
        placeholders): each item has the role of the same item in `like`, and no full tool result that
        `like`'s has not. A split reads only roles, so the next rounds(items) is one lookup instead of a
        split afresh; first_over(items) scans from like's answer, which nothing before it can precede.

        `at`: the (message, part) places cleared, in the order they were (each item of `items` is then
        the item of `like` with those parts cleared, a function of the two). When the last cleared history
        was cleared from a history `like` starts with, at the same places within it, `items` starts with
        that cleared history: linked (grew), so the memos' next question about the pair is not a
        comparison of the whole conversation by value (wave 1 clears the raw history every turn)."""
        if len(items) != len(like):
            raise ValueError("cleared_from: the two histories differ in length")
        if at is not None and self.cleared_before(like, at) is not None:
            self.grew(items, self._cleared_from[0])
        self._cleared_from = (items, like)
        self._cleared_at = None if at is None else list(at)
        memo = self._rounds
        memo.insert(0, (items, self.rounds(like)))
        del memo[RECENT_ROUNDS:]
        if at:  # (after the split: `like` is asked against the last cleared history, see starts_with)
            p = min(i for i, _ in at)
            if items[p] != like[p]:
                self._differs = (items, p, like[p])

    def cleared_before(
        self, like: tuple[SectionItem, ...], at: Sequence[tuple[int, int]]
    ) -> tuple[SectionItem, ...] | None:
        """The last history cleared_from recorded, when `like` cleared at the places `at` starts with it:
        that history was cleared (with places) from a history `like` starts with, at the places of `at`
        within it. Else None. (Cleared forms are a function of the message and the part, so the two
        agree item for item over that prefix; the caller clears only what `like` appended past it.)"""
        was, was_like = self._cleared_from
        done = self._cleared_at
        if not was or done is None:
            return None
        k = len(was_like)
        # `at` is in clearing order, oldest message first: its places within was_like are a prefix of it.
        if len(at) < len(done) or (len(at) > len(done) and at[len(done)][0] < k):
            return None
        if list(at[: len(done)]) != done or not self.starts_with(like, was_like):
            return None
        return was

    def total(self, asm: Assembly) -> int:
        hit = self._tot.get(id(asm))
        if hit is not None and hit[0] is asm:
            return hit[1]
        n = REPLY_PRIMING_TOKENS
        section = self.section
        for s in asm:  # a plain loop: asked several times a turn, a generator costs more
            n += section(s)
        if len(self._tot) >= 16:  # a policy asks about a handful of assemblies per turn
            self._tot.clear()
        self._tot[id(asm)] = (asm, n)
        return n


_SHA = attrgetter("sha")
_KIND = attrgetter("kind")


def omission_marker(tokens: int, what: str = "") -> str:
    suffix = f" ({what})" if what else ""
    return f"[...{tokens} tokens omitted{suffix}...]"


def wire_order(asm: Assembly) -> Assembly:
    """Provider prefix order: tool schemas first (Anthropic and Bedrock put them before the system
    prompt; for OpenAI they are part of the cached prefix too), then sections in assembly order."""
    global _WIRE
    last = _WIRE  # read once: another thread may swap it
    if last[0] is asm:
        return last[1]
    # The kinds read in C, and a session's one tools section moved by slicing: two generators a turn
    # were ~2 us (a new assembly every turn, so the memo above answers only the turn's later askers).
    kinds = list(map(_KIND, asm))
    n = kinds.count(SectionKind.TOOLS)
    if n == 0:
        out = asm
    elif n == 1:
        i = kinds.index(SectionKind.TOOLS)
        out = asm if i == 0 else (asm[i], *asm[:i], *asm[i + 1 :])
    else:
        tools = tuple(s for s in asm if s.kind == SectionKind.TOOLS)
        out = tools + tuple(s for s in asm if s.kind != SectionKind.TOOLS)
    _WIRE = (asm, out)
    return out


# The last assembly put in wire order, and that order: a build asks for the same assembly's order from
# the serializer and the trace (and the markers rule). Assemblies are immutable tuples; the entry holds
# it, so its identity is not reused while remembered.
_WIRE: tuple[Assembly | None, Assembly] = (None, ())
