"""OpenAI's automatic prefix cache as the simulator applies it (prompts >= 1024 tokens, hits in 128-token
steps, idle eviction; see engine/sim/cachesim.py)."""

from __future__ import annotations

from typing import Any

from engine.sim.cache_policy import _expire_ordered, _Policy, _visible
from engine.sim.calls import Call, CallCache
from engine.sim.key_chain import (
    _sums,
)
from engine.sim.key_table import Key
from engine.sim.unit_index import _Contained


class _OpenAIPolicy(_Policy):
    """Automatic prefix caching: no markers, no write premium. Every request leaves its prefixes in the
    cache; a later request of >= 1024 tokens reads the longest previously seen prefix, counted as
    1024 + 128k tokens. Idle entries are evicted after `ttl_seconds` (docs: 5-10 minutes, up to an hour
    off-peak; `prompt_cache_retention="24h"` keeps them a day)."""

    name = "openai"

    def __init__(self, model: str, options: dict[str, Any]) -> None:
        super().__init__(model, options)
        self.min_tokens: int = int(options.get("min_cacheable_tokens", 1024))
        self.step_tokens: int = int(options.get("increment", 128))
        retention = options.get("prompt_cache_retention")
        default_ttl = 86400.0 if retention == "24h" else 300.0
        self.ttl: float = float(options.get("ttl_seconds", default_ttl))
        # prefix key -> (last used, available at), in order of last use (see _expire_ordered)
        self.seen: dict[Key, tuple[float, float]] = {}
        # What `_read_certain` found in the last call's prefix, carried to the next call that keeps it.
        self._contained: _Contained | None = None
        self.carry = True  # False: every call scans its whole prefix (the reference the tests compare)

    def step(self, call: Call) -> CallCache:
        keys, raw, base = self._chain.take_raw(call.blocks, False, call.shared, call.stretch)
        cum = _sums(raw, base)
        total = cum[-1]
        now = call.timestamp
        self._clock(now)
        ttl = self.ttl
        _expire_ordered(self.seen, lambda v: now - v[0] > ttl, self.ordered)
        read = 0
        if total >= self.min_tokens:
            for j in range(len(keys) - 1, 0, -1):
                hit = self.seen.get(keys[j])
                if hit is not None and _visible(hit[1], now):
                    lcp = cum[j]
                    if lcp >= self.min_tokens:
                        read = (
                            self.min_tokens + (lcp - self.min_tokens) // self.step_tokens * self.step_tokens
                        )
                    break
        seen = self.seen
        for j in range(1, len(keys)):
            prev = seen.pop(keys[j], None)  # re-inserted at the end: most recently used
            seen[keys[j]] = (now, prev[1] if prev is not None and prev[1] < now else now)
        return CallCache(total, read, 0, total - read)
