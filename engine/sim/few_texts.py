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
So it does from the start when the engine's tokenizer would count with the bpe-openai crate: that one
loads as fast as the rank dict here and counts faster.
"""

from __future__ import annotations

import binascii
import re
from typing import Any

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
        # Tokens per piece already merged: texts repeat their words, so most pieces are looked up, once
        # merged (a piece's tokens do not depend on its neighbours: the split comes first).
        self._pieces: dict[bytes, int] = {}
        self._split: Any = None  # cl100k's split (the `regex` module), built for the first non-ASCII text
        self._split_ascii: Any = None
        # Only while the real encoder is not built yet (its `_encode` is set once it is): afterwards it
        # is the cheaper one for every text.
        self._usable = self.real.name == "cl100k_base" and getattr(self.real, "_encode", 1) is None

    def count(self, text: str) -> int:
        if self._usable and self.counted + len(text) <= self.budget:
            n = self._count_here(text)
            if n is not None:
                self.counted += len(text)
                return n
        self._usable = False  # from here on the real encoder: it is loaded now, and faster per text
        return self.real.count(text)

    def _load(self) -> bool:
        if self._ranks is not None:
            return True
        from engine.tokens_cl100k import installed

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
        self._split_ascii = re.compile(ASCII_PAT_STR, re.ASCII).findall
        return True

    def _pieces_of(self, text: str) -> list[str]:
        """The split tiktoken makes. An ASCII text is split by ASCII_PAT_STR (the standard library's
        `re`); the `regex` module (~13 ms CPU to import) only for a text that is not."""
        if text.isascii():
            return self._split_ascii(text)  # type: ignore[no-any-return]
        if self._split is None:
            import regex

            from engine.bpe_ranks import PAT_STR

            self._split = regex.compile(PAT_STR).findall
        return self._split(text)  # type: ignore[no-any-return]

    def _count_here(self, text: str) -> int | None:
        if not self._load():
            return None
        try:
            pieces = [p.encode("utf-8") for p in self._pieces_of(text)]
        except UnicodeEncodeError:  # lone surrogates: tiktoken re-encodes them; leave that to it
            return None
        if pieces and max(map(len, pieces)) > MAX_PIECE:
            return None
        known = self._pieces
        n = 0
        for p in pieces:
            k = known.get(p)
            if k is None:
                k = known[p] = self._piece_tokens(p)
            n += k
        return n

    def _rank(self, b: bytes) -> int | None:
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
