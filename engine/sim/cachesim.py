"""Provider prefix-cache simulator: per call, how many input tokens each provider would bill as
cache reads, cache writes and plain (uncached) input.

Input is provider-neutral: a call is a sequence of `Block`s in prefix order (tool schemas, system
blocks, messages), each identified by a content hash. Prefix identity is the chain of hashes up to a
block boundary, so two calls share a cached prefix exactly when they share their leading blocks.
Matching is at block granularity: a block that differs only in its tail counts as a full miss, which is
slightly pessimistic next to providers that match tokens inside a block (OpenAI, DeepSeek).

One `CacheSimulator` models one provider's cache for one account/session; it is stateful, so feeding it
several sessions in time order models cross-session sharing. Everything is deterministic: time comes in
as call timestamps, never from a clock, and probabilistic behaviour is computed as an expectation, never
sampled.

Rules per provider (sources: the providers' public docs; see each class, in engine/sim/anthropic_cache.py,
openai_cache.py and deepseek_cache.py):
- anthropic: `cache_control` breakpoints (max 4), cumulative prefix order tools -> system -> messages,
  ~20-block lookback before each breakpoint, per-model minimum cacheable length, 5m / 1h TTL refreshed
  on every hit, 1h entries must precede 5m ones.
- openai: automatic, prompts >= 1024 tokens, hits are the longest previously seen prefix rounded down to
  1024 + 128k tokens, entries evicted after ~5-10 min idle (default 5 min).
- deepseek: disk cache of "prefix units" written at the end of each request's input and at the end of its
  output (plus detected common prefixes); a request hits a unit only if it contains the whole unit, the
  hit is counted in 64-token multiples, and a unit is usable only after the request that wrote it has
  completed. Calibrated against real usage, see `benchmarks/bench_cachesim_accuracy.py`.
- bedrock: `cachePoint` markers, Anthropic semantics, minimum counted per checkpoint segment.
- none: nothing is cached.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

from engine.providers.policy import anthropic_min, bedrock_min  # one table for the engine and the simulator

# The simulator's pieces each live in the module named for them (calls, key_chain, key_table, unit_index,
# and a module per provider's rules); what callers and tests import from here is re-exported ("X as X").
from engine.sim.anthropic_cache import _AnthropicPolicy, _BedrockPolicy
from engine.sim.cache_policy import _Policy
from engine.sim.calls import SEGMENT_ORDER as SEGMENT_ORDER
from engine.sim.calls import ZERO as ZERO
from engine.sim.calls import Block as Block
from engine.sim.calls import CacheSimError, Call, CallCache
from engine.sim.calls import totals as totals
from engine.sim.deepseek_cache import DEEPSEEK_PERSIST_BY_FINGERPRINT as DEEPSEEK_PERSIST_BY_FINGERPRINT
from engine.sim.deepseek_cache import _DeepSeekPolicy as _DeepSeekPolicy
from engine.sim.deepseek_cache import deepseek_persist_probability as deepseek_persist_probability
from engine.sim.key_chain import _check_order as _check_order
from engine.sim.key_chain import _cumulative as _cumulative
from engine.sim.key_chain import _KeyChain as _KeyChain
from engine.sim.key_table import KeyTable as KeyTable
from engine.sim.key_walk import _agreeing as _agreeing
from engine.sim.key_walk import _chain as _chain
from engine.sim.key_walk import _extend_ids as _extend_ids
from engine.sim.key_walk import _extend_keys as _extend_keys
from engine.sim.key_walk import _prefix_keys as _prefix_keys
from engine.sim.openai_cache import _OpenAIPolicy
from engine.sim.shared_prefix import STRETCH_MIN as STRETCH_MIN
from engine.sim.shared_prefix import find_stretch as find_stretch
from engine.sim.shared_prefix import shared_prefix_len as shared_prefix_len
from engine.sim.unit_index import UnitIndex as UnitIndex

PROVIDERS = ("anthropic", "openai", "deepseek", "bedrock", "none")


def min_cacheable_tokens(provider: str, model: str) -> int:
    """The shortest prefix `provider`'s rules cache for `model` by default (per checkpoint on Bedrock;
    DeepSeek's 64-token unit), as the simulator applies it."""
    p = provider.lower()
    if p == "anthropic":
        return anthropic_min(model)
    if p == "bedrock":
        return bedrock_min(model)
    return {"openai": 1024, "deepseek": 64}.get(p, 0)


_POLICIES: dict[str, type[_Policy]] = {
    "anthropic": _AnthropicPolicy,
    "openai": _OpenAIPolicy,
    "deepseek": _DeepSeekPolicy,
    "bedrock": _BedrockPolicy,
    "none": _Policy,
}


class CacheSimulator:
    """One provider's cache, stateful across the calls of a session (or of several, in time order).

    Options (all optional): anthropic/bedrock `lookback`, `min_cacheable_tokens`; openai
    `min_cacheable_tokens`, `increment`, `ttl_seconds`, `prompt_cache_retention`; deepseek `unit_tokens`,
    `ttl_seconds`, `persist_probability`, `interval_tokens`, `common_prefix_units`.
    """

    def __init__(self, provider: str, model: str = "", **options: Any) -> None:
        p = provider.lower()
        if p not in _POLICIES:
            raise CacheSimError(f"unknown provider {provider!r}; choose one of {', '.join(PROVIDERS)}")
        self.provider = p
        self.model = model
        self.options: dict[str, Any] = dict(options)
        self._policy = _POLICIES[p](model, dict(options))
        # The last call raised: a caller's Call.shared counts from that call, which the simulator may
        # not have taken in (a check failed before it was), so the next call's hint is not used.
        self._raised = False

    def simulate(self, calls: Sequence[Call]) -> list[CallCache]:
        return [self.step(c) for c in calls]

    def step(self, call: Call) -> CallCache:
        if self._raised and (call.shared is not None or call.stretch is not None):
            call = replace(call, shared=None, stretch=None)
        try:
            out = self._policy.step(call)
        except BaseException:
            self._raised = True
            raise
        self._raised = False
        return out


def simulate_session(
    provider: str, calls: Sequence[Call], model: str = "", **options: Any
) -> list[CallCache]:
    """Simulate one session from a cold cache."""
    if not model and calls:
        model = calls[0].model
    return CacheSimulator(provider, model, **options).simulate(calls)


def hit_rate(results: Iterable[CallCache]) -> float:
    t = totals(results)
    return t.hit_rate
