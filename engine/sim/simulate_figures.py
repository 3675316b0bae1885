"""What a session-wide what-if reports: each column's figures turn by turn (`TurnFigures`) and in total
(`PolicyFigures`), and the report of one recording (`SimulationReport`) with its JSON form.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engine.sim.cachesim import CallCache
from engine.sim.simulate_settings import cache_rules_doc

POLICY_NAMES = ("pipeline", "gates_closed", "as_sent", "actual")


@dataclass(frozen=True)
class TurnFigures:
    """One simulated turn of one policy: prompt tokens split by cache outcome, output, cost and whether it compacted."""

    turn: int
    prompt_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    uncached_tokens: int
    output_tokens: int
    cost_usd: float
    compaction: bool
    cache_break: str | None  # the cause, when the request broke the previous request's cached prefix

    def __init__(
        self,
        turn: int,
        prompt_tokens: int,
        cache_read_tokens: int,
        cache_write_tokens: int,
        uncached_tokens: int,
        output_tokens: int,
        cost_usd: float,
        compaction: bool,
        cache_break: str | None,
    ) -> None:
        # Stored into the instance's dict one by one, as engine.providers.base.Block does: the frozen
        # dataclass's own __init__ calls object.__setattr__ per field (~3x), and every simulated call of
        # every column makes one.
        d = self.__dict__
        d["turn"] = turn
        d["prompt_tokens"] = prompt_tokens
        d["cache_read_tokens"] = cache_read_tokens
        d["cache_write_tokens"] = cache_write_tokens
        d["uncached_tokens"] = uncached_tokens
        d["output_tokens"] = output_tokens
        d["cost_usd"] = cost_usd
        d["compaction"] = compaction
        d["cache_break"] = cache_break

    def cost_json(self) -> float:
        """The cost as the JSON gives it (the session what-if's chart reads only this of a turn)."""
        return round(self.cost_usd, 8)

    def to_json(self) -> dict[str, Any]:
        return {
            "turn": self.turn,
            "prompt_tokens": self.prompt_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "cache_write_tokens": self.cache_write_tokens,
            "uncached_tokens": self.uncached_tokens,
            "output_tokens": self.output_tokens,
            "cost_usd": self.cost_json(),
            "compaction": self.compaction,
            "cache_break": self.cache_break,
        }


@dataclass
class PolicyFigures:
    """One policy's column of the simulate table: tokens, cache figures, cost, compactions and cache breaks by cause."""

    name: str
    model: str  # the model whose prices bill this column
    cache_rules: str  # cachesim provider, or "provider" for the real usage
    totals: CallCache
    output_tokens: int
    cost_usd: float
    compactions: int | None  # None: not knowable for this column
    cache_break_causes: dict[str, int] | None
    turns: list[TurnFigures] = field(default_factory=list)
    long_context_calls: int = 0  # calls billed whole at the row's long-context rates (said in a note)
    off_peak_calls: int = 0  # calls billed at the row's off-peak rates by their recorded time (said too)

    @property
    def cache_breaks(self) -> int | None:
        return None if self.cache_break_causes is None else sum(self.cache_break_causes.values())

    @property
    def cache_hit_rate(self) -> float:
        return self.totals.hit_rate

    def to_json(self, per_turn: bool = False) -> dict[str, Any]:
        t = self.totals
        out: dict[str, Any] = {
            "prompt_tokens": t.input_tokens,
            "uncached_tokens": t.uncached,
            "cache_read_tokens": t.cache_read,
            "cache_write_tokens": t.cache_write,
            "cache_write_1h_tokens": t.cache_write_1h,
            # What the --policies table's "billed new" column shows (and its JSON total): tokens billed
            # at the input or a cache-write price, i.e. everything not read from the cache.
            "billed_new_tokens": t.uncached + t.cache_write,
            "cache_hit_rate": round(t.hit_rate, 6),
            "output_tokens": self.output_tokens,
            "cost_usd": round(self.cost_usd, 8),
            "compactions": self.compactions,
            "cache_breaks": self.cache_breaks,
            "cache_break_causes": self.cache_break_causes,
            "model": self.model,
            "cache_rules": self.cache_rules,
            "calls": len(self.turns) if self.turns else None,
        }
        if per_turn:
            out["per_turn"] = [x.to_json() for x in self.turns]
        return out


@dataclass
class SimulationReport:
    """What `simulate` prints for one recording: the settings it applied and every policy's figures."""

    source: str
    recorded: dict[str, Any]  # model, provider, window as recorded
    model: str
    engine_provider: str
    cache_rules: str
    window: int
    turns: int
    simulated_turns: int
    policies: dict[str, PolicyFigures | None]
    break_even_cached_price_ratio: float | None
    notes: list[str]
    elapsed_s: float
    prices: dict[str, Any] = field(default_factory=dict)  # the price row applied, with its date and source
    calibration: float = 1.0  # provider tokens per engine token applied to the simulated columns
    # Failed attempts the agent (or its SDK) sent again (a 429, a 529), kept by the proxy on the turn they
    # preceded and in no column (never billed): `report` counts them; the notes say them for `simulate`.
    retried_attempts: int = 0
    # The least window that holds every request of the engine's columns, set only when --window is
    # smaller (their requests then cannot go below what is never evicted); in to_json only when set.
    least_window: int | None = None

    def prices_line(self) -> str:
        """Which prices and cache rules were applied, in one line."""
        p = self.prices
        if not p:
            return f"cache rules: {self.cache_rules}"
        w1h = p.get("cache_write_1h")
        return (
            f"prices: {p['model']} ({p['provider']}) ${p['input']}/M input, ${p['cache_read']}/M cached, "
            f"${p['cache_write']}/M cache write"
            + (f" (1-hour ${w1h}/M)" if w1h is not None and w1h != p["cache_write"] else "")
            + f", ${p['output']}/M output (as of {p['as_of']}); "
            f"cache rules: {cache_rules_doc(self.cache_rules, self.model)}"
        )

    def to_json(self, per_turn: bool = False) -> dict[str, Any]:
        return {
            "source": self.source,
            "prices": self.prices,
            "calibration": round(self.calibration, 4),
            "recorded": self.recorded,
            "model": self.model,
            "engine_provider": self.engine_provider,
            "cache_rules": self.cache_rules,
            "window": self.window,
            "turns": self.turns,
            "simulated_turns": self.simulated_turns,
            "policies": {
                k: (v.to_json(per_turn) if v is not None else None) for k, v in self.policies.items()
            },
            "break_even_cached_price_ratio": (
                None
                if self.break_even_cached_price_ratio is None
                else round(self.break_even_cached_price_ratio, 6)
            ),
            "notes": self.notes,
            "elapsed_s": round(self.elapsed_s, 4),
            **({"least_window": self.least_window} if self.least_window is not None else {}),
        }
