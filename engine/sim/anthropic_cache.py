"""Anthropic's prompt cache as the simulator applies it (`cache_control` breakpoints, ~20-block lookback,
per-model minimum, 5m / 1h TTLs), and Bedrock's `cachePoint` variant of it (see engine/sim/cachesim.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from engine.providers.policy import anthropic_min, bedrock_min
from engine.sim.cache_policy import _Policy, _visible
from engine.sim.calls import CacheSimError, Call, CallCache
from engine.sim.key_chain import (
    _sums,
)
from engine.sim.key_table import Key

TTL_SECONDS = {"5m": 300.0, "1h": 3600.0}


@dataclass
class _Entry:
    """A cached prefix at an Anthropic breakpoint: its tokens, TTL and when it expires and became readable."""

    tokens: int
    ttl: float
    expires_at: float
    available_at: float


class _AnthropicPolicy(_Policy):
    """cache_control breakpoints.

    A breakpoint after block i asks the server to cache the prefix blocks[:i+1]. On read, the server
    looks for an entry at the breakpoint and at up to `lookback` (20) block boundaries before it and
    takes the longest one found; the hit is billed as cache_read. Tokens from the hit up to the last
    cacheable breakpoint are written (cache_write, priced by TTL); the rest is plain input. Entries live
    `ttl` after their last use (a hit refreshes them). Prefixes under the model's minimum are neither read
    nor written.
    """

    name = "anthropic"
    max_breakpoints = 4

    def __init__(self, model: str, options: dict[str, Any]) -> None:
        super().__init__(model, options)
        self.lookback: int = int(options.get("lookback", 20))
        self.min_tokens: int = int(options.get("min_cacheable_tokens", self._default_min(model)))
        self.entries: dict[Key, _Entry] = {}

    def _default_min(self, model: str) -> int:
        return anthropic_min(model)

    def _cacheable(self, bps: list[int], cum: Sequence[int]) -> list[int]:
        """Breakpoint boundaries (prefix lengths in blocks) that meet the minimum length."""
        return [j for j in bps if cum[j] >= self.min_tokens]

    def step(self, call: Call) -> CallCache:
        blocks = call.blocks
        keys, raw, base = self._chain.take_raw(blocks, True, call.shared, call.stretch)
        cum = _sums(raw, base)
        total = cum[-1]
        now = call.timestamp
        bps = [i + 1 for i, b in enumerate(blocks) if b.breakpoint]
        if len(bps) > self.max_breakpoints:
            raise CacheSimError(
                f"{len(bps)} cache breakpoints in one request; {self.name} allows at most "
                f"{self.max_breakpoints} (the API rejects the request)"
            )
        seen_5m = False
        for j in bps:
            ttl = blocks[j - 1].ttl
            if ttl not in TTL_SECONDS:
                raise CacheSimError(f"breakpoint ttl {ttl!r} is not one of {', '.join(TTL_SECONDS)}")
            if ttl == "5m":
                seen_5m = True
            elif seen_5m:
                raise CacheSimError("a 1h breakpoint follows a 5m one: longer TTLs must come first")

        # Expired entries go first, so neither reads nor the 20-block search can see them.
        for k in [k for k, e in self.entries.items() if e.expires_at <= now]:
            del self.entries[k]

        live = self._cacheable(bps, cum)
        read = 0
        hit_keys: list[Key] = []
        for j in live:
            for jj in range(j, max(0, j - self.lookback) - 1, -1):
                if jj == 0:
                    break
                e = self.entries.get(keys[jj])
                if e is not None and _visible(e.available_at, now):
                    hit_keys.append(keys[jj])
                    read = max(read, cum[jj])
                    break
        for k in hit_keys:  # a hit refreshes the entry's lifetime at no cost
            e = self.entries[k]
            e.expires_at = now + e.ttl

        write = write_1h = 0
        if live:
            last = cum[live[-1]]
            write = max(0, last - read)
            last_1h = max((cum[j] for j in live if blocks[j - 1].ttl == "1h"), default=0)
            write_1h = max(0, min(last_1h, last) - read)
            for j in live:
                life = TTL_SECONDS[blocks[j - 1].ttl]
                e = self.entries.get(keys[j])
                if e is not None:
                    e.ttl = max(e.ttl, life)
                    e.expires_at = max(e.expires_at, now + life)
                else:
                    self.entries[keys[j]] = _Entry(cum[j], life, now + life, now)
        uncached = total - read - write
        return CallCache(total, read, write, uncached, write_1h)


class _BedrockPolicy(_AnthropicPolicy):
    """cachePoint markers: Anthropic semantics, but the minimum applies per checkpoint segment (the
    second checkpoint needs `min` more tokens after the first), and Nova models have no automatic
    lookback (Bedrock's ~20-block "simplified" checking is for Claude)."""

    name = "bedrock"

    def __init__(self, model: str, options: dict[str, Any]) -> None:
        if "nova" in model.lower():
            options = {"lookback": 0, **options}
        super().__init__(model, options)

    def _default_min(self, model: str) -> int:
        return bedrock_min(model)

    def _cacheable(self, bps: list[int], cum: Sequence[int]) -> list[int]:
        out: list[int] = []
        prev = 0
        for j in bps:
            if cum[j] - prev >= self.min_tokens:
                out.append(j)
                prev = cum[j]
        return out
