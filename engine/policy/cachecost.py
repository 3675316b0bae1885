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
from engine.wording import counted

DEFAULTS = {  # rules: (read ratio, write ratio)
    "anthropic": (0.1, 1.25),
    "bedrock": (0.1, 1.25),
    "deepseek": (0.1, 1.0),
    "openai": (0.5, 1.0),
    "none": (1.0, 1.0),
}


@dataclass(frozen=True)
class CacheRules:
    """A provider's cache rules and prices as ratios of the input price, for weighing a rewrite against its saving."""
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
        src = f"{self.priced_from}{': ' + self.model if self.model else ''}"
        if self.rules == "none":
            return f"the input price alone ({cache_named(self.rules)}; {src})"
        return (
            f"{cache_named(self.rules)}, cached read {self.read_ratio:.2f}x and write {self.write_ratio:.2f}x "
            f"the input price ({src})"
        )


def cache_named(rules: str) -> str:
    """A cache's rules as a sentence names them: "anthropic cache rules", and for a model with no prompt
    cache (rules "none": GPT-4, whose cached reads cost what input does) "no prompt cache", since "none
    cache rules" reads as a missing value. The one wording: CacheRules.describe and simulate's notes."""
    return "no prompt cache" if rules == "none" else f"{rules} cache rules"


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


def from_price(
    rules: str, model: str, input_price: float, read_price: float, write_price: float
) -> CacheRules:
    """`rules` at one price row's ratios: what a what-if priced as a named model weighs compactions by
    (the recorded model's prices would weigh an Anthropic what-if of a DeepSeek recording with no write
    premium). A row with no input price falls back to the rules' documented ratios."""
    if input_price <= 0:
        r, w = DEFAULTS.get(rules, DEFAULTS["none"])
        return CacheRules(rules, r, w)
    return CacheRules(rules, read_price / input_price, write_price / input_price, model, "price table")


@dataclass(frozen=True)
class Payback:
    """The expected pay-back of one compaction: tokens saved each later turn against the once-off uncached re-send."""
    saves_per_turn: int  # tokens fewer in every later request
    resend_uncached: int  # tokens sent again uncached (or written) once
    payback_turns: float  # turns until the saving has paid for the rewrite (inf: never)
    horizon: float  # turns the saving is expected to last
    forced: bool = False
    one_off: float = 0.0  # the rewrite's extra cost, once, in input-price units
    per_turn: float = 0.0  # the saving on every later turn, in input-price units
    # Chance the session reaches the trigger anyway, where a forced cut would pay about the same rewrite:
    # that share of the one-off is not an extra cost of cutting now (0: count all of it).
    credit: float = 0.0
    # The agent edited its own history this turn: the tokens from its edit on, which the request re-sends
    # uncached whether or not it is compacted (None: no edit). Only what a cut re-sends besides is its
    # rewrite (`resend_uncached`), 0 when the cut lies at or after the edit.
    agent_resends: int | None = None

    @property
    def worth(self) -> bool:
        return self.saves_per_turn > 0 and self.payback_turns * (1.0 - self.credit) <= self.horizon

    def text(self) -> str:
        # Remembered: a turn's decision, its step and its detail each quote it.
        got = self.__dict__.get("_text")
        if got is not None:
            return got  # type: ignore[no-any-return]
        pb = (
            "never pays back"
            if math.isinf(self.payback_turns)
            else f"pays back after {counted(max(0, math.ceil(round(self.payback_turns, 6))), 'turn')}"
        )
        also = (
            f" (the agent's own edit re-sends {_k(self.agent_resends)} anyway)"
            if self.agent_resends is not None
            else ""
        )
        got = f"saves {_k(self.saves_per_turn)}/turn, re-sends {_k(self.resend_uncached)} uncached{also}, {pb}"
        self.__dict__["_text"] = got  # a frozen dataclass: bypass its __setattr__ for the memo only
        return got

    def to_dict(self) -> dict[str, object]:
        d: dict[str, object] = {
            "saves_per_turn": self.saves_per_turn,
            "resend_uncached": self.resend_uncached,
            "payback_turns": None if math.isinf(self.payback_turns) else round(self.payback_turns, 2),
            "horizon_turns": None if math.isinf(self.horizon) else round(self.horizon, 2),
            "forced_cut_chance": round(self.credit, 3),
        }
        if self.agent_resends is not None:  # (only then: a session the agent never edits traces as before)
            d["agent_resends"] = self.agent_resends
        d["text"] = self.text()
        return d


def _k(n: int) -> str:
    return f"{n / 1000:.1f}k" if n >= 1000 else str(n)


def payback(
    rules: CacheRules,
    saves: int,
    kept_total: int,
    stable_prefix: int,
    horizon: float,
    forced: bool = False,
    prefix_served: bool = True,
    credit: float = 0.0,
    broken_at: int | None = None,
) -> Payback:
    """The pay-back of cutting `saves` tokens when `kept_total` tokens remain, of which the first
    `stable_prefix` (tools and system prompt) are unchanged and stay cached (unless `prefix_served` is
    False: DeepSeek serves a prefix only from a unit that ends exactly there, and the first rewrite of a
    session finds none, see `prefix_served_on_rewrite`).

    Per later turn the saving is what `saves` tokens cost in a steady-state request (cached reads at
    the read ratio r, as far as the provider caches); once, the rewritten part is billed at the write
    ratio w instead of r. Pay-back turns = resend x (w - r) / saving per turn.

    `broken_at`: the agent edited its own history this turn, and the request without a cut is the
    same as the last one only for its first `broken_at` tokens: everything after is re-sent uncached
    whatever the policy does. A cut then re-sends only what the request without it would have read
    from the cache past the stable prefix, cached(broken_at) - cached(stable) - saves (its kept part
    up to the edit), and nothing when it cuts at or after the edit: the compaction rides on a break
    the agent made (an estimate at DeepSeek, whose unedited request reads only up to a persisted
    unit's end at or before the edit).
    """
    resend, extra, per_turn, turns = _payback_terms(
        rules, saves, kept_total, stable_prefix, prefix_served, broken_at
    )
    again = None if broken_at is None else max(0, kept_total + saves - broken_at)
    return Payback(saves, resend, turns, horizon, forced, extra, per_turn, credit, again)


def _payback_terms(
    rules: CacheRules,
    saves: int,
    kept_total: int,
    stable_prefix: int,
    prefix_served: bool,
    broken_at: int | None = None,
) -> tuple[int, float, float, float]:
    """payback()'s arithmetic (resend, extra, per_turn, turns), shared with compacts_early."""
    base = rules.cached(stable_prefix) if prefix_served else 0
    resend = max(0, kept_total - base)
    if broken_at is not None:
        # What the uncut request would have read from the cache past the stable prefix and the cut
        # part: only that is re-sent because of the cut (see payback).
        resend = min(resend, max(0, rules.cached(broken_at) - base - saves))
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
    return resend, extra, per_turn, turns


def compacts_early(
    rules: CacheRules,
    saves: int,
    kept_total: int,
    stable_prefix: int,
    horizon: float,
    prefix_served: bool,
    credit: float,
    growth: float,
    economic: bool,
) -> bool:
    """payback(rules, saves, kept_total, stable_prefix, horizon, False, prefix_served, credit).worth, and
    with `economic` its saves_per_turn >= economic_saving(pb, growth): whether cost_aware's early rule
    cuts, the same arithmetic without making the Payback (the express lane weighs every turn over the
    target and reads nothing else of it). Never on a turn the agent edited its history (no `broken_at`):
    an edit drops the Measure a lane turn needs, so that turn is weighed by run in full."""
    _, extra, per_turn, turns = _payback_terms(rules, saves, kept_total, stable_prefix, prefix_served)
    if not (saves > 0 and turns * (1.0 - credit) <= horizon):
        return False
    if not economic or per_turn <= 0 or growth <= 0:
        return True  # (the economic saving is 0 there, and saves > 0)
    return saves >= math.sqrt(2.0 * extra * growth / (per_turn / saves))


def remaining_turns(turns_so_far: int, scale: float, cap: float) -> tuple[float, float]:
    """How long a saving made now is expected to last, and the chance the session outlives `cap` turns.

    A session's remaining length L is unknown; the only statistic it offers is how long it has run (n
    turns). With no other knowledge the scale-free (Copernican) prior fits: the share of the session
    already run is uniform, so P(L >= l) = s n / (s n + l) (s = `scale`; 1: the median remaining length
    is the length so far; smaller is more cautious). A saving lasts until the session ends or until the
    request would reach the trigger without this cut (`cap` turns), so its expected length is
    E[min(L, cap)] = s n ln(1 + cap / (s n)), and P(L > cap) = s n / (s n + cap). Early in a session
    both are small: a short run is never compacted on the hope that it goes on."""
    sn = max(1, turns_so_far) * scale
    if math.isinf(cap):
        return math.inf, 0.0
    cap = max(0.0, cap)
    return sn * math.log1p(cap / sn), sn / (sn + cap)


def prefix_served_on_rewrite(rules: CacheRules, earlier_rewrites: int) -> bool:
    """Whether a request that rewrites the history still reads its unchanged prefix from the cache.

    DeepSeek (docs, "Cache Persistence and Hit Rules"): a request hits only a cache prefix unit it fully
    contains; units are persisted at the end of each request's input and output, and for a common prefix
    once a request diverges from an earlier one. Requests that only append never leave a unit that ends
    where the history starts, so the first rewrite of a session reads nothing (the common prefix unit it
    leaves serves every later rewrite). Providers that match the longest cached prefix (OpenAI) or read at
    a breakpoint before the history (Anthropic) serve it every time."""
    return rules.rules != "deepseek" or earlier_rewrites > 0


def economic_saving(pb: Payback, growth: float) -> float:
    """The smallest saving per turn (tokens) at which compacting now beats waiting, for a session whose
    request grows `growth` tokens a turn.

    Compacting every time the request has grown by D over its compacted size costs, per turn, the
    rewrite (`one_off`) spread over the D/growth turns of the cycle plus the growing request's reads
    (rate x D/2 on average, rate = `per_turn`/saves per token). Minimised at D* = sqrt(2 x one_off x
    growth / rate): the economic order quantity. Cutting sooner pays the rewrite too often; later keeps
    paying for tokens a cut would have dropped."""
    if pb.saves_per_turn <= 0 or pb.per_turn <= 0 or growth <= 0:
        return 0.0
    rate = pb.per_turn / pb.saves_per_turn
    return math.sqrt(2.0 * pb.one_off * growth / rate)
