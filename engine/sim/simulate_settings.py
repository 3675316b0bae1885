"""What a session-wide what-if is asked (engine.sim.simulate): `SimSettings`, checked before any work (the
thresholds, the policy columns), the cache rules that serve the model (see simulate's module doc), the
price row it bills by, and the errors (`SimulateError`, `NoRequests`) that say what was wrong.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.errors import ContextPipeError
from engine.plan import Thresholds
from engine.providers import canonical_provider
from engine.sim import cachesim
from engine.sim.pricing import ENV_VAR, ModelPrice, PriceTable, UnknownModelError
from engine.wording import nouned

# engine.sim.policies (the peer policies, ~3 ms of CPU to import) is imported where a column or a name
# needs it: only `--policies` (and --json's policy docs) do.

CACHE_RULE_DOCS = {
    "deepseek": "deepseek (disk cache of prefix units, hits in 64-token units, no write premium)",
    "openai": "openai (automatic prefix cache from 1,024 tokens in 128-token steps)",
    "anthropic": (
        "anthropic (cache_control breakpoints, at most 4, 20-block lookback, 5-minute TTL unless 1 hour is asked)"
    ),
    "bedrock": "bedrock (cachePoint breakpoints, Anthropic's rules)",
    "none": "none (no prompt cache)",
}


def cache_rules_doc(rules: str, model: str) -> str:
    """One line saying which cache rules were applied, with the minimum cacheable prefix for `model`
    where it depends on the model (Anthropic: 1,024 to 4,096 tokens; the line said 1,024 for every one)."""
    doc = CACHE_RULE_DOCS.get(rules, rules)
    if rules in ("anthropic", "bedrock"):
        per = " per checkpoint" if rules == "bedrock" else ""
        least = cachesim.min_cacheable_tokens(rules, model)
        doc = f"{doc[:-1]}, prefixes >= {least:,} tokens{per} for {model})"
    return doc


class SimulateError(ContextPipeError, ValueError):
    """The session cannot be simulated as asked (unknown model or setting, empty recording)."""


@dataclass(frozen=True)
class SimSettings:
    """What-if settings. None means "as recorded"."""

    provider: str | None = None  # engine provider policy; "deepseek" also selects DeepSeek cache rules
    model: str | None = None  # model for pricing and the simulator's per-model rules
    window: int | None = None
    gates: Mapping[str, bool] | None = None
    thresholds: Mapping[str, float] | None = None
    prices: PriceTable | str | Path | None = None
    sim_options: Mapping[str, Any] | None = None  # passed to CacheSimulator (e.g. persist_probability)
    policy: str | None = None  # engine compaction policy for the `pipeline` column ("cost_aware", "wave1")
    # Extra columns: peer policies and engine policies by name (engine.sim.policies.ALL), or ("all",).
    policies: Sequence[str] | None = None
    calibrate: bool = True  # scale simulated token counts by the ratio learned from recorded usage


def cache_rules_for(engine_provider: str, model: str, requested: str | None, price: ModelPrice | None) -> str:
    """Which cachesim rules serve requests built under `engine_provider` for `model` (see module doc)."""
    if requested is not None and requested.strip().lower() == "deepseek":
        return "deepseek"
    canon = canonical_provider(engine_provider)
    if canon in ("anthropic", "bedrock"):
        return canon
    if "deepseek" in model.lower() or (price is not None and price.provider.lower() == "deepseek"):
        return "deepseek"
    # A model whose cached reads cost what input does has no prompt cache (GPT-4, GPT-4 Turbo): a hit
    # rate simulated under OpenAI's automatic caching would be shown for a cache that does not exist.
    if price is not None and price.input > 0 and price.cache_read >= price.input:
        return "none"
    return "openai"


def _price_row(
    table: PriceTable,
    model: str,
    fix: str = "Choose one with --model (or add a row with --prices FILE).",
    unnamed: str = "Choose the model to price it as with --model M, or import it again with --model M.",
) -> ModelPrice:
    """`model`'s row, or a SimulateError naming the table and `fix`: what the command at hand offers (diff
    and forks have no --model, and told the user to choose one with it). A recording whose source named
    no model (SWE-agent's demonstrations: 'unknown') says that, and `unnamed`, instead of the table."""
    try:
        return table.get(model)
    except UnknownModelError as exc:
        if model.strip().lower() in ("", "unknown"):
            raise SimulateError(
                f"cannot price model {model!r}: the recording does not name the model that served it (its "
                f"source had none). {unnamed}"
            ) from exc
        raise SimulateError(
            f"cannot price model {model!r}: it is not in {table.origin}. Known models: "
            f"{', '.join(table.known())}. {fix}"
        ) from exc


NO_MODEL_OPTION_UNNAMED = (
    "Import it again with --model M (cp-inspect import FORMAT SOURCE -o FILE --model M)."
)


NO_MODEL_OPTION_FIX = (
    f"Add a row for it to a price table of your own (the bundled one's shape) and give it with --prices FILE "
    f"or ${ENV_VAR}."
)


def _check_thresholds(th: Mapping[str, float] | None) -> dict[str, float] | None:
    if not th:
        return None
    known = tuple(Thresholds().to_dict())
    unknown = sorted(set(th) - set(known))
    if unknown:
        raise SimulateError(
            f"unknown {nouned(len(unknown), 'threshold')} {unknown}; known thresholds: {', '.join(known)}"
        )
    try:
        Thresholds(**{**Thresholds().to_dict(), **th})
    except (TypeError, ValueError) as exc:
        raise SimulateError(f"invalid thresholds {dict(th)}: {exc}") from exc
    return dict(th)


class NoRequests(SimulateError):
    """The session has no request (an agent that stopped before its first call): `report` lists it as
    idle."""


def _policy_list(names: Sequence[str] | None) -> list[str]:
    if not names:
        return []
    from engine.sim.policies import ALL as ALL_POLICIES

    out: list[str] = []
    for n in names:
        for part in str(n).split(","):
            part = part.strip()
            if not part:
                continue
            if part == "all":
                out.extend(x for x in ALL_POLICIES if x not in out)
            elif part in ALL_POLICIES:
                if part not in out:
                    out.append(part)
            else:
                raise SimulateError(
                    f"unknown policy {part!r}; known policies: all, {', '.join(ALL_POLICIES)}"
                )
    return out


def policy_doc(name: str) -> str:
    """One line saying what a policy column is."""
    from engine.sim.policies import DOCS

    return DOCS.get(name, "")
