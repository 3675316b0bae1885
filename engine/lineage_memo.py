"""Per-lineage scans of a history for Measure (a helper of engine/assembly.py): running token sums and
"the first message with a tool result over a limit", remembered for a history that only grows.

A session's history is a lineage of tuples, each the last one plus what a turn appended, until a
compaction starts a new lineage. A what-if (simulate) builds up to five columns a turn from one
Measure, each its own lineage, and the budget guarantee, cost_aware and spill_large ask these scans of
them every turn. A memo of the few most recent calls let the columns push each other out, and every
turn summed or scanned a whole conversation again (3,000 turns: seconds of a what-if). Here one entry
stands for one lineage: a longer history of it replaces the shorter one, the sums list is extended in
place by what was appended (its values for the earlier items stay what they were, so a caller holding
it reads the same figures), and a scan over a limit resumes where it ended.

An entry holds its history tuple (a prefix check needs it), and so every message of it. A history that
nothing outside the memo holds any more (a lineage a compaction ended: in a replay its messages went to
disk behind the cut) is dropped: an entry whose tuple only it references is let go whenever the memo
changes, so the memo never keeps a conversation alive (tests/test_long_session_scans.py; a replay
stepping to the end of a long recording held +2.5 MB over its second half when six lineages were kept
by recency, tests/test_replay_text_window.py)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from engine.dropped_history import Sums

# Lineages remembered at most: a what-if's five columns, and the raw history beside them.
RECENT_LINEAGES = 6

Items = tuple[Any, ...]

# sys.getrefcount of an entry's tuple when the entry is its only holder: the entry's slot, and the call's
# argument.
_ONLY_HERE = 2


class Lineage:
    """One lineage's remembered scans, for the history `items` (the longest of it asked about so far)."""

    __slots__ = ("items", "sums", "over")

    def __init__(self, items: Items) -> None:
        self.items = items
        # sums[i] is the tokens of items[:i] for i < len(sums) (a prefix: extended when asked, in place).
        self.sums: Sums = [0]
        # limit -> (items scanned, index found or -1): the first over-limit message of items[:scanned].
        self.over: dict[int, tuple[int, int]] = {}


class LineageMemo:
    """The entries, newest first. `starts_with(items, prev)`: Measure.starts_with (remembered prefixes);
    `links`: its verified prefixes (id(items) -> (items, a tuple items starts with)), which hold
    histories too: let go of with the entries (see _release)."""

    def __init__(
        self, starts_with: Callable[[Items, Items], bool], links: dict[int, tuple[Items, Items]] | None = None
    ) -> None:
        self.starts_with = starts_with
        self.entries: list[Lineage] = []
        self.links: dict[int, tuple[Items, Items]] = {} if links is None else links

    def get(self, items: Items) -> Lineage:
        """The entry of `items`: the entry of a history `items` starts with, moved on to `items`, else a
        new one. Its scans cover a prefix of `items` (the caller extends them)."""
        entries = self.entries
        for j, e in enumerate(entries):
            prev = e.items
            if prev is items or self.starts_with(items, prev):
                if j:
                    entries.insert(0, entries.pop(j))
                if prev is not items:
                    e.items = items  # the longer history supersedes its prefix: one entry a lineage
                    del prev
                    self._release()
                return e
        prev = ()  # (no reference left to the last entry's history while releasing)
        e = Lineage(items)
        entries.insert(0, e)
        self._release()
        del entries[RECENT_LINEAGES:]
        return e

    def _release(self) -> None:
        """Let go of every entry whose history nobody else holds (the links first: a link holds its
        history, and so did the entry of a history a link holds, for as long as the link lived)."""
        if self.links:
            release_links(self.links, self.entries)
        if any(sys.getrefcount(e.items) <= _ONLY_HERE for e in self.entries):
            self.entries = [e for e in self.entries if sys.getrefcount(e.items) > _ONLY_HERE]

    def held(self) -> list[Items]:
        return [e.items for e in self.entries]


def release_links(links: dict[int, tuple[Items, Items]], entries: list[Lineage]) -> None:
    """Drop the links (Measure.starts_with's verified prefixes) whose history only these memos hold.

    A link (items, prev) holds both tuples; a history a replay or a what-if let go of stayed alive in
    up to PREFIX_LINKS links (each thousands of messages long) until they were next cleared. A tuple's
    references from the links and the entries are counted: when that is all it has, nothing outside
    the memos can ask about it again, and its links go. Dropping one can leave the tuple it pointed
    to held by nothing else (a chain of turns): repeated until nothing more goes."""
    while links:
        held: dict[int, int] = {}
        for a, b in links.values():
            held[id(a)] = held.get(id(a), 0) + 1
            held[id(b)] = held.get(id(b), 0) + 1
        a = b = ()  # (the loop's names no longer hold the last link's tuples)
        for e in entries:
            held[id(e.items)] = held.get(id(e.items), 0) + 1
        # getrefcount counts the loop's binding and its own argument as well.
        dead = [k for k, (a, _) in links.items() if sys.getrefcount(a) - _IN_LOOP <= held[id(a)]]
        if not dead:
            return
        for k in dead:
            del links[k]


# sys.getrefcount of a link's tuple in release_links' scan beyond the memos' references: the scan's
# binding and the call's argument.
_IN_LOOP = 2
