"""Model names as routers and clouds spell them: one normalizer (engine.providers.policy.model_name /
model_family) for the engine's minimum cacheable prefix and the simulator's price table.

The minimum was matched by substring ('opus-4-5' in the name), so OpenRouter's dotted
`anthropic/claude-opus-4.5` got the 1,024-token default (the engine set breakpoints on prefixes Opus 4.5
never caches, each holding one of four slots), and a Haiku spelled `claude-haiku-4.5` got the old Haiku's
2,048. Figures: Anthropic's prompt-caching docs, "Cache limitations"
(https://platform.claude.com/docs/en/build-with-claude/prompt-caching, read 2026-12-04)."""

from __future__ import annotations

import pytest

from engine.providers.policy import cache_policy, model_family
from engine.sim.cachesim import min_cacheable_tokens
from engine.sim.pricing import load_prices

# spelling, its family, Anthropic's minimum, Bedrock's minimum, the price row (None: not priced)
CASES: list[tuple[str, str, int, int, str | None]] = [
    # Anthropic's own ids and aliases
    ("claude-opus-4-5", "claude-opus-4-5", 4096, 4096, "claude-opus-4-5"),
    ("claude-opus-4-5-20251101", "claude-opus-4-5", 4096, 4096, "claude-opus-4-5"),
    ("claude-3-5-haiku-latest", "claude-haiku-3-5", 2048, 2048, "claude-3-5-haiku"),
    ("claude-3-5-haiku-20241022", "claude-haiku-3-5", 2048, 2048, "claude-3-5-haiku"),
    ("claude-3-haiku-20240307", "claude-haiku-3", 2048, 1024, None),
    ("claude-sonnet-4-5", "claude-sonnet-4-5", 1024, 1024, "claude-sonnet-4-5"),
    ("claude-3-7-sonnet-latest", "claude-sonnet-3-7", 1024, 1024, "claude-3-7-sonnet"),
    ("claude-opus-4-7", "claude-opus-4-7", 2048, 2048, "claude-opus-4-7"),  # 4,096 in an older edition
    ("claude-opus-4-6", "claude-opus-4-6", 4096, 4096, "claude-opus-4-6"),
    ("claude-opus-4-1-20250805", "claude-opus-4-1", 1024, 1024, "claude-opus-4-1"),
    ("claude-opus-5", "claude-opus-5", 512, 1024, None),
    ("claude-opus-5-5", "claude-opus-5-5", 1024, 1024, None),  # not Opus 5: the docs give no figure
    # OpenRouter (dotted versions, a vendor path, a :variant)
    ("anthropic/claude-opus-4.5", "claude-opus-4-5", 4096, 4096, "claude-opus-4-5"),
    ("claude-opus-4.5", "claude-opus-4-5", 4096, 4096, "claude-opus-4-5"),
    ("anthropic/claude-haiku-4.5", "claude-haiku-4-5", 4096, 4096, "claude-haiku-4-5"),
    ("anthropic/claude-sonnet-4.5:thinking", "claude-sonnet-4-5", 1024, 1024, "claude-sonnet-4-5"),
    ("anthropic/claude-opus-4.7", "claude-opus-4-7", 2048, 2048, "claude-opus-4-7"),
    ("anthropic/claude-3.5-haiku", "claude-haiku-3-5", 2048, 2048, "claude-3-5-haiku"),
    # Vertex AI (MODEL@DATE, or the publisher path)
    ("claude-opus-4-5@20251101", "claude-opus-4-5", 4096, 4096, "claude-opus-4-5"),
    ("publishers/anthropic/models/claude-haiku-4-5@20251001", "claude-haiku-4-5", 4096, 4096, "claude-haiku-4-5"),
    ("claude-3-5-haiku@20241022", "claude-haiku-3-5", 2048, 2048, "claude-3-5-haiku"),
    # Bedrock model ids and cross-region inference profiles; LiteLLM's bedrock/ route
    ("anthropic.claude-opus-4-5-20251101-v1:0", "claude-opus-4-5", 4096, 4096, "claude-opus-4-5"),
    ("us.anthropic.claude-haiku-4-5-20251001-v1:0", "claude-haiku-4-5", 4096, 4096, "claude-haiku-4-5"),
    ("global.anthropic.claude-sonnet-4-5-20250929-v1:0", "claude-sonnet-4-5", 1024, 1024, "claude-sonnet-4-5"),
    ("us-gov.anthropic.claude-3-5-haiku-20241022-v1:0", "claude-haiku-3-5", 2048, 2048, "claude-3-5-haiku"),
    ("bedrock/eu.anthropic.claude-opus-4-6-v1", "claude-opus-4-6", 4096, 4096, "claude-opus-4-6"),
    ("us.amazon.nova-pro-v1:0", "nova-pro", 1024, 1000, None),
    ("amazon.nova-lite-v1:0", "nova-lite", 1024, 1000, None),
    # Whitespace and case as a user types them
    (" Claude-Opus-4.5 ", "claude-opus-4-5", 4096, 4096, "claude-opus-4-5"),
]


@pytest.mark.parametrize(("spelling", "family", "anthropic", "bedrock", "row"), CASES)
def test_a_spelling_gets_its_models_minimum_and_price(
    spelling: str, family: str, anthropic: int, bedrock: int, row: str | None
) -> None:
    assert model_family(spelling) == family
    assert cache_policy("anthropic", spelling).min_cacheable_tokens == anthropic
    assert cache_policy("bedrock", spelling).min_cacheable_tokens == bedrock
    # The simulator reads the same table.
    assert min_cacheable_tokens("anthropic", spelling) == anthropic
    assert min_cacheable_tokens("bedrock", spelling) == bedrock
    if row is not None:
        assert load_prices().get(spelling).model == row
