"""What the cache simulator reads and reports: a call's `Block`s, the `Call` itself and its billing split
(`CallCache`, summed by `totals`), and the error for calls it cannot simulate. The simulator is
engine/sim/cachesim.py, which re-exports these."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from engine.errors import ContextPipeError

# Anthropic's prefix order of a request's segments (a block's `segment`).
SEGMENT_ORDER = {"tools": 0, "system": 1, "messages": 2}


class CacheSimError(ContextPipeError, ValueError):
    """The calls cannot be simulated as given (the provider would reject the request, or bad input)."""


@dataclass(frozen=True)
class Block:
    """One cacheable unit in prefix order (a tool schema, a system block, a message or content block)."""

    sha: str  # content hash; prefix identity is the sequence of shas up to here
    tokens: int
    breakpoint: bool = False  # Anthropic cache_control / Bedrock cachePoint after this block
    ttl: str = "5m"  # "5m" | "1h" for breakpoints
    segment: str = "messages"  # "tools" | "system" | "messages" (Anthropic prefix order)

    def __init__(
        self, sha: str, tokens: int, breakpoint: bool = False, ttl: str = "5m", segment: str = "messages"
    ) -> None:
        # Stored into the instance's dict (see Call.__init__): simulate converts every distinct Block a
        # session sends (~4,000 on the 930-call synthetic session's two columns).
        d = self.__dict__
        d["sha"] = sha
        d["tokens"] = tokens
        d["breakpoint"] = breakpoint
        d["ttl"] = ttl
        d["segment"] = segment


@dataclass(frozen=True)
class Call:
    """One request as the cache simulator sees it: its blocks, when it was sent and what the reply added."""

    blocks: Sequence[Block]
    timestamp: float  # when the request was sent (seconds)
    model: str = ""
    output_tokens: int = 0
    # Identity of the reply as later prompts carry it (normally the sha of the assistant block that
    # the agent appends). DeepSeek caches the generated output too, so a later prompt that starts with
    # this call's prompt + this reply hits it. None: the reply is never matched (e.g. reasoning tokens
    # that are generated but not sent back).
    output_sha: str | None = None
    # When the response finished. DeepSeek units become usable only then; None means "before the next
    # call in the sequence" (an agent loop waits for each reply).
    completed_at: float | None = None
    # How many leading blocks are the previous call's own Block objects (the previous call this
    # simulator stepped), when the caller knows it (simulate builds each request from the last one's
    # blocks: it found this already). Lets the simulator skip comparing the shared prefix again: a call
    # then costs what it adds, not the request's length. None: found by comparing the blocks.
    shared: int | None = field(default=None, compare=False, repr=False)
    # (h, a, m): past the `shared` ones, blocks[shared + h : shared + h + m] are the previous call's
    # blocks [a, a + m), the same objects (a sliding window's stretch; see find_stretch), when the caller
    # knows it (simulate found it on its own Blocks); m == 0: no such stretch worth carrying. Any such
    # stretch gives the same keys and sums: the simulator then does not search for one again. None: found.
    stretch: tuple[int, int, int] | None = field(default=None, compare=False, repr=False)

    def __init__(
        self,
        blocks: Sequence[Block],
        timestamp: float,
        model: str = "",
        output_tokens: int = 0,
        output_sha: str | None = None,
        completed_at: float | None = None,
        shared: int | None = None,
        stretch: tuple[int, int, int] | None = None,
    ) -> None:
        # Stored into the instance's dict one by one (as engine.providers.base.Block): the frozen
        # dataclass's own __init__ calls object.__setattr__ per field (~3x), and simulate makes one a call.
        d = self.__dict__
        d["blocks"] = blocks
        d["timestamp"] = timestamp
        d["model"] = model
        d["output_tokens"] = output_tokens
        d["output_sha"] = output_sha
        d["completed_at"] = completed_at
        d["shared"] = shared
        d["stretch"] = stretch

    @property
    def input_tokens(self) -> int:
        return sum(b.tokens for b in self.blocks)


@dataclass(frozen=True)
class CallCache:
    """Billing split of one call's input. input_tokens == cache_read + cache_write + uncached.

    cache_write counts only tokens billed at a cache-write rate (Anthropic, Bedrock); providers that
    charge no write premium (OpenAI, DeepSeek) report 0 there and bill misses as uncached input.
    cache_write_1h is the part of cache_write billed at the 1-hour rate.
    """

    input_tokens: int
    cache_read: int
    cache_write: int
    uncached: int
    cache_write_1h: int = 0

    def __init__(
        self, input_tokens: int, cache_read: int, cache_write: int, uncached: int, cache_write_1h: int = 0
    ) -> None:
        # Stored into the instance's dict (see Call.__init__): every simulated call makes one, and
        # totals() one more a call.
        d = self.__dict__
        d["input_tokens"] = input_tokens
        d["cache_read"] = cache_read
        d["cache_write"] = cache_write
        d["uncached"] = uncached
        d["cache_write_1h"] = cache_write_1h

    @property
    def hit_rate(self) -> float:
        return self.cache_read / self.input_tokens if self.input_tokens else 0.0

    def __add__(self, other: CallCache) -> CallCache:
        return CallCache(
            self.input_tokens + other.input_tokens,
            self.cache_read + other.cache_read,
            self.cache_write + other.cache_write,
            self.uncached + other.uncached,
            self.cache_write_1h + other.cache_write_1h,
        )


ZERO = CallCache(0, 0, 0, 0, 0)


def totals(results: Iterable[CallCache]) -> CallCache:
    """The sum of `results` (what adding them one by one gives), field by field: one CallCache for the
    whole session instead of one per call added (a frozen dataclass each, ~0.6 ms a 930-call column)."""
    inp = read = write = uncached = write_1h = 0
    for r in results:
        inp += r.input_tokens
        read += r.cache_read
        write += r.cache_write
        uncached += r.uncached
        write_1h += r.cache_write_1h
    return CallCache(inp, read, write, uncached, write_1h)
