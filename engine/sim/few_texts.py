"""cl100k_base counts of a few short texts without building tiktoken's encoder.

`cp-inspect simulate` on a recording that carries its token counts tokenizes only what the table lacks.
On an import re-run at its recorded settings that is one short text (the as-sent tool definitions,
which no engine build counts), yet building the encoder for it costs ~0.3 s CPU, a third of the whole
process: tiktoken parses all 100,256 ranks, then builds its tables. Counting one short text needs only
the ranks of the byte pairs in it, so this keeps the rank file's lines as a dict from base64 token to
rank text (one split and one dict, ~0.07 s, nothing decoded) and merges in Python.

The algorithm is tiktoken's (`encode_ordinary`): the same split pattern (engine.bpe_ranks), a piece
that is itself a token is one token (a shortcut: merging reaches every cl100k token), otherwise the adjacent pair with the lowest rank merges first,
the leftmost on a tie, until no pair is a token. Hence the same count; tests/test_sim_few_texts.py
holds it against tiktoken. Past a small budget of characters (a session that needs many texts, where
the real encoder is cheaper per text) or on anything unexpected, it hands over to the real tokenizer.
So it does from the start when the engine's tokenizer would count with the bpe-openai crate and no
rank table file is at hand (engine/sim/rank_table.py): the crate loads as fast as the rank dict here
(~32 against ~35 ms CPU) and counts faster.

With the rank table file (read in ~1-2 ms, its ranks looked up in place) the few texts are cheaper here:
on the 930-turn synthetic session the gates-closed column cuts three tool results of ~7.7k characters,
and each cut asks for the counts of the whole result, its head, its tail, then the cut text (head, a
marker, tail) twice, ~120k characters in all. Counting is splitting into pieces (cl100k's pattern) and
adding each piece's tokens, so a text that starts or ends like a long text counted before (its pieces'
ends and running counts kept: `_Known`) is counted from those: the pieces the shared start surely
splits the same way, the pieces scanned across the seam, and the known pieces from where the scan
meets a piece start of the known text inside the shared end (a scan from a given position is the same
over the same remaining text). See `_seamed` for which pieces of the start are taken as they are.
"""

from __future__ import annotations

import binascii
import re
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from itertools import accumulate
from typing import Any, NamedTuple

from engine.tokens import TiktokenTokenizer, Tokenizer, default_tokenizer

# Characters counted here before handing over to the real encoder. Splitting and merging in Python
# cost ~0.4 us a character on recorded texts (their words repeat: a piece is merged once) and ~1.2 us on
# texts that never repeat, against the ~0.2 s more the encoder takes to build than the rank dict here:
# up to here this is the cheaper one (measured: the 930-turn synthetic session's gates-closed column
# asks for ~114k characters of omission notes and cut tool results at its recorded window, an import
# at its recorded settings for ~130, pydicom-1413 at a 16k window for ~21k).
CHAR_BUDGET = 150_000
# A longer piece (a run of letters with no break, e.g. base64) is merged quadratically here: the encoder.
MAX_PIECE = 64
# Texts at least this long have their pieces kept (the newest KNOWN of them) for texts that share their
# start or end (trim_text's head, tail and cut text), and are remembered whole with their count.
LONG = 512
KNOWN = 4
# A run of whitespace from a position (Python's Unicode \s: every character cl100k's \s matches, and a
# few more, which only makes the seam more cautious).
_WS_RUN = re.compile(r"\s*").match


class _Known(NamedTuple):
    """A long text counted here: where each of its pieces ends, and the tokens up to each end."""

    text: str
    ends: list[int]
    cum: list[int]


# cl100k's split pattern (engine.bpe_ranks.PAT_STR) over ASCII text, in the syntax of the standard
# library's `re` (3.11 has possessive quantifiers): in ASCII, \p{L} is [A-Za-z] and \p{N} is [0-9], and
# with re.ASCII, \s is [ \t\n\v\f\r], the ASCII characters with Unicode's White_Space property that the
# `regex` module's \s matches. tests/test_sim_few_texts.py holds the two splits equal.
ASCII_PAT_STR = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\nA-Za-z0-9]?+[A-Za-z]++|[0-9]{1,3}+| ?[^\sA-Za-z0-9]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)


class FewTextsTokenizer:
    """A Tokenizer with the real one's name and counts, cheaper while it is asked about few short texts."""

    def __init__(self, real: Tokenizer | None = None, budget: int = CHAR_BUDGET) -> None:
        self.real: Tokenizer = real if real is not None else default_tokenizer()
        self.name = self.real.name
        self.budget = budget
        self.counted = 0  # characters counted here so far
        self._ranks: dict[bytes, bytes] | None = None
        self._rank_of: Callable[[bytes], int | None] | None = None  # the rank table's (rank_table.py)
        self._known: list[_Known] = []  # newest last
        self._long: dict[str, int] = {}  # counts of the newest long texts, by the text
        # Tokens per piece already merged: texts repeat their words, so most pieces are looked up, once
        # merged (a piece's tokens do not depend on its neighbours: the split comes first).
        self._pieces: dict[bytes, int] = {}
        self._split: Any = None  # cl100k's pattern (the `regex` module), built for the first non-ASCII text
        self._split_ascii: Any = None
        # Only while the real encoder is not built yet (its `_encode` is set once it is): afterwards it
        # is the cheaper one for every text.
        self._usable = self.real.name == "cl100k_base" and getattr(self.real, "_encode", 1) is None

    def count(self, text: str) -> int:
        if self._usable and self.counted + len(text) <= self.budget:
            got = self._count_here(text)
            if got is not None:
                n, scanned = got
                self.counted += scanned
                return n
        self._usable = False  # from here on the real encoder: it is loaded now, and faster per text
        return self.real.count(text)

    def _load(self) -> bool:
        if self._ranks is not None or self._rank_of is not None:
            return True
        from engine.sim.rank_table import cl100k_rank
        from engine.tokens_cl100k import installed

        rank_of = cl100k_rank()  # the table file: ~1-2 ms, nothing built per rank
        if rank_of is not None:
            self._rank_of = rank_of
            self._split_ascii = re.compile(ASCII_PAT_STR, re.ASCII)
            return True
        if isinstance(self.real, TiktokenTokenizer) and installed():
            # The engine's tokenizer counts with the bpe-openai crate when it is installed
            # (engine/tokens_cl100k.py): it loads in ~20 ms CPU, as the rank dict below builds, and then
            # counts ~20x faster than merging here (the 10x synthetic session's ~114k characters: ~24 ms
            # in all against ~33; pydicom-1413's one text: ~21 against ~23).
            return False
        from engine.bpe_ranks import ranks_file_data

        data = ranks_file_data()  # the checked file tiktoken's encoder would be built from, or None
        if data is None:
            return False
        parts = data.split()
        if len(parts) % 2:
            return False
        pairs = iter(parts)  # token, rank, token, rank...: one pass, no two half-size copies
        self._ranks = dict(zip(pairs, pairs, strict=True))  # even length: checked above
        self._split_ascii = re.compile(ASCII_PAT_STR, re.ASCII)
        return True

    def _pattern(self, text: str) -> Any:
        """The split tiktoken makes, as a compiled pattern. An ASCII text is split by ASCII_PAT_STR (the
        standard library's `re`); the `regex` module (~13 ms CPU to import) only for a text that is not."""
        if text.isascii():
            return self._split_ascii
        if self._split is None:
            import regex

            from engine.bpe_ranks import PAT_STR

            self._split = regex.compile(PAT_STR)
        return self._split

    def _pieces_of(self, text: str) -> list[str]:
        return self._pattern(text).findall(text)  # type: ignore[no-any-return]

    def _tokens_of(self, pieces: list[str]) -> list[int] | None:
        """Each piece's tokens; None for a piece this does not merge (too long, a lone surrogate)."""
        known = self._pieces
        out: list[int] = []
        for s in pieces:
            try:
                p = s.encode("utf-8")
            except UnicodeEncodeError:  # lone surrogates: tiktoken re-encodes them; leave that to it
                return None
            k = known.get(p)
            if k is None:
                if len(p) > MAX_PIECE:
                    return None
                k = known[p] = self._piece_tokens(p)
            out.append(k)
        return out

    def _count_here(self, text: str) -> tuple[int, int] | None:
        """(tokens, characters split here) of `text`, or None: the real tokenizer's to count."""
        if not self._load():
            return None
        if len(text) >= LONG:
            n = self._long.get(text)
            if n is not None:
                return n, 0
            got = self._seamed(text)
            if got is not None:
                self._remember(text, got[0], None)
                return got
        pieces = self._pieces_of(text)
        counts = self._tokens_of(pieces)
        if counts is None:
            return None
        n = sum(counts)
        if len(text) >= LONG:
            ends = list(accumulate(map(len, pieces)))
            # Kept only when the pieces cover the text (the pattern matches every character: a gap
            # would put the known ends off the text's positions).
            self._remember(
                text, n, _Known(text, ends, list(accumulate(counts))) if ends[-1:] == [len(text)] else None
            )
        return n, len(text)

    def _remember(self, text: str, n: int, known: _Known | None) -> None:
        if len(self._long) >= KNOWN:
            del self._long[next(iter(self._long))]
        self._long[text] = n
        if known is not None:
            self._known.append(known)
            del self._known[:-KNOWN]

    def _seamed(self, text: str) -> tuple[int, int] | None:
        """(tokens, characters scanned) of `text` from a known long text it shares its start or end
        with, or None (none does, or a piece across the seam is not merged here).

        The start: a match of the pattern at position p examines at most the characters up to x =
        max(p + 2, the end of the whitespace run from p, the piece's end e): a contraction reads 3
        characters, a whitespace alternative the whole run (and `$` where it ends), any other the
        character that stops its run. When x is before the last shared character (x < P - 1: that
        character and `$` read the same in both), the piece at p is the same in both texts, and so is
        every piece before it (its whitespace run, if it reaches past the earlier piece, is the
        later one's too). So the known pieces are taken up to the last one that passes, and the text
        is scanned from its end. The end: once the scan is inside the shared end (the last S
        characters) at a position that is a piece start of the known text, the rest of the split is
        the known text's from there, and so are its tokens."""
        best: tuple[int, _Known, int, int] | None = None
        for k in self._known:
            p = _common_prefix(k.text, text)
            s = _common_suffix(k.text, text, min(len(k.text), len(text)) - p)
            if best is None or p + s > best[0]:
                best = (p + s, k, p, s)
        if best is None or best[0] < len(text) // 2:
            return None
        _, k, p, s = best
        ends, cum, r = k.ends, k.cum, k.text
        i = bisect_right(ends, p - 2) - 1  # the last known piece ending before the last shared character
        while i >= 0:
            start = ends[i - 1] if i else 0
            run = _WS_RUN(r, start)
            x = max(ends[i], start + 2, run.end() if run is not None else start)
            if x < p - 1:
                break
            i -= 1
        pos = ends[i] if i >= 0 else 0
        n = cum[i] if i >= 0 else 0
        sync = len(text) - s  # from here on the text is the known text's end
        shift = len(r) - len(text)
        scanned: list[str] = []
        at = pos
        for m in self._pattern(text).finditer(text, pos):
            if m.start() != at:
                return None  # a character no alternative matched (none is known): not this way
            if at >= sync:
                j = bisect_left(ends, at + shift)
                if j < len(ends) and ends[j] == at + shift:
                    n += cum[-1] - cum[j]
                    break
            scanned.append(m.group())
            at = m.end()
        else:
            if at != len(text):
                return None  # (as above, at the end)
        counts = self._tokens_of(scanned)
        if counts is None:
            return None
        return n + sum(counts), at - pos

    def _rank(self, b: bytes) -> int | None:
        if self._rank_of is not None:
            return self._rank_of(b)
        assert self._ranks is not None
        r = self._ranks.get(binascii.b2a_base64(b, newline=False))
        return None if r is None else int(r)

    def _piece_tokens(self, piece: bytes) -> int:
        if len(piece) == 1 or self._rank(piece) is not None:
            return 1
        return len(bpe_parts(piece, self._rank))


def bpe_parts(piece: bytes, rank: Any) -> list[bytes]:
    """Byte-pair merging as tiktoken does it: start from single bytes, repeatedly merge the adjacent
    pair whose concatenation has the lowest rank (the leftmost one on a tie) until no adjacent pair is
    a token. `rank(bytes)` is the token's rank or None."""
    parts = [piece[i : i + 1] for i in range(len(piece))]
    pair = [rank(parts[i] + parts[i + 1]) for i in range(len(parts) - 1)]
    while True:
        best = None
        at = -1
        for i, r in enumerate(pair):
            if r is not None and (best is None or r < best):
                best, at = r, i
        if best is None:
            return parts
        parts[at : at + 2] = [parts[at] + parts[at + 1]]
        del pair[at]
        if at < len(parts) - 1:
            pair[at] = rank(parts[at] + parts[at + 1])
        if at > 0:
            pair[at - 1] = rank(parts[at - 1] + parts[at])


def _common_prefix(a: str, b: str) -> int:
    """The length of the longest common start of `a` and `b` (compared in C, by halving)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a.startswith(b[lo:mid], lo):
            lo = mid
        else:
            hi = mid - 1
    return lo


def _common_suffix(a: str, b: str, most: int) -> int:
    """The length of the longest common end of `a` and `b`, at most `most`."""
    lo, hi = 0, max(0, most)
    la, lb = len(a), len(b)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a.endswith(b[lb - mid : lb - lo], 0, la - lo):
            lo = mid
        else:
            hi = mid - 1
    return lo
