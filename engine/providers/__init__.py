"""Provider serializers and cache policies, one module per provider."""

from __future__ import annotations

from engine.errors import ConfigError
from engine.providers import anthropic, bedrock, openai
from engine.providers.base import Block, SerializedRequest, Serializer
from engine.providers.policy import POLICIES, ProviderCachePolicy

PROVIDERS = ("anthropic", "openai", "bedrock", "prefix")
ALIASES = {"deepseek": "openai", "openai-compatible": "openai", "generic": "prefix"}

__all__ = [
    "Block",
    "SerializedRequest",
    "Serializer",
    "ProviderCachePolicy",
    "POLICIES",
    "PROVIDERS",
    "make_serializer",
    "canonical_provider",
]


def canonical_provider(name: str) -> str:
    n = ALIASES.get(name.lower(), name.lower())
    if n not in PROVIDERS:
        raise ConfigError(f"unknown provider {name!r}; choose one of: {', '.join(PROVIDERS)} (or deepseek)")
    return n


def make_serializer(provider: str) -> Serializer:
    p = canonical_provider(provider)
    if p == "anthropic":
        return anthropic.serializer()
    if p == "bedrock":
        return bedrock.serializer()
    if p == "prefix":
        return openai.prefix_serializer()
    return openai.serializer()
