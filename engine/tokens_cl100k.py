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
    try:
        mod = _compiled_module()
        if mod is None:
            return None
        count: Callable[[str], int] = mod.tokenizer_for_encoding("cl100k_base").count
        if any(count(text) != n for text, n in CHECKS):
            return None
        return count
    except Exception:  # any failure to load means: count with tiktoken, never fail the agent
        return None
