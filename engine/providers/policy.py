"""ProviderCachePolicy: what a provider's prompt cache can do, as data the Optimize phase reads."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import lru_cache


@dataclass(frozen=True)
class ProviderCachePolicy:
    """How a provider caches prompts: explicit breakpoints or not, how many, and the shortest prefix it caches."""
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


# Routers and clouds spell one model many ways: OpenRouter "anthropic/claude-opus-4.5" (a dotted version),
# Vertex AI "claude-opus-4-5@20251101", Bedrock "anthropic.claude-haiku-4-5-20251001-v1:0" and its
# inference profiles "us.anthropic.claude-..." / "global.anthropic.claude-...", LiteLLM "bedrock/...",
# aliases "claude-3-5-haiku-latest", and Anthropic's own older order "claude-3-5-haiku" for what it now
# calls "claude-haiku-3-5". model_name() undoes the spelling (used by the price table too,
# engine/sim/pricing.py), model_family() reduces that to the family and version the tables below key on.
_DOTTED = re.compile(r"(\d)\.(\d)")
_SNAPSHOT = re.compile(r"(?:-(?:\d{8}|latest|v\d+))+$")  # a date, an alias or Bedrock's -v1 at the end
_OLD_ORDER = re.compile(r"^claude-(\d+(?:-\d)?)-(opus|sonnet|haiku)(?=-|$)")
_VENDOR = re.compile(r"^(?:[a-z]{2,6}(?:-[a-z]+)?\.)?(?:anthropic|amazon)\.")  # Bedrock: [region.]vendor.


def model_name(model: str) -> str:
    """`model` as its maker names it, lower-case, whatever the router or cloud: the last path segment
    (OpenRouter, LiteLLM, Vertex's publishers/.../models/NAME), past Bedrock's "[region.]anthropic.",
    before Vertex's "@DATE", with a Claude version's dot as Anthropic's dash ("claude-opus-4.5" ->
    "claude-opus-4-5"; other makers' dots, as in gpt-4.1, are their names). Snapshot and ":" suffixes
    stay: the price table matches on them."""
    name = model.strip().lower().rsplit("/", 1)[-1]
    if "anthropic." in name:  # Bedrock model ids and inference profiles
        name = name.split("anthropic.", 1)[1]
    name = name.split("@", 1)[0]
    if name.startswith("claude-"):
        name = _DOTTED.sub(r"\1-\2", name)
    return name


def model_family(model: str) -> str:
    """The model's family and version, as the minimum-prefix tables key them: model_name less Bedrock's
    "amazon." vendor, any ":..." suffix (Bedrock's ":0", OpenRouter's ":thinking"), a trailing date,
    "-latest" or "-vN", and with Claude 3's order turned round: "us.anthropic.claude-3-5-haiku-20241022-
    v1:0" -> "claude-haiku-3-5", "anthropic/claude-opus-4.5" -> "claude-opus-4-5", "amazon.nova-pro-v1:0"
    -> "nova-pro"."""
    name = _VENDOR.sub("", model_name(model)).split(":", 1)[0]
    name = _SNAPSHOT.sub("", name)
    return _OLD_ORDER.sub(lambda m: f"claude-{m[2]}-{m[1]}", name)


# Minimum cacheable prefix per Claude model, from Anthropic's prompt-caching docs ("Cache limitations",
# https://platform.claude.com/docs/en/build-with-claude/prompt-caching, as read 2026-12-04): 512 for
# Opus 5, Fable 5/5.1 and Mythos 5/5.1; 2,048 for Mythos Preview and Opus 4.7; 4,096 for Opus 4.6 and
# 4.5; 1,024 for Opus 4.8, Sonnet 5, Sonnet 4.6 and 4.5, Opus 4.1 and 4, Sonnet 4; 4,096 for Haiku 4.5;
# 2,048 for Haiku 3.5 (and Haiku 3, in the page's earlier editions). A key names one version: it matches
# a family equal to it or followed by a non-version part ("claude-opus-4-5-thinking"), never another
# version ("claude-opus-5" is not "claude-opus-5-5", whose figure the page does not give).
ANTHROPIC_MIN_TOKENS: tuple[tuple[str, int], ...] = (
    ("claude-opus-5", 512),
    ("claude-fable-5", 512),
    ("claude-fable-5-1", 512),
    ("claude-mythos-5", 512),
    ("claude-mythos-5-1", 512),
    ("claude-mythos-preview", 2048),
    ("claude-opus-4-7", 2048),
    ("claude-opus-4-6", 4096),
    ("claude-opus-4-5", 4096),
    ("claude-haiku-4-5", 4096),
    ("claude-haiku-3-5", 2048),
    ("claude-haiku-3", 2048),
)
ANTHROPIC_DEFAULT_MIN = 1024  # Sonnet 3.7 to 5, Opus 4 to 4.8, and a Claude the docs do not list
# A family with no version listed above: a Haiku the table does not know is taken at the Haiku 3 figure,
# as the engine always did (its substring "haiku" matched every Haiku).
ANTHROPIC_FAMILY_MIN: tuple[tuple[str, int], ...] = (("claude-haiku", 2048),)

# Bedrock: minimum tokens per cache checkpoint. Bedrock's prompt-caching user guide
# (https://docs.aws.amazon.com/bedrock/latest/userguide/prompt-caching.html, "Supported models, regions,
# and limits") gives 1,000 for Nova, 2,048 for Claude 3.5 Haiku, 4,096 for Opus 4.5 and Haiku 4.5, 1,024
# for the Sonnets and Opus 4/4.1; Anthropic's page says its minimums hold on Bedrock except for newly
# released models (Fable 5 and Mythos 5: 1,024 there), so Opus 4.6 and 4.7 take Anthropic's figures and
# the 512-token models the default.
BEDROCK_MIN_TOKENS: tuple[tuple[str, int], ...] = (
    ("claude-opus-4-7", 2048),
    ("claude-opus-4-6", 4096),
    ("claude-opus-4-5", 4096),
    ("claude-haiku-4-5", 4096),
    ("claude-haiku-3-5", 2048),
)
BEDROCK_FAMILY_MIN: tuple[tuple[str, int], ...] = (("nova", 1000),)


def _names(family: str, key: str) -> bool:
    """True when `key` names `family`: equal, or followed by a part that is not another version number
    (a tag such as "-thinking"; "claude-opus-4-5-5" would be another model)."""
    if not family.startswith(key):
        return False
    rest = family[len(key) :]
    return not rest or (rest[0] == "-" and not rest[1:2].isdigit())


def lookup_min(
    model: str,
    table: tuple[tuple[str, int], ...],
    default: int,
    families: tuple[tuple[str, int], ...] = (),
) -> int:
    """`model`'s minimum cacheable prefix from `table` (keyed by model_family), else the first family in
    `families` it belongs to, else `default`."""
    fam = model_family(model)
    for key, n in table:
        if _names(fam, key):
            return n
    for key, n in families:
        if fam.startswith(key):
            return n
    return default


def anthropic_min(model: str) -> int:
    return lookup_min(model, ANTHROPIC_MIN_TOKENS, ANTHROPIC_DEFAULT_MIN, ANTHROPIC_FAMILY_MIN)


def bedrock_min(model: str) -> int:
    return lookup_min(model, BEDROCK_MIN_TOKENS, ANTHROPIC_DEFAULT_MIN, BEDROCK_FAMILY_MIN)


@lru_cache(maxsize=64)
def cache_policy(provider: str, model: str) -> ProviderCachePolicy:
    """`provider`'s cache policy with `model`'s own minimum cacheable prefix: Anthropic's Opus 4.5-4.6 and
    Haiku 4.5 cache nothing shorter than 4,096 tokens, so a breakpoint the engine set on a shorter prefix
    would hold one of the request's four slots and cache nothing. Cached: the Pipeline asks every turn."""
    base = POLICIES[provider]
    if provider == "anthropic":
        least = anthropic_min(model)
    elif provider == "bedrock":
        least = bedrock_min(model)
    else:
        return base
    return base if least == base.min_cacheable_tokens else replace(base, min_cacheable_tokens=least)
