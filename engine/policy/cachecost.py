"""A provider's prompt-cache rules and price ratios, as the compaction policy needs them.

Prices are ratios to the input price, read from the bundled price table (engine/sim/data/prices.json)
when the model is in it, else the provider's documented defaults:

- DeepSeek: cache hits at about a tenth of a miss; the cache works in 64-token units, so a common
  prefix is served in whole 64-token units.
- OpenAI: automatic prefix caching from 1,024 tokens, then in 128-token steps; cached input at a
  model-dependent discount, no write premium.
- Anthropic (and Bedrock): explicit breakpoints, a prefix of at least 1,024 tokens; a read costs 0.1x,
  a 5-minute write 1.25x (the premium), and an entry lives 5 minutes after its last use (TTL).

A compaction rewrites everything after the first changed token, so the kept part is sent again
uncached (or written, at Anthropic's premium) once; in exchange every later turn reads D fewer cached
tokens. `payback()` turns that into "saves D/turn, re-sends X uncached, pays back after N turns".
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from engine.providers import canonical_provider

DEFAULTS = {  # rules: (read ratio, write ratio)
    "anthropic": (0.1, 1.25),
    "bedrock": (0.1, 1.25),
    "deepseek": (0.1, 1.0),
    "openai": (0.5, 1.0),
    "none": (1.0, 1.0),
}
ANTHROPIC_TTL_S = 300.0


@dataclass(frozen=True)
class CacheRules:
    rules: str  # anthropic | bedrock | deepseek | openai | none
    read_ratio: float  # cached-read price / input price
    write_ratio: float  # price of (re)writing a token into the cache / input price
    model: str = ""
    priced_from: str = "defaults"  # "price table" when the model's row gave the ratios

    def cached(self, prefix_tokens: int) -> int:
        """How much of an unchanged prefix of `prefix_tokens` the provider serves from its cache."""
        n = max(0, prefix_tokens)
        if self.rules == "deepseek":
            return n // 64 * 64
        if self.rules == "openai":
            return 0 if n < 1024 else 1024 + (n - 1024) // 128 * 128
        if self.rules in ("anthropic", "bedrock"):
            return n if n >= 1024 else 0
        return 0

    def turn_cost(self, tokens: int) -> float:
        """A steady-state request of `tokens` in input-price units: the cached part at the read ratio,
        the rest at the full input price."""
        cached = self.cached(tokens)
        return cached * self.read_ratio + (tokens - cached)

    def describe(self) -> str:
        return (
            f"{self.rules} cache rules, cached read {self.read_ratio:.2f}x and write {self.write_ratio:.2f}x "
            f"the input price ({self.priced_from}{': ' + self.model if self.model else ''})"
        )


def rules_name(provider: str, model: str, price_provider: str | None = None) -> str:
    """The cache rules that serve `model` under the engine provider policy `provider`: Anthropic and
    Bedrock as named; an OpenAI-shaped request to a DeepSeek model gets DeepSeek's disk cache."""
    if provider.strip().lower() == "deepseek":
        return "deepseek"
    canon = canonical_provider(provider)
    if canon in ("anthropic", "bedrock"):
        return canon
    if "deepseek" in model.lower() or (price_provider or "").lower() == "deepseek":
        return "deepseek"
    return "openai"


def for_model(provider: str, model: str) -> CacheRules:
    """Cache rules and price ratios for `model` (price table row if known, else the defaults)."""
    from engine.sim.pricing import UnknownModelError, load_prices

    try:
        row = load_prices().get(model)
    except (UnknownModelError, OSError, ValueError):
        row = None
    name = rules_name(provider, model, row.provider if row else None)
    if row is not None:
        return from_price(name, row.model, row.input, row.cache_read, row.cache_write)
    r, w = DEFAULTS[name]
    return CacheRules(name, r, w)


def from_price(rules: str, model: str, input_price: float, read_price: float, write_price: float) -> CacheRules:
    """`rules` at one price row's ratios: what a what-if priced as a named model weighs compactions by
    (the recorded model's prices would weigh an Anthropic what-if of a DeepSeek recording with no write
    premium). A row with no input price falls back to the rules' documented ratios."""
    if input_price <= 0:
        r, w = DEFAULTS.get(rules, DEFAULTS["none"])
        return CacheRules(rules, r, w)
    return CacheRules(rules, read_price / input_price, write_price / input_price, model, "price table")


@dataclass(frozen=True)
class Payback:
    saves_per_turn: int  # tokens fewer in every later request
    resend_uncached: int  # tokens sent again uncached (or written) once
    payback_turns: float  # turns until the saving has paid for the rewrite (inf: never)
    horizon: float  # turns the saving is expected to last
    forced: bool = False

    @property
    def worth(self) -> bool:
        return self.saves_per_turn > 0 and self.payback_turns <= self.horizon

    def text(self) -> str:
        pb = (
            "never pays back"
            if math.isinf(self.payback_turns)
            else (f"pays back after {max(0, math.ceil(round(self.payback_turns, 6)))} turns")
        )
        return f"saves {_k(self.saves_per_turn)}/turn, re-sends {_k(self.resend_uncached)} uncached, {pb}"

    def to_dict(self) -> dict[str, object]:
        return {
            "saves_per_turn": self.saves_per_turn,
            "resend_uncached": self.resend_uncached,
            "payback_turns": None if math.isinf(self.payback_turns) else round(self.payback_turns, 2),
            "horizon_turns": None if math.isinf(self.horizon) else round(self.horizon, 2),
            "text": self.text(),
        }


def _k(n: int) -> str:
    return f"{n / 1000:.1f}k" if n >= 1000 else str(n)


def payback(
    rules: CacheRules, saves: int, kept_total: int, stable_prefix: int, horizon: float, forced: bool = False
) -> Payback:
    """The pay-back of cutting `saves` tokens when `kept_total` tokens remain, of which the first
    `stable_prefix` (tools and system prompt) are unchanged and stay cached.

    Per later turn the saving is what `saves` tokens cost in a steady-state request (cached reads at
    the read ratio r, as far as the provider caches); once, the rewritten part is billed at the write
    ratio w instead of r. Pay-back turns = resend x (w - r) / saving per turn.
    """
    resend = max(0, kept_total - rules.cached(stable_prefix))
    extra = resend * max(0.0, rules.write_ratio - rules.read_ratio)
    # A request in steady state is read from the cache as far as the provider's rules cache it, the
    # rest billed as input: a cut that leaves the request below a provider's minimum cacheable size
    # (1,024 tokens at Anthropic and OpenAI) turns cheap cached reads into full-price input.
    per_turn = rules.turn_cost(kept_total + saves) - rules.turn_cost(kept_total)
    turns = (
        (0.0 if per_turn > 0 else math.inf)
        if extra <= 0
        else (extra / per_turn if per_turn > 0 else math.inf)
    )
    return Payback(saves, resend, turns, horizon, forced)
