"""The engine places Anthropic breakpoints by the model's own minimum cacheable prefix.

Opus 4.5-4.6 and Haiku 4.5 cache nothing shorter than 4,096 tokens, Opus 4.7 nothing shorter than 2,048
(Anthropic's prompt-caching docs); Sonnet 4 and Opus 4/4.1 cache from 1,024. A breakpoint on a 2,000-token prefix of an Opus 4.5 request
caches nothing and holds one of the request's four slots, so the engine must not set it there.
"""

from __future__ import annotations

import pytest

from engine import Pipeline
from engine.providers.policy import cache_policy
from engine.sim.cachesim import min_cacheable_tokens

# About 2,000-2,500 cl100k tokens: over Sonnet 4's 1,024 minimum, under Opus 4.5's 4,096.
SYSTEM = "You are a careful coding agent. " + " ".join(f"Rule {i}: read the file before editing it." for i in range(220))


def _markers(model: str, provider: str) -> int:
    pipe = Pipeline(model, provider, 200_000)
    pipe.identity(SYSTEM)
    pipe.user("List the files.")
    body = pipe.next_request().serialized.body
    pipe.close()
    return body.decode().count("cache_control" if provider == "anthropic" else "cachePoint")


@pytest.mark.parametrize("provider", ["anthropic", "bedrock"])
def test_a_prefix_under_the_models_minimum_gets_no_breakpoint(provider: str) -> None:
    assert _markers("claude-sonnet-4", provider) >= 1  # the same prefix is cacheable for Sonnet 4
    assert _markers("claude-opus-4-5", provider) == 0
    assert _markers("claude-haiku-4-5", provider) == 0


def test_the_engine_and_the_simulator_read_one_table() -> None:
    for provider in ("anthropic", "bedrock"):
        for model in ("claude-sonnet-4", "claude-opus-4-1", "claude-opus-4-7", "claude-haiku-4-5", "claude-3-5-haiku"):
            assert cache_policy(provider, model).min_cacheable_tokens == min_cacheable_tokens(provider, model)
    assert cache_policy("openai", "gpt-4o").min_cacheable_tokens == 1024
