"""cl100k_base token counts from GitHub's `bpe-openai` Rust crate, when its Python package is installed.

The same counts as tiktoken's `encode_ordinary` (tests/test_tokens_cl100k.py holds them equal over every
shared trajectory, the synthetic sessions and random text), about 3x faster, and counted without
building a list of token ids. Tokenizing new content was the largest single cost of an engine turn
(~0.8-1x the json.dumps floor of the request; see benchmarks/BENCHMARKS.md, "Engine turn cost").

The package's Python wrapper (`import bpe_openai`) builds tiktoken-style rank tables when it is
imported, over a second of CPU before the first count; its compiled module alone builds the tokenizer
in ~0.04 s, as fast as the engine builds tiktoken's encoder (engine/bpe_ranks.py). So the compiled
module is loaded from the installed package's directory without running the wrapper. Anything unexpected (the package absent, another
layout, a missing function, a count that differs from a known cl100k count) returns None and the
caller counts with tiktoken, as before.

The engine counts with the crate piece by piece (PieceCounts): the crate's own split of a text into
cl100k's pieces, each piece's count remembered, only a new piece counted by the crate.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
from collections.abc import Callable
from typing import Any

PACKAGE = "bpe-openai"
MODULE = "bpe_openai"
# Known cl100k_base counts (tiktoken's): a backend that disagrees on any is not used. They cover the
# split pattern's alternatives: contractions, letters after a non-letter, 1-3 digit runs, punctuation
# with newlines, whitespace runs before text and at the end, and multi-byte characters.
CHECKS: tuple[tuple[str, int], ...] = (
    ("hello world", 2),
    ("I'LL they're 12345 x.\n\n  def f():\n\treturn 0  \n", 18),
    ("naïve café 中文 \U0001f600 ٣٤", 12),
    ("    \n\n   x\r\n", 4),
)


def _bindings_file() -> str | None:
    """Where the installed package's compiled module is, found without importing anything; None if absent."""
    spec = importlib.util.find_spec(MODULE)  # locates the package without importing it
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        for name in sorted(os.listdir(folder)):
            if name.startswith("_bindings.") and name.endswith((".so", ".pyd")):
                return os.path.join(folder, name)
    return None


def installed() -> bool:
    """Whether the crate's compiled module is installed (not loaded, nor checked: rust_counter does that)."""
    try:
        return _bindings_file() is not None
    except Exception:  # as rust_counter: anything unexpected means tiktoken
        return False


def _compiled_module() -> Any:
    """`bpe_openai._bindings` loaded from its file, the package's __init__ not run; None if absent."""
    path = _bindings_file()
    if path is None:
        return None
    full = f"{MODULE}._bindings"
    loader = importlib.machinery.ExtensionFileLoader(full, path)
    mod_spec = importlib.util.spec_from_loader(full, loader)
    if mod_spec is None:
        return None
    mod = importlib.util.module_from_spec(mod_spec)
    loader.exec_module(mod)
    return mod


def rust_counter() -> Callable[[str], int] | None:
    """The crate's cl100k_base count (text -> tokens), or None when it is unavailable or disagrees with
    a known count. It refuses text that is not valid Unicode (a lone surrogate, which tiktoken counts
    after replacing it): the caller falls back to tiktoken for such a text."""
    got = rust_tokenizer()
    return None if got is None else got[0]


def rust_tokenizer() -> tuple[Callable[[str], int], Callable[[str], list[str]]] | None:
    """The crate's count and its split of a text into cl100k's pieces (`pretokenize`), or None as for
    rust_counter. Both refuse text that is not valid Unicode (UnicodeEncodeError)."""
    try:
        mod = _compiled_module()
        if mod is None:
            return None
        tok = mod.tokenizer_for_encoding("cl100k_base")
        count: Callable[[str], int] = tok.count
        if any(count(text) != n for text, n in CHECKS):
            return None
        split: Callable[[str], list[str]] = tok.pretokenize
        return count, split
    except Exception:  # any failure to load means: count with tiktoken, never fail the agent
        return None


# The pieces whose counts PieceCounts remembers: the newest this many, and the generation before them
# (a piece is a few characters: ~100 bytes an entry, ~3 MB at most for both).
PIECE_MEMO = 1 << 14


class PieceCounts:
    """A text's count as the sum of its pieces' counts (the crate's split), each piece's count remembered.

    Why: after a model call the CPU caches are cold, and the crate's count of a turn's new content
    (~1,700 characters, 2-3 texts) walks tables the call evicted: ~150-210 us of a ~650 us cold steady
    turn, ~22-34 us warm (benchmarks/bench_cold_count.py). Its split alone is ~70-80 us cold, and
    ~90% of a turn's pieces were seen in earlier turns (words, indentation, punctuation of the same
    code and tools): those are looked up here, and only a new piece goes through the byte pair merges.
    Measured in the engine's turns (bench_engine.py --ab, cold with --evict and warm): the turns'
    tokenizing ~20% less both ways (warm too: a turn's texts are new to the crate, whose first count
    of a text costs ~3x its second, bench_first_count.py; only a text counted again right away is
    cheaper by the crate). Exact: cl100k's merges never cross a piece, so the sum is the crate's count
    (tests/test_tokens_cl100k.py holds them equal).

    Two generations, as TokenCounter's short-text memo: when the newest fills it becomes the older
    and the one before is dropped; a piece found in the older moves to the newest."""

    def __init__(self, count: Callable[[str], int], split: Callable[[str], list[str]]) -> None:
        self._count = count
        self._split = split
        self.newest: _Generation = _Generation(self)
        self.older: dict[str, int] = {}

    def __call__(self, text: str) -> int:
        # (map over the dict's own lookup, in C: a Python call only for a piece it lacks, __missing__.)
        return sum(map(self.newest.__getitem__, self._split(text)))


class _Generation(dict[str, int]):
    """PieceCounts' newest pieces; a piece it lacks is found in the older generation or counted."""

    __slots__ = ("owner",)

    def __init__(self, owner: PieceCounts) -> None:
        super().__init__()
        self.owner = owner

    def __missing__(self, piece: str) -> int:
        owner = self.owner
        n = owner.older.get(piece)
        if n is None:
            n = owner._count(piece)
        if len(self) < PIECE_MEMO:
            self[piece] = n
        else:  # full: it becomes the older generation (the text being counted reads on from it)
            owner.older = self
            owner.newest = fresh = _Generation(owner)
            fresh[piece] = n
        return n
