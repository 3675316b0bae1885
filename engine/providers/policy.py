"""ProviderCachePolicy: what a provider's prompt cache can do, as data the Optimize phase reads."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache


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


# Minimum cacheable prefix per Anthropic model family (prompt-caching docs). Checked in order; the first
# substring found in the model name wins, so the more specific names come first.
ANTHROPIC_MIN_TOKENS: tuple[tuple[str, int], ...] = (
    ("opus-4-5", 4096),
    ("opus-4-6", 4096),
    ("opus-4-7", 4096),
    ("haiku-4-5", 4096),
    ("haiku-3-5", 2048),
    ("3-5-haiku", 2048),
    ("haiku-3", 2048),
    ("3-haiku", 2048),
    ("haiku", 2048),
)
ANTHROPIC_DEFAULT_MIN = 1024  # Sonnet 3.7/4/4.5, Opus 4/4.1

# Bedrock: minimum tokens per cache checkpoint (Bedrock prompt-caching user guide).
BEDROCK_MIN_TOKENS: tuple[tuple[str, int], ...] = (
    ("nova", 1000),
    ("opus-4-5", 4096),
    ("opus-4-6", 4096),
    ("opus-4-7", 4096),
    ("haiku-4-5", 4096),
    ("3-5-haiku", 2048),
    ("haiku-3-5", 2048),
)


def lookup_min(model: str, table: tuple[tuple[str, int], ...], default: int) -> int:
    m = model.lower()
    for needle, n in table:
        if needle in m:
            return n
    return default


@lru_cache(maxsize=64)
def cache_policy(provider: str, model: str) -> ProviderCachePolicy:
    """`provider`'s cache policy with `model`'s own minimum cacheable prefix: Anthropic's Opus 4.5-4.7 and
    Haiku 4.5 cache nothing shorter than 4,096 tokens, so a breakpoint the engine set on a shorter prefix
    would hold one of the request's four slots and cache nothing. Cached: the Pipeline asks every turn."""
    base = POLICIES[provider]
    if provider == "anthropic":
        least = lookup_min(model, ANTHROPIC_MIN_TOKENS, ANTHROPIC_DEFAULT_MIN)
    elif provider == "bedrock":
        least = lookup_min(model, BEDROCK_MIN_TOKENS, ANTHROPIC_DEFAULT_MIN)
    else:
        return base
    return base if least == base.min_cacheable_tokens else replace(base, min_cacheable_tokens=least)
