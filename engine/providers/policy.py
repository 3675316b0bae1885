"""ProviderCachePolicy: what a provider's prompt cache can do, as data the Optimize phase reads."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ProviderCachePolicy:
    name: str
    supports_markers: bool  # explicit breakpoints (Anthropic cache_control, Bedrock cachePoint)
    max_markers: int  # how many breakpoints one request may carry
    global_scope: bool  # can a breakpoint sit at the global/session boundary (cross-session sharing)
    granularity: str  # "block": a marker attaches to a content block
    min_cacheable_tokens: int  # prefixes shorter than this are never cached


ANTHROPIC = ProviderCachePolicy("anthropic", True, 4, True, "block", 1024)
BEDROCK = ProviderCachePolicy("bedrock", True, 4, True, "block", 1024)
OPENAI = ProviderCachePolicy("openai", False, 0, False, "block", 1024)
PREFIX = ProviderCachePolicy("prefix", False, 0, False, "block", 0)

POLICIES = {p.name: p for p in (ANTHROPIC, BEDROCK, OPENAI, PREFIX)}
