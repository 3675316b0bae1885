"""The engine's token counts carried in a recording, so a reader does not tokenize the session again.

Re-running a recorded session (simulate) needs a token count for every text the engine counted; a fresh
tokenizer pays ~0.2 s to load and ~0.3 s per MB of text. The agent has already counted all of it: its
`TokenCounter` holds one count per content hash. At close, the recording writer stores that table in a
`@counts` footer frame (engine/recording/cpsession.py); a reader hands it to `CarriedCounter`, which
answers from the table and tokenizes only what the table does not hold (a what-if's trimmed texts).

The table, in the frame's msgpack map:

    {"k": "@counts", "tokenizer": "cl100k_base", "keys": <bytes: 8 bytes per entry>, "counts": [int, ...]}

A key is the first 8 bytes of the content hash the counter keys the count by (all engine content hashes
are hex sha256). Eight bytes, not 32: the table is ~10 bytes an entry instead of ~34, and the chance
that a text the table does not hold shares a prefix with one of its n entries is n / 2^64 per lookup.

A table is trusted only so far:
- the frame's crc and shape (`decode_table` raises `CountTableError`: lengths, types, ranges);
- the tokenizer's name must be the reader's (a table counted by another tokenizer is not used);
- simulate compares what it builds with the recording's own traces: every section whose content hash
  equals the recorded section's must have the recorded token total. A table that disagrees is dropped
  and the session is counted afresh, with a note (engine/sim/simulate.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from itertools import islice
from typing import Any

from engine.errors import ContextPipeError
from engine.tokens import TokenCounter, Tokenizer

K_COUNTS = "@counts"
KEY_BYTES = 8
MAX_COUNT = 1 << 31  # a count above this is not a count the engine made (no text is that long)


class CountTableError(ContextPipeError, ValueError):
    """A recording's token-count table is unreadable or does not fit its recording."""


@dataclass(frozen=True)
class CountTable:
    """Token counts recorded with a session, by content hash, so replay and simulate need not tokenize again."""
    tokenizer: str
    counts: Mapping[bytes, int]  # first KEY_BYTES bytes of the content hash -> tokens

    def __len__(self) -> int:
        return len(self.counts)


def _key(sha: str) -> bytes | None:
    try:
        return bytes.fromhex(sha[: 2 * KEY_BYTES]) if len(sha) == 64 else None
    except ValueError:
        return None


def counter_mark(counter: TokenCounter) -> int:
    """Where a counter's table stands now: `encode_table(counter, since=mark)` leaves out what was counted
    before (a counter shared with other sessions holds their counts too). The counter keeps every count
    (TokenCounter.forget does nothing) until `counter_unmark`: a count dropped meanwhile would shift
    the positions the mark counts by and leave the table without it."""
    counter.recordings += 1
    return len(counter._cache)


def counter_unmark(counter: TokenCounter) -> None:
    """The table a `counter_mark` was taken for is written (or abandoned)."""
    counter.recordings = max(0, counter.recordings - 1)


def encode_table(counter: TokenCounter, since: int = 0) -> dict[str, Any] | None:
    """The `@counts` frame map for the counts `counter` made after `since` under its tokenizer, or None
    when there are none."""
    name = counter.tokenizer.name
    keys: list[bytes] = []
    counts: list[int] = []
    seen: set[bytes] = set()
    # The counter's dict is in insertion order: entries from `since` on are this recording's.
    for (tok, sha), n in islice(counter._cache.items(), since, None):
        k = _key(sha) if tok == name else None
        if k is None or k in seen or not 0 <= n < MAX_COUNT:
            continue
        seen.add(k)
        keys.append(k)
        counts.append(n)
    if not keys:
        return None
    return {"k": K_COUNTS, "tokenizer": name, "keys": b"".join(keys), "counts": counts}


def decode_table(obj: Any) -> CountTable:
    """A `@counts` frame map back into a table; CountTableError if it is not one the writer makes."""
    if not isinstance(obj, dict) or obj.get("k") != K_COUNTS:
        raise CountTableError("the token-count frame is not a @counts map")
    name, keys, counts = obj.get("tokenizer"), obj.get("keys"), obj.get("counts")
    if not isinstance(name, str) or not isinstance(keys, bytes) or not isinstance(counts, list):
        raise CountTableError("the token-count table has missing or mistyped fields")
    if len(keys) != KEY_BYTES * len(counts):
        raise CountTableError(
            f"the token-count table holds {len(keys)} key bytes for {len(counts)} counts "
            f"({KEY_BYTES} bytes each expected)"
        )
    if not all(type(n) is int and 0 <= n < MAX_COUNT for n in counts):
        raise CountTableError("the token-count table holds a count that is not a non-negative int")
    table = {keys[i : i + KEY_BYTES]: n for i, n in zip(range(0, len(keys), KEY_BYTES), counts, strict=True)}
    if len(table) != len(counts):
        raise CountTableError("the token-count table lists a content hash twice")
    return CountTable(name, table)


class CarriedCounter(TokenCounter):
    """A TokenCounter that takes counts from a recording's table before tokenizing.

    Same keys and same answers as a plain counter when the table is right (it holds what that counter
    computed); `carried` counts the answers the table gave, `misses` the texts tokenized."""

    def __init__(self, table: CountTable, tokenizer: Tokenizer | None = None) -> None:
        super().__init__(tokenizer)
        if table.tokenizer != self.tokenizer.name:
            raise CountTableError(
                f"the recording's token counts are {table.tokenizer}'s; this reader counts with "
                f"{self.tokenizer.name}"
            )
        self.table = table
        self.carried = 0

    def _compute(self, text: str, sha: str) -> int:
        k = _key(sha)
        n = self.table.counts.get(k) if k is not None else None
        if n is None:
            return super()._compute(text, sha)  # tokenized (and counted as a miss)
        self.carried += 1
        return n
