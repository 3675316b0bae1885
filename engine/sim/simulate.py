"""Session-wide what-if and cost: a whole recorded session re-run through the engine and priced.

One pass over the journal (the same fold `Replayer.verify` does) builds every turn's request twice:
under the requested settings (`pipeline`) and with every optimizer gate closed (`gates_closed`; the
trim to the window still happens, it is the budget guarantee, not an optimization). Each sequence of
requests goes through the provider cache simulator (`cachesim`) with the recorded request times and is
priced from the price table (`pricing`). Two more columns anchor the what-if to reality:

- `as_sent`: the simulator on exactly the requests the agent sent (the `actual` events an import writes:
  message blob hashes, counted with the engine's tokenizer). A recording with no `actual` events (one an
  agent made with the engine) was sent as the engine built it, so `as_sent` is the engine's requests
  under the recorded settings.
- `actual`: the provider's real usage (`usage` events, else the usage inside `actual` events), summed.
  `None` when the recording has none.

All simulated policies use one tokenizer (the engine's), so they compare like with like; `actual` is in
the provider's own tokens, so its prompt total differs from the others by the tokenizer mismatch.

Provider mapping. The engine has serializer policies (anthropic, openai, bedrock, prefix; "deepseek" is an
alias of openai because DeepSeek speaks the OpenAI wire format), the simulator has cache rules
(anthropic, openai, deepseek, bedrock, none). The engine policy decides the wire layout and the cache
markers; the cache rules follow the provider that would serve the model: anthropic -> anthropic,
bedrock -> bedrock, and an OpenAI-shaped policy ("openai" or "prefix") -> DeepSeek's disk-cache rules
when the provider was given as "deepseek", or the model is a DeepSeek one (by name or by the price
table's provider column), else OpenAI's automatic prefix caching.

No clocks, no randomness: the same recording and settings give the same figures (the elapsed time in
the report is the only exception and is not part of the figures).
"""

from __future__ import annotations

import json
import math
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import compress, count
from operator import attrgetter, ne, not_
from pathlib import Path
from typing import Any, cast

from engine.artifacts import Message, Text, Thinking, ToolCall, ToolResult, ToolSchema
from engine.assembly import Measure
from engine.config import PipelineConfig
from engine.errors import ConfigError, ContextPipeError
from engine.feedback import attribute_cache_break
from engine.optimize.context import OptimizeLimits
from engine.plan import Thresholds
from engine.policy.cachecost import CacheRules, from_price
from engine.policy.settings import WAVE1, PolicySettings
from engine.policy.state import CompactionState
from engine.providers import canonical_provider
from engine.providers.base import Block
from engine.recording.counts import CarriedCounter, CountTable, CountTableError
from engine.recording.journal import Event, trace_of
from engine.recording.replay import MALFORMED, Replayer, ReplayError
from engine.sim import cachesim
from engine.sim.blocks import CountsDisagree, SimBuilder, SimBuilt
from engine.sim.cachesim import CacheSimulator, Call, CallCache, deepseek_persist_probability
from engine.sim.cachesim import (
    find_stretch as _stretch,  # one search for a shifted stretch: the cache simulator's
)
from engine.sim.few_texts import FewTextsTokenizer
from engine.sim.grown import Grown, Window, shifted
from engine.sim.pricing import (
    ENV_VAR,
    ModelPrice,
    PriceTable,
    UnknownModelError,
    call_cost,
    cost,
    crosses_long_context,
    load_prices,
    rates_at,
    usage_call,
)
from engine.sim.turn_views import TurnViews
from engine.store.gc_pause import collector_paused
from engine.tokens import MESSAGE_OVERHEAD_TOKENS, TokenCounter
from engine.types import SectionKind
from engine.wording import counted, nouned

# engine.sim.policies (the peer policies, ~3 ms of CPU to import) is imported where a column or a name
# needs it: only `--policies` (and --json's policy docs) do.

POLICY_NAMES = ("pipeline", "gates_closed", "as_sent", "actual")
# What simulate reads of the recorded turn traces: their sections (the token-count check,
# _recorded_sections). A reader asked for only these builds nothing else of a trace
# (RecordingReader.events(trace_fields=...)): ~2/3 of decoding a long recording's events.
TRACE_FIELDS = ("sections",)
_SHA = attrgetter("sha")
_MARKER = attrgetter("marker")
_SECTION = attrgetter("section")
# Turns checked with an extra recorded-settings build when carried counts are in use and no column
# runs the recorded settings (an import simulated under a what-if): about this many, evenly spread.
CHECK_SAMPLE = 16
COMPACTION_STEPS = frozenset({"clear_tool_results", "drop_rounds", "llm_summary", "compact_history"})
# Strictly increasing request times: the simulator lets a call read only what was written strictly
# before it, and an agent loop sends call k+1 only after reply k arrived. Sources without timestamps
# (all zeros) or with whole-second ones would otherwise hide every write from the next call.
MIN_STEP_S = 1e-3
UNBOUNDED = 100_000_000  # a window nothing outgrows: the uncompacted view the peers start from
WAVE1_SETTINGS = PolicySettings(name=WAVE1)
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
        }


# ------------------------------------------------------------------------------------------ settings


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


# ------------------------------------------------------------------------------------------ break-even


def break_even_cached_price_ratio(
    pipeline: CallCache,
    gates_closed: CallCache,
    price: ModelPrice,
    output_delta: int = 0,
) -> float | None:
    """The cached-token price, as a fraction r of the input price, at which both policies cost the same.

    With input price p, cache-write prices w (5 min) and w1 (1 h), output price o, and each policy's
    uncached U, cache-read R, 5-minute write W, 1-hour write W1 tokens, a policy costs

        U*p + R*(r*p) + W*w + W1*w1 + O*o

    Setting cost(pipeline) = cost(gates_closed) and solving the linear equation for r:

        r = -(dU*p + dW*w + dW1*w1 + dO*o) / (dR*p),    d = pipeline - gates_closed

    Write prices stay as in the table (a write premium is priced independently of the read discount).
    Returns None when there is no single crossing: dR == 0 (the cached price does not move the
    difference), p == 0, or r outside [0, 1] (a cached price below zero or above the input price is not
    a price any provider charges). Above r the policy with fewer cache reads (normally the pipeline,
    which rewrites history) is the cheaper one; below r the other one is.
    """
    p = price.input
    d_read = pipeline.cache_read - gates_closed.cache_read
    if d_read == 0 or p <= 0:
        return None
    d_unc = pipeline.uncached - gates_closed.uncached
    d_w1 = pipeline.cache_write_1h - gates_closed.cache_write_1h
    d_w5 = (pipeline.cache_write - pipeline.cache_write_1h) - (
        gates_closed.cache_write - gates_closed.cache_write_1h
    )
    rest = (
        d_unc * p
        + d_w5 * price.cache_write
        + d_w1 * (price.cache_write_1h or 0.0)
        + output_delta * price.output
    )
    r = -rest / (d_read * p)
    if not 0.0 <= r <= 1.0:
        return None
    return r


# ------------------------------------------------------------------------------------------ one pass


@dataclass(frozen=True)
class SentBlock(Block):
    """A Block of an agent's own request whose cache breakpoint asked for a TTL other than the default
    5 minutes (Anthropic's `"ttl": "1h"`); the engine's own Blocks are always 5-minute ones."""

    ttl: str = "5m"


@dataclass
class _Req:
    """One built request as the simulator and the attribution need it."""

    turn: int
    time: float
    blocks: list[Block]
    actions: list[str]
    latch_flips: list[str]
    # A peer policy's call: the output tokens it bills (None: the turn's reply) and whether the peer
    # compacted on it (None: judged from `actions`, or for an agent's own requests from its prefix).
    output: int | None = None
    compaction: bool | None = None
    # The previous request's first `same` Blocks are this one's first, the same objects, and its Block
    # at `same` (if both have one) is not this one's by value, when the maker knows it (a peer that
    # edits its last request near its end): its shared prefix is then not compared again. None: found.
    same: int | None = None
    # (s, a, m): this request's Blocks [s, s + m) are the previous request's [a, a + m), the same
    # objects, when the maker knows it (PeerRequest.stretch): not searched for. None: found.
    stretch: tuple[int, int, int] | None = None


def _told_stretch(
    prev: Sequence[Block], blocks: Sequence[Block], common: int, told: tuple[int, int, int] | None
) -> tuple[int, int, int] | None:
    """A maker's stretch (_Req.stretch) as _stretch(prev, blocks[common:], common) gives one, (h, a, m)
    with h counted from `common`, when it lies past the shared prefix and its ends are the previous
    request's Blocks it names (the same objects): else None (searched for). Any stretch of the same
    Blocks gives the same conversions, markers, keys and sums."""
    if told is None:
        return None
    s, a, m = told
    if (
        m >= 1
        and s >= common
        and a >= common
        and s + m <= len(blocks)
        and a + m <= len(prev)
        and blocks[s] is prev[a]
        and blocks[s + m - 1] is prev[a + m - 1]
    ):
        return s - common, a, m
    return None


def _prefix_count(blocks: Sequence[Block], automatic: bool) -> int:
    # Mirrors pipeline._prefix_blocks: the cached prefix ends at the last marker; with automatic
    # prefix caching (no markers) everything but the newest block is the prefix the next call reuses.
    if not any(map(_MARKER, blocks)):  # in C: a long request has hundreds of blocks and few markers
        return max(0, len(blocks) - 1) if automatic else 0
    flags = list(map(_MARKER, blocks))
    return len(flags) - flags[::-1].index(True)


# _prefix_count of each request of a sequence without reading every Block of every request (the scan
# above was ~5% of a long session's cache simulation): a request's markers are the previous request's
# markers within the Blocks the two share (equal Blocks, equal markers) and those among its new Blocks.
def _marks_after(prev_marks: list[int], common: int, new: Sequence[Block]) -> list[int]:
    """The marked positions of a request whose first `common` Blocks equal the previous request's (whose
    marked positions are `prev_marks`) and whose other Blocks are `new`."""
    kept = prev_marks if not prev_marks or prev_marks[-1] < common else [i for i in prev_marks if i < common]
    if not any(map(_MARKER, new)):
        return kept
    return kept + list(compress(range(common, common + len(new)), map(_MARKER, new)))


def _marks_shifted(
    prev_marks: list[int], common: int, head: Sequence[Block], tail: Sequence[Block], a: int, m: int
) -> list[int]:
    """_marks_after(prev_marks, common, new) when new = head + the previous request's Blocks [a, a + m)
    + tail (equal Blocks: the same markers, known from prev_marks), without reading the stretch's
    markers (nor making `new`: a shifted request's ~4,800 Blocks copied to read the few around them)."""
    kept = prev_marks if not prev_marks or prev_marks[-1] < common else [i for i in prev_marks if i < common]
    at = common + len(head)  # where the stretch starts in this request
    out = kept + list(compress(range(common, at), map(_MARKER, head)))
    out += [x - a + at for x in prev_marks if a <= x < a + m]
    out += compress(range(at + m, at + m + len(tail)), map(_MARKER, tail))
    return out


def _prefix_from_marks(marks: list[int], length: int, automatic: bool) -> int:
    """_prefix_count of a request of `length` Blocks marked at `marks` (ascending)."""
    if not marks:
        return max(0, length - 1) if automatic else 0
    return marks[-1] + 1


@dataclass
class _Pass:
    """The requests of one pass over a recording, by column, and the conversation views the peers build from."""

    pipeline: list[_Req]
    gates_closed: list[_Req]
    recorded: list[_Req] | None
    engine: dict[str, list[_Req]]  # engine policy columns by name
    views: TurnViews  # the uncompacted conversation per turn, for the peers
    calibration: float  # provider tokens per engine token, learned from the recorded usage
    recorded_is_pipeline: bool = False  # every turn's recorded-settings request is the pipeline one
    closed_is_pipeline: bool = False  # likewise the gates-closed request
    # Each turn's recorded reply (its text, tool calls and reasoning), whose engine tokens are the output
    # tokens of a turn the source kept no usage for; counted (`reply_tokens`) only for such a turn.
    replies: dict[int, Message] = field(default_factory=dict)
    measure: Measure | None = None

    def reply_tokens(self, turn: int) -> int:
        assert self.measure is not None
        return sum(map(self.measure.part, self.replies[turn].parts))


def _build_pass(
    events: Iterable[Event],
    replayer: Replayer,
    pipe_overrides: dict[str, Any],
    need_recorded: bool,
    engine_policies: Sequence[str] = (),
    peers: bool = False,
    markers: bool = False,
    cache: CacheRules | None = None,
    check: bool = False,
) -> _Pass:
    """Fold the journal once; at every request build it under the what-if, gates-closed and (when
    needed) recorded settings, each engine policy asked for, and the uncompacted view the peers
    start from. Mirrors Replayer.verify so the fold cannot drift from replay. `events` are read once,
    in order, and none is kept (a recording read from disk: see simulate_stream).

    `check`: when the token counts come from the recording's table, every build is held against the
    recorded trace of its turn (section content hash and tokens; see `SimBuilt.check_counts`), when that
    turn's `turn` event comes (right after its request and usage); turns where no column runs the
    recorded settings get a recorded-settings build for the check on a sample of turns."""
    if peers:
        from engine.sim.policies.base import HistoryBlocks

        history_blocks = HistoryBlocks()  # one for every turn's view: each message's Block made once
    pipe = replayer.new_pipeline()
    builder = SimBuilder(pipe)
    every = max(1, replayer.turns // CHECK_SAMPLE) if check else 0
    last_turn = max(replayer.request_index, default=0)
    same = closed_same = True
    closed = OptimizeLimits.all_closed()
    out_p: list[_Req] = []
    out_c: list[_Req] = []
    out_r: list[_Req] | None = [] if need_recorded else None
    out_e: dict[str, list[_Req]] = {n: [] for n in engine_policies}
    st_e: dict[str, CompactionState] = {n: CompactionState() for n in engine_policies}
    views = TurnViews()
    st_p = st_c = st_r = CompactionState()
    cfgs: _Configs | None = None
    replies: dict[int, Message] = {}
    awaiting: int | None = None  # the turn whose reply is the next `msg` event
    # The builds of the last request still to be held against its turn's recorded trace: (turn, builds).
    # The trace comes two events later; the builds are immutable, so checking them then is checking them
    # now (the whole journal was held before, to look each turn's trace up at its request).
    to_check: tuple[int, list[SimBuilt]] | None = None
    for ev in events:
        k = ev.get("k")
        if k == "turn" and to_check is not None and ev.get("turn") == to_check[0]:
            _check_builds(to_check, _sections_of(trace_of(ev)))
            to_check = None
        if k == "request":
            if to_check is not None:  # a turn with no trace of its own: nothing recorded to hold it to
                to_check = None
            pipe.begin_request(ev["turn"])
            bound = ev.get("bound", {})
            base: PipelineConfig = pipe.config
            if cfgs is None or cfgs.base is not base:
                # Derived once per recorded config (configs are frozen; a fold replaces, never edits).
                cfgs = _Configs(base, pipe_overrides, closed, engine_policies)
            pcfg, ccfg = cfgs.pcfg, cfgs.ccfg
            t = float(ev.get("time") or 0.0)
            # Each column runs its own chain of compaction states: the folded (recorded) state belongs
            # to the recorded settings, not to a what-if window.
            # What-if columns weigh compactions by the simulated cache rules and the named model's
            # prices; the recorded column keeps the recorded ones (it is what the engine did).
            bp = builder.build(bound, pcfg, st_p, cache)
            # A what-if with every gate closed already (or a recording made so) is its own gates-closed
            # column: the same build of the same inputs, so it is not built twice. The two state chains
            # start equal and stay equal for as long as this holds.
            closed_is_pipeline = cfgs.closed_is_pipeline and st_c == st_p
            closed_same = closed_same and closed_is_pipeline
            bc = bp if closed_is_pipeline else builder.build(bound, ccfg, st_c, cache)
            st_p, st_c = bp.state or st_p, bc.state or st_c
            rp = _req(ev["turn"], t, bp)
            out_p.append(rp)
            out_c.append(rp if closed_is_pipeline else _req(ev["turn"], t, bc))
            same = same and cfgs.recorded_is_pipeline
            if out_r is not None:
                br = bp if cfgs.recorded_is_pipeline else builder.build(bound, base, st_r)
                st_r = br.state or st_r
                # The recorded-settings request is the pipeline's own when the settings are the same.
                out_r.append(rp if br is bp else _req(ev["turn"], t, br))
            if check:
                todo = [bp]
                if bc is not bp:  # a column that is the pipeline's own build is checked once
                    todo.append(bc)
                if out_r is not None:
                    if br is not bp:
                        todo.append(br)
                elif not cfgs.recorded_is_pipeline and (ev["turn"] % every == 0 or ev["turn"] == last_turn):
                    todo.append(builder.build(bound, base))
                to_check = (ev["turn"], todo)
            for name in engine_policies:
                b = builder.build(bound, cfgs.engine[name], st_e[name], cache)
                st_e[name] = b.state or st_e[name]
                out_e[name].append(_req(ev["turn"], t, b))
            if peers:
                # The whole conversation, never compacted, laid out as the engine would send it.
                # Its system blocks (every Block not of the history section) taken by section runs.
                full = builder.build(bound, cfgs.full, apart="history", whole=False)
                hist = next((s for s in full.asm if s.kind == SectionKind.HISTORY), None)
                items = hist.items if hist is not None else ()
                system = cast("tuple[Block, ...]", full.others)
                # The history's messages (only the items past the last turn's conversation checked; the
                # first full.log_own of them, when known, the log's own: see blocks._log_own).
                views.add_items(
                    ev["turn"],
                    system,
                    items,
                    pcfg.window,
                    bp.ceiling,
                    markers,
                    pipe.measure,
                    history_blocks,
                    pipe.history,
                    full.log_own,
                )
        pipe.fold(ev)
        if k == "request":
            awaiting = ev["turn"]
        elif k == "msg" and awaiting is not None:
            # The model's reply to that request (a failed call has none: the next request comes first).
            replies[awaiting] = pipe.history[-1]
            awaiting = None
    ratio = pipe.stats.calibration_for(pipe.config.model)
    return _Pass(
        out_p,
        out_c,
        out_r,
        out_e,
        views,
        ratio,
        same and out_r is not None,
        closed_same,
        replies,
        pipe.measure,
    )


class _Configs:
    """The configs one recorded config gives every column, and how they compare."""

    def __init__(
        self,
        base: PipelineConfig,
        overrides: dict[str, Any],
        closed: OptimizeLimits,
        engine_policies: Sequence[str],
    ) -> None:
        self.base = base
        self.pcfg = base.with_overrides(**overrides)
        self.ccfg = replace(self.pcfg, limits=closed)
        self.closed_is_pipeline = self.ccfg == self.pcfg
        self.recorded_is_pipeline = base == self.pcfg
        self.engine = {n: self.pcfg.with_overrides(policy=n) for n in engine_policies}
        # The whole conversation, never compacted, laid out as the engine would send it (the peers' view).
        self.full = replace(self.pcfg, window=UNBOUNDED, limits=closed, policy=WAVE1_SETTINGS)


def _sections_of(trace: Mapping[str, Any]) -> dict[str, tuple[str, int, int]]:
    """(content hash, tokens, items; -1: not recorded) of each section a recorded trace lists, by id."""
    return {
        str(s["id"]): (str(s["sha256"]), int(s["tokens"]), int(s.get("items", -1)))
        for s in trace.get("sections", ())
    }


def _check_builds(todo: tuple[int, list[SimBuilt]], recorded: Mapping[str, tuple[str, int, int]]) -> None:
    turn, builds = todo
    for b in builds:
        b.check_counts(turn, recorded)


def _req(turn: int, t: float, b: SimBuilt) -> _Req:
    return _Req(turn, t, b.blocks, b.actions, b.latch_flips)  # a list of its own (SimBuilder's)


def _as_sent(
    events: list[Event], blobs: Mapping[str, str], counter: TokenCounter, anthropic_style: bool
) -> list[_Req]:
    """The requests exactly as the agent sent them, from `actual` events, as engine Blocks."""
    # Imported here: only recordings of captured agents have `actual` events.
    from engine.recording.actual import actual_requests

    msgs = actual_requests(events)
    tools: list[tuple[int, str]] = []
    times: dict[int, float] = {}
    tool_by_turn: dict[int, list[tuple[int, str]]] = {}
    marks_by_turn: dict[int, list[Any]] = {}
    for ev in events:
        if ev.get("k") != "actual":
            continue
        if "tools" in ev:
            tools = _sent_tools(ev, blobs, counter)
        tool_by_turn[ev["turn"]] = tools
        if ev.get("time") is not None:
            times[ev["turn"]] = float(ev["time"])
        if ev.get("marks") is not None:
            marks_by_turn[ev["turn"]] = ev["marks"]
    sized: dict[str, tuple[int, str]] = {}

    def message(h: str) -> tuple[int, str]:
        got = sized.get(h)
        if got is None:
            d = json.loads(blobs[h])
            role = str(d.get("role", "user"))
            # Counts are keyed as the engine keys the same text (the part's hash, which is a function
            # of the text), so a text the engine already counted is not tokenized a second time.
            content = blobs.get(d.get("content_h", ""), "")
            cid = d.get("tool_call_id")
            part: Text | ToolResult = (
                ToolResult(str(cid), content) if role == "tool" and cid is not None else Text(content)
            )
            n = MESSAGE_OVERHEAD_TOKENS + counter.count(content, part.sha)
            if d.get("thinking_h"):  # reasoning sent back with the history (DeepSeek reasoner)
                thinking = blobs.get(d["thinking_h"], "")
                n += counter.count(thinking, Thinking(thinking).sha)
            if role == "tool":
                n += 4  # as Measure counts a tool result
            for c in d.get("tool_calls") or ():
                args = blobs.get(c.get("arguments_h", ""), "")
                name = str(c.get("name", ""))
                n += counter.count(f"{name} {args}", ToolCall(str(c.get("id", "")), name, args).sha) + 4
            got = sized[h] = (n, role)
        return got

    out: list[_Req] = []
    for turn in sorted(msgs):
        blocks: list[Block] = []
        for n, th in tool_by_turn.get(turn, []):
            blocks.append(Block("tools", "tools", th, n, False))
        leading_system = True
        for h in msgs[turn]:
            n, role = message(h)
            leading_system = leading_system and role == "system"
            seg = "system" if leading_system else "messages"
            blocks.append(Block("identity" if seg == "system" else "history", seg, h, n, False))
        marks = marks_by_turn.get(turn)
        if anthropic_style and marks is not None:
            # The request's own breakpoints (an Anthropic capture or log keeps them): where and for how
            # long the agent asked for caching, 1-hour ones included. None at all: nothing was cached.
            ntools = len(tool_by_turn.get(turn, ()))
            for kind, i, ttl in marks:
                at = int(i) if kind == "tool" else ntools + int(i)
                if 0 <= at < len(blocks):
                    b = blocks[at]
                    blocks[at] = (
                        SentBlock(b.section, b.segment, b.sha, b.tokens, True, str(ttl))
                        if ttl != "5m"
                        else replace(b, marker=True)
                    )
        elif anthropic_style and blocks:
            # A source that does not keep the breakpoints: assume what a harness sending to Anthropic
            # does (mini-swe-agent, SWE-agent, Claude Code): one rolling cache_control breakpoint on the
            # newest message. Without it nothing is cached.
            blocks[-1] = replace(blocks[-1], marker=True)
        out.append(_Req(turn, times.get(turn, 0.0), blocks, [], []))
    return out


def _sent_tools(ev: Event, blobs: Mapping[str, str], counter: TokenCounter) -> list[tuple[int, str]]:
    """(tokens, parameters blob hash) of each tool an `actual` event lists, counted as the engine counts
    the same schema (assembly.Measure.part: name, description and parameters), so the as-sent column
    and the engine's columns price one tool alike. Recordings made before imports kept the descriptions
    (no `tool_descriptions`) are counted without them, as they were: the text is not there."""
    hashes = ev["tools"]
    names = ev.get("tool_names") or [""] * len(hashes)
    descs = ev.get("tool_descriptions")
    part = Measure(counter).part  # the engine's own count of a schema, not a copy of its formula
    out: list[tuple[int, str]] = []
    for i, (name, th) in enumerate(zip(names, hashes, strict=False)):
        params = blobs.get(th, "")
        if descs is not None and i < len(descs):
            n = part(ToolSchema(str(name), blobs.get(descs[i], ""), params))
        else:
            n = counter.count(f"{name}\n{params}") + 4
        out.append((n, th))
    return out


def _first_changed(a: Sequence[Block], b: Sequence[Block], shared: int, m: int) -> int | None:
    """The first position below m where b's Block hash is not a's (or b has no Block), given that the
    first `shared` are equal Blocks (so equal hashes); None when b's first m Blocks have a's hashes.
    Past the shared ones a Block may differ and keep its hash (a moved marker)."""
    if shared >= m:
        return None
    end = min(m, len(b))
    # The Block right after the shared ones differs (or shared would be longer): most often in its hash
    # (a sliding window's changed first message), which settles it without listing every hash.
    if shared < end and a[shared].sha != b[shared].sha:
        return shared
    j = next(compress(count(shared), map(ne, map(_SHA, a[shared:end]), map(_SHA, b[shared:end]))), None)
    if j is not None:
        return j
    return end if len(b) < m else None


def _shared_len(prev: Sequence[Block], blocks: Sequence[Block]) -> int:
    """cachesim.shared_prefix_len(prev, blocks), with one compare of the whole prefix for the two shapes
    most requests have: the last request with Blocks appended, and the same but for its last Block (a
    rolling marker moved on from it to the newest message: the paper column's every call). The general
    scan compares a request that differs in its last pair in 256-pair stretches, each two slices and a
    Python step (~2x the one compare on a 3,000-Block request); this copies the shared part once."""
    if type(prev) is Grown and type(blocks) is Grown:
        # Two requests on one run (a peer that extends its last request, see engine/sim/grown.py): its
        # part both hold is the same objects; only the items past it are compared (at most a tail's).
        k = prev.shared_run(blocks)
        if k >= 0:
            return k + cachesim.shared_prefix_len(prev[k:], blocks[k : len(prev)])
    n = len(prev)
    if n and len(blocks) >= n and blocks[n - 1] is prev[n - 1] and prev == blocks[:n]:
        return n
    k = n - 1
    if k > 0 and len(blocks) > k and blocks[k - 1] is prev[k - 1] and blocks[:k] == prev[:k]:
        return n if blocks[k] == prev[k] else k
    return cachesim.shared_prefix_len(prev, blocks)


def _said_shared(prev: Sequence[Block], blocks: Sequence[Block], same: int | None) -> int:
    """_shared_len(prev, blocks), taken from `same` (see _Req.same) when its ends agree with it."""
    if (
        same is not None
        and same <= len(prev)
        and same <= len(blocks)
        and (same == 0 or blocks[same - 1] is prev[same - 1])
        and (same == len(prev) or same == len(blocks) or blocks[same] != prev[same])
    ):
        return same
    return _shared_len(prev, blocks)


# Requests of this many Blocks or more are handed to the simulator as a Grown (see _simulate).
GROWN_FROM = 1024


def _simulate(
    name: str,
    reqs: Iterable[_Req],
    *,
    rules: str,
    model: str,
    table: PriceTable,
    outputs: Mapping[int, int],
    options: Mapping[str, Any],
    link_outputs: bool,
    automatic_prefix: bool,
    as_sent: bool = False,
    scale: float = 1.0,
    converted: dict[tuple[str, int, bool, str, str], cachesim.Block] | None = None,
) -> PolicyFigures:
    # Each call goes to the simulator as it is made and is let go after its step: the list of every
    # call held each request's Blocks a second time (a column sending the whole conversation holds
    # turns x messages of them: ~70 MB of a 3,000-turn what-if's peak). The same steps, in order.
    # `reqs` is read once, one request ahead (the next request tells this one's reply), and each
    # request's figures are made right after its step: a peer's requests, made turn by turn, are let
    # go as they are simulated (held in a list, a 3,000-turn clear_tool_uses column's were ~8.6 million
    # Block references, quadratic in the session).
    sim = CacheSimulator(rules, model, **dict(options))
    step = sim.step
    results: list[CallCache] = []
    last = float("-inf")
    # A long session sends the same blocks again and again (every request repeats the history), so each
    # distinct block is converted once; building a frozen dataclass per block per call was most of the
    # cost of this function on a long session. `converted`: the conversions of the other columns of one
    # simulate (the same `scale`), which send mostly the same blocks (on the 930-turn synthetic session,
    # 1,861 of the gates-closed column's 2,275 distinct blocks are the pipeline column's).
    conv: dict[tuple[str, int, bool, str, str], cachesim.Block] = {} if converted is None else converted
    # The same Block object is converted by one lookup of its id, done in C for a whole request (a
    # sliding window sends ~100 Blocks a turn that the previous request did not start with, nearly all
    # of them objects sent before). An id is a Block's only while the Block lives: `keep` holds every
    # Block converted by id until the column is done (the requests themselves are let go).
    by_id: dict[int, cachesim.Block] = {}
    by_id_get = by_id.get
    keep: list[Block] = []
    prev_blocks: Sequence[Block] = []
    # The last call's Blocks as the simulator took them: a Grown, so a call that keeps them is made by
    # appending its new ones (see below).
    prev_cblocks: Sequence[cachesim.Block] = ()
    marks: list[int] = []  # where the request's markers are (see _marks_after)
    prev_n = 0  # the previous request's cached prefix, which this one is checked against

    def convert(blocks: Sequence[Block]) -> list[cachesim.Block]:
        got = list(map(by_id_get, map(id, blocks)))
        # The misses, found in C (`None in got` would call each Block's Python-level __eq__).
        for i in compress(range(len(got)), map(not_, got)):
            b = blocks[i]
            ttl = b.ttl if type(b) is SentBlock else "5m"
            key = (b.sha, b.tokens, b.marker, b.segment, ttl)
            cb = conv.get(key)
            if cb is None:
                cb = conv[key] = cachesim.Block(
                    b.sha, round(b.tokens * scale), breakpoint=b.marker, ttl=ttl, segment=b.segment
                )
            got[i] = by_id[id(b)] = cb
            keep.append(b)
        return cast(list[cachesim.Block], got)

    causes: Counter[str] = Counter()
    per_turn: list[TurnFigures] = []
    compactions = 0
    out_total = 0
    times: list[float] = []
    prev: _Req | None = None
    price = table.get(model)  # the row cost() looks up for every call: looked up once
    it = iter(reqs)
    r = next(it, None)
    while r is not None:
        nreq = next(it, None)
        ts = max(r.time, last + MIN_STEP_S)
        last = ts
        out_sha: str | None = None
        if link_outputs and nreq is not None:
            # The reply's identity as later prompts carry it: the block the next request appends
            # right after this one's prompt. If the next request does not extend this one, the
            # prompt+reply unit can never be matched anyway, so any value is harmless.
            nxt = nreq.blocks
            if len(nxt) > len(r.blocks):
                out_sha = nxt[len(r.blocks)].sha
        # The engine hands consecutive requests the same Block objects for what did not change, so
        # the converted prefix of the previous call is reused (list compares check identity first).
        # A maker that says how much it kept (_Req.same) is checked at its last kept Block and the
        # next: a request edited near its end was compared several times over its whole length.
        common = _said_shared(prev_blocks, r.blocks, r.same)
        # A sliding window (the gates-closed column): a few new Blocks (the task with its new omission
        # note), then a stretch the previous request sent from a later point on, then the newest round.
        # The stretch's conversions and markers are the previous call's: not ~180 lookups a call.
        # A maker that says where it is (a window that moved on or back) is held to its ends instead.
        # The Blocks around a told stretch are cut from the request by where they are, not from its
        # new Blocks made as one slice (clear_tool_uses past its window: ~4,800 a call, to read a few).
        told = _told_stretch(prev_blocks, r.blocks, common, r.stretch)
        if told is not None:
            h, a, m = told
            new: Sequence[Block] = () if m else r.blocks[common:]
        else:
            new = r.blocks[common:]
            h, a, m = _stretch(prev_blocks, new, common)
        if m:
            s = common + h
            fresh, after = r.blocks[common:s], r.blocks[s + m :]
            marks = _marks_shifted(marks, common, fresh, after, a, m)
        else:
            marks = _marks_after(marks, common, new)
        # The call's Blocks as the simulator takes them. A long request that keeps (nearly) all of the
        # last call's is that call's extended by its new Blocks, in what it adds (a Grown: the last
        # call's run appended to); made as a tuple of the shared prefix and the new Blocks, each call
        # copied a whole-conversation request and freed the last one's (per-call work that grew with
        # the session). A short one is a tuple, one copy of the shared prefix (the last call's tuple
        # itself when it starts with all of it): cheaper than a Grown's Python-level reads there.
        if m and common + h + m + len(after) >= GROWN_FROM:
            # A long shifted request (clear_tool_uses past its window: ~4,800 Blocks, most of its calls
            # there): a Window on the last call's run (engine/sim/grown.py), the conversation's Blocks
            # in the order it grew: the stretch is not copied, only the few around it put in. Where the
            # last call's Blocks are not such a run's, one list, the stretch copied once from the last
            # call's, handed over as a Grown on that list (a copy and later a free of ~4,800 Blocks a
            # call, ~15 us; a tuple of the four parts unpacked copied the stretch three times).
            cfresh, cafter = convert(fresh), convert(after)
            view = shifted(prev_cblocks, common, cfresh, a, m, cafter)
            if view is not None:
                cblocks: Sequence[cachesim.Block] = view
            else:
                run = (
                    prev_cblocks.items(a, a + m)
                    if isinstance(prev_cblocks, Grown | Window)
                    else list(prev_cblocks[a : a + m])
                )
                run[0:0] = [*prev_cblocks[:common], *cfresh]
                run += cafter
                cblocks = Grown.of(run, own=True)
        elif m:
            cblocks = (
                *prev_cblocks[:common],
                *convert(fresh),
                *prev_cblocks[a : a + m],
                *convert(after),
            )
        elif common + len(new) >= GROWN_FROM:
            grown = prev_cblocks if type(prev_cblocks) is Grown else Grown.of(prev_cblocks[:common])
            cblocks = grown.extended(common, convert(new) if new else ())
        else:
            head = prev_cblocks if common == len(prev_cblocks) else prev_cblocks[:common]
            cblocks = tuple(head) + tuple(convert(new)) if new else tuple(head)
        prev_blocks, prev_cblocks = r.blocks, cblocks
        out_t = _output(r, outputs)
        # cblocks[:common] are the last call's own Blocks: the simulator need not compare them again.
        # And where the stretch is, so the simulator does not search for it again (m == 0: none).
        c = step(Call(cblocks, ts, model, out_t, out_sha, None, common, (h, a, m)))
        results.append(c)
        brk = None
        if prev is not None:
            mm = min(prev_n, len(prev.blocks))
            # The common case (the request keeps the previous one's cached prefix) is settled by the
            # Blocks the two share (found above, in C); attribute_cache_break walks the prefix block by
            # block to name the cause.
            j = _first_changed(prev.blocks, r.blocks, common, mm)
            if j is not None:
                # attribute_cache_break names the cause from the first changed Block (j) alone: handed
                # that one, it does not list the ~180 hashes of a sliding window's prefix a turn again.
                why = attribute_cache_break(
                    prev.blocks[j : j + 1],
                    r.blocks[j : j + 2],  # and the next one: an inserted block is told by it
                    1,
                    model_changed=False,
                    flipped_latches=r.latch_flips,
                    actions=[{"step": s} for s in r.actions],
                )
                brk = why["cause"] if why else None
                if brk == "history rewritten" and r.compaction and r.actions:
                    brk = f"history rewritten by {', '.join(r.actions)}"  # a peer's own step
        if brk:
            causes[brk] += 1
        if r.compaction is not None:
            # A peer's compaction: its own step dropped or rewrote part of what it sent before. A prefix
            # the session changed (a flipped latch, a new section) is not one, nor is a trim that cut
            # where the last one did.
            comp = (
                r.compaction
                and prev is not None
                and _first_changed(prev.blocks, r.blocks, common, len(prev.blocks)) is not None
            )
        elif as_sent:
            # The agent's own compaction: its request no longer starts with everything it sent before.
            comp = (
                prev is not None
                and _first_changed(prev.blocks, r.blocks, common, len(prev.blocks)) is not None
            )
        else:
            comp = not COMPACTION_STEPS.isdisjoint(r.actions)  # in C: no generator frame a turn
        compactions += comp
        per_turn.append(
            TurnFigures(
                r.turn,
                c.input_tokens,
                c.cache_read,
                c.cache_write,
                c.uncached,
                out_t,
                call_cost(price, c, out_t, r.time),
                comp,
                brk,
            )
        )
        out_total += out_t
        times.append(r.time)
        prev_n = _prefix_from_marks(marks, len(r.blocks), automatic_prefix)
        prev, r = r, nreq
    tot = cachesim.totals(results)
    usd, crossed, off = _column_cost(price, model, table, tot, out_total, per_turn, times)
    return PolicyFigures(
        name,
        model,
        rules,
        tot,
        out_total,
        usd,
        compactions,
        dict(sorted(causes.items())),
        per_turn,
        crossed,
        off,
    )


def _peer_requests(peer: Any, views: Iterable[Any], reqs_p: Sequence[_Req]) -> Iterator[_Req]:
    """A peer policy's requests, turn by turn, from the uncompacted view of each turn (`views`) and the
    pipeline's request of it (its time and latch flips)."""
    peer.reset()
    side = True  # the last request was a side call (or there was none): a peer's `same` is not about it
    for v, r in zip(views, reqs_p, strict=True):
        pr = peer.request(v)
        # A summarizing call goes out first, in the same turn: billed and cached like any request. The
        # session's latch flips are the pipeline's (the same events).
        at, flips = r.time, r.latch_flips
        for sc in pr.side_calls:
            yield _Req(v.turn, at, sc.blocks, pr.actions, flips, sc.output_tokens, False)
        told = not (side or pr.side_calls)
        same = pr.same if told else None
        side = bool(pr.side_calls)
        yield _Req(
            v.turn, at, pr.blocks, pr.actions, flips, None, pr.compaction, same, pr.stretch if told else None
        )


def _column_cost(
    price: ModelPrice,
    model: str,
    table: PriceTable,
    tot: CallCache,
    out_total: int,
    per: list[TurnFigures],
    times: Sequence[float | None],
) -> tuple[float, int, int]:
    """A column's cost, how many of its calls bill at the row's long-context rates and how many at its
    off-peak rates (`times`: each call's, in `per`'s order). Both are per call (the whole call, when its
    own input passes the line or it was made off-peak), so a column with such calls adds up its calls;
    any other is billed on its totals, as it always was."""
    off = 0
    if price.off_peak is not None:
        off = sum(1 for at in times if rates_at(price, at) is price.off_peak)
    crossed = 0
    if price.long_context is not None:
        crossed = sum(
            1
            for t in per
            if crosses_long_context(
                price,
                {
                    "uncached": t.uncached_tokens,
                    "cache_read": t.cache_read_tokens,
                    "cache_write": t.cache_write_tokens,
                },
            )
        )
    if crossed or off:
        return math.fsum(t.cost_usd for t in per), crossed, off
    return cost(model, tot, out_total, prices=table, totals=True), 0, 0


def _output(r: _Req, outputs: Mapping[int, int]) -> int:
    """The output tokens `r` bills: its own (a peer's summarizing call), else its turn's reply."""
    return outputs.get(r.turn, 0) if r.output is None else r.output


def _actual(
    usages: Mapping[int, Mapping[str, Any]],
    model: str,
    table: PriceTable,
    turns: Iterable[int],
    times: Mapping[int, float] | None = None,
) -> PolicyFigures | None:
    if not usages:
        return None
    per: list[TurnFigures] = []
    calls: list[CallCache] = []
    out_total = 0
    price = table.get(model)  # the row cost() looks up for every call: looked up once
    at: list[float | None] = []
    for t in sorted(turns):
        u = usages.get(t)
        if u is None:
            continue
        # 1-hour writes are billed at their own rate (Anthropic: 2x input against 1.25x for 5 minutes)
        c = usage_call(u)
        o = int(u.get("output_tokens") or 0)
        calls.append(c)
        out_total += o
        at.append((times or {}).get(t))
        per.append(
            TurnFigures(
                t,
                c.input_tokens,
                c.cache_read,
                c.cache_write,
                c.uncached,
                o,
                call_cost(price, c, o, at[-1]),
                False,
                None,
            )
        )
    tot = cachesim.totals(calls)
    usd, crossed, off = _column_cost(price, model, table, tot, out_total, per, at)
    return PolicyFigures("actual", model, "provider", tot, out_total, usd, None, None, per, crossed, off)


# ------------------------------------------------------------------------------------------ entry points


class NoRequests(SimulateError):
    """The session has no request (an agent that stopped before its first call): `report` lists it as
    idle."""


def simulate_events(
    events: list[Event],
    settings: SimSettings | None = None,
    *,
    source: str = "<journal>",
    counter: TokenCounter | None = None,
    counts: CountTable | None = None,
) -> SimulationReport:
    """Simulate a whole session (see module doc). `events` are unpacked journal events.

    `counts`: the recording's token-count table (`RecordingReader.token_counts()`), used when no
    `counter` is given: texts the agent counted are not tokenized again. The table is held against the
    recording's traces as the pass runs; if it disagrees, or does not fit this reader's tokenizer, the
    session is counted afresh and a note says so. The figures are the same either way."""
    return simulate_stream(lambda: events, settings, source=source, counter=counter, counts=counts)


def simulate_stream(
    read: Callable[[], Iterable[Event]],
    settings: SimSettings | None = None,
    *,
    source: str = "<journal>",
    counter: TokenCounter | None = None,
    counts: CountTable | None = None,
) -> SimulationReport:
    """simulate_events of a journal that `read()` hands out afresh each call (a recording read from
    disk: `recording_events`), holding none of its events: one pass finds the session, the turns and
    what the columns need of usages, errors and times; a second folds and builds every turn (a third,
    for a recording with `actual` events, reads those and the blobs they name). What is held is the
    pipeline's live state, each column's built requests (Blocks mostly shared turn to turn) and per
    turn figures; holding the events as well took ~2/3 of simulate's memory (a 100,000-turn 126 MB
    recording: 2.7 GB). Errors are the ones simulate_events raises, from the pass that meets them.

    The cyclic collector is held off while it runs (collector_paused): simulate allocates what it keeps
    (each column's requests, keys and figures) and next to no cyclic garbage, yet that growth set off
    collections that rescan all of it, more often and each longer as the session grows (a 3,000-turn
    session-wide what-if: 1.67 s of collections, 0.35 s at 1,500 turns; gc.callbacks). `cp-inspect
    simulate` held it off for the whole command already; the TUI's what-if now does too."""
    with collector_paused():
        return _simulate_stream(read, settings, source, counter, counts)


def _simulate_stream(
    read: Callable[[], Iterable[Event]],
    settings: SimSettings | None,
    source: str,
    counter: TokenCounter | None,
    counts: CountTable | None,
) -> SimulationReport:
    try:
        return _simulate_events_counted(read, settings, source, counter, counts)
    except ContextPipeError:
        raise
    except MALFORMED as exc:  # an event of the wrong shape, met while rebuilding: the file's fault
        raise ReplayError(
            f"its events are not what the engine writes ({type(exc).__name__}: {exc}); the recording is "
            "damaged or was not written by the ContextPipe engine"
        ) from None


def _simulate_events_counted(
    events: Callable[[], Iterable[Event]],
    settings: SimSettings | None,
    source: str,
    counter: TokenCounter | None,
    counts: CountTable | None,
) -> SimulationReport:
    t0 = time.perf_counter()
    if counts is None or counter is not None:
        return _simulate_events(events, settings, source, counter, None, t0)
    try:
        # What the table lacks is usually a few short texts: counted without building the encoder.
        carried = CarriedCounter(counts, FewTextsTokenizer())
    except CountTableError as exc:
        report = _simulate_events(events, settings, source, None, None, t0)
        report.notes.append(f"token counts: {exc}; counted afresh")
        return report
    try:
        return _simulate_events(events, settings, source, carried, carried, t0)
    except CountsDisagree as exc:
        report = _simulate_events(events, settings, source, None, None, t0)
        report.notes.append(
            f"the recording's token-count table disagrees with its own traces ({exc}): not used, "
            "every text counted afresh"
        )
        return report


class _Index:
    """What simulate needs of the whole journal before (or besides) its fold, gathered in the index pass
    (Replayer.index_stream's `visit`) so that no event is kept: whether there are `actual` events, the
    DeepSeek builds that served the calls, each turn's usage and failed calls, each request's time.
    Gathering stops at the first event it cannot read (`broken`): simulate then raises what it raised
    when it held the events, from the same place (see `usages`)."""

    def __init__(self) -> None:
        self.has_actual = False
        self.fingerprints: dict[str, None] = {}  # in order of first appearance
        self.last_fingerprint: str | None = None
        self.failed: set[int] = set()
        self.own: dict[int, dict[str, Any]] = {}  # `usage` events' usage by turn
        self.actual_usages: dict[int, dict[str, Any]] = {}
        self.req_times: dict[int, float] = {}
        self.broken = False

    def visit(self, e: Event) -> None:
        k = e.get("k")
        if k == "actual":
            self.has_actual = True
        if k in ("actual", "build") and e.get("system_fingerprint"):
            fp = str(e["system_fingerprint"])
            self.fingerprints.setdefault(fp, None)
            self.last_fingerprint = fp
        if self.broken:
            return
        try:
            if k == "usage":
                self.own[int(e["turn"])] = dict(e["usage"])
            elif k == "error":
                self.failed.add(int(e["turn"]))
            elif k == "actual":
                if e.get("usage"):
                    self.actual_usages[int(e["turn"])] = dict(e["usage"])
            elif k == "request" and isinstance(e.get("turn"), int):
                self.req_times[e["turn"]] = float(e.get("time") or 0.0)
        except Exception:  # noqa: BLE001 - raised again where simulate raised it (usages)
            self.broken = True

    def usages(self, read: Callable[[], Iterable[Event]]) -> tuple[set[int], dict[int, dict[str, Any]]]:
        """_failed_and_usages of the journal (its figures, or its error: read again to raise it)."""
        if self.broken:
            events = list(read())
            return _failed_and_usages(events, [e for e in events if e.get("k") == "actual"])
        usages = dict(self.actual_usages)
        usages.update(self.own)  # the engine's own feedback record wins (a new turn's is added at the end)
        return set(self.failed), usages

    def times(self, read: Callable[[], Iterable[Event]]) -> dict[int, float]:
        if self.broken:
            return {
                e["turn"]: float(e.get("time") or 0.0)
                for e in read()
                if e.get("k") == "request" and isinstance(e.get("turn"), int)
            }
        return self.req_times


def _simulate_events(
    read: Callable[[], Iterable[Event]],
    settings: SimSettings | None,
    source: str,
    counter: TokenCounter | None,
    carried: CarriedCounter | None,
    t0: float,
) -> SimulationReport:
    s = settings or SimSettings()
    index = _Index()
    replayer = Replayer.index_stream(read, counter, index.visit)
    if replayer.turns == 0:
        raise NoRequests(f"{source} has no requests: nothing to simulate")
    session = replayer.events[0]  # the first session event (index_stream keeps it alone)
    rec_cfg = session["config"]
    table = s.prices if isinstance(s.prices, PriceTable) else load_prices(s.prices)
    model = s.model or str(rec_cfg["model"])
    price = _price_row(table, model)
    try:
        engine_provider = (
            canonical_provider(s.provider) if s.provider else canonical_provider(rec_cfg["provider"])
        )
        if s.window is not None and s.window <= 0:
            raise SimulateError(f"--window must be a positive number of tokens, got {s.window}")
        gates = dict(s.gates) if s.gates else None
        if gates:
            OptimizeLimits().with_gates(gates)  # unknown gate names fail here, with the known ones
        thresholds = _check_thresholds(s.thresholds)
    except ConfigError as exc:
        raise SimulateError(str(exc)) from exc
    requested = s.provider
    rules = cache_rules_for(engine_provider, model, requested, price)
    notes: list[str] = []
    row_rules = price.provider.lower()

    def mismatched(r: str) -> bool:
        # "none" comes from the row itself (a model without a prompt cache: cached reads cost what input
        # does), so it is that row's own rule: it was told to choose "--provider openai or a model with
        # none prices" for a GPT-4 recording simulated as OpenAI serves GPT-4.
        return (
            row_rules in CACHE_RULE_DOCS
            and r != "none"
            and row_rules != r
            and {row_rules, r} != {"anthropic", "bedrock"}
        )

    if s.provider is None and s.model is not None and mismatched(rules):
        # A model named without a provider is simulated as the provider that serves it would serve it:
        # its wire layout and cache markers, its cache rules. The recorded provider's were applied before
        # (--model claude-sonnet-4-5 on a DeepSeek recording: OpenAI's automatic prefix cache at Claude
        # prices, no write premium, reads Anthropic never gives without breakpoints).
        engine_provider = canonical_provider(row_rules)
        requested = row_rules
        rules = cache_rules_for(engine_provider, model, requested, price)
        notes.append(
            f"--model {model} is served by {price.provider}: simulated with the {engine_provider} provider "
            f"policy and {rules} cache rules (recorded: {rec_cfg['model']} via {rec_cfg['provider']}); "
            "--provider chooses another"
        )
    if mismatched(rules):
        # Say it, never do it silently: e.g. --provider anthropic on a DeepSeek recording.
        notes.append(
            f"{rules} cache rules applied at {price.model} prices ({price.provider}); to price it as one "
            f"provider serves it, choose --provider {row_rules} or a model with {rules} prices (--model)"
        )

    options: dict[str, Any] = dict(s.sim_options or {})
    # The `actual` events (an import's): whether there are any and their fingerprints (the index pass).
    has_actual = index.has_actual
    if rules == "deepseek" and "persist_probability" not in options:
        # The serving builds in journal order: on an import's `actual` events, and on `build` events where
        # the request was journaled before its reply named the build (the tap, the proxy).
        last_fp = index.last_fingerprint
        if last_fp is not None:
            options["persist_probability"] = deepseek_persist_probability(last_fp)
            notes.append(f"DeepSeek build {last_fp}: persist probability {options['persist_probability']}")
            others = {f: deepseek_persist_probability(f) for f in index.fingerprints if f != last_fp}
            if any(p != options["persist_probability"] for p in others.values()):
                notes.append(
                    "the session was also served by "
                    + ", ".join(f"{f} (persist probability {p})" for f, p in others.items())
                    + f"; every call is simulated with the last build's {options['persist_probability']}"
                )

    # The engine's cost-aware policy weighs each compaction at the prices and cache rules this what-if
    # bills by (the named model's), not at the recorded model's.
    policy_cache = from_price(rules, price.model, price.input, price.cache_read, price.cache_write)
    notes.append(f"engine policies weigh compactions by {policy_cache.describe()}")

    overrides = {
        "window": s.window,
        "thresholds": thresholds,
        "gates": gates,
        "provider": engine_provider if requested else None,
        "policy": s.policy,
    }
    wanted = _policy_list(s.policies)
    engine_cols: list[str] = []
    peer_cols: list[str] = []
    if wanted:
        from engine.sim.policies import ENGINE_POLICIES, PEERS

        engine_cols = [n for n in wanted if n in ENGINE_POLICIES]
        peer_cols = [n for n in wanted if n in PEERS and not (n == "paper" and has_actual)]
    try:
        bp = _build_pass(
            read(),
            replayer,
            overrides,
            need_recorded=not has_actual,
            engine_policies=engine_cols,
            peers=bool(peer_cols),
            markers=rules in ("anthropic", "bedrock"),
            cache=policy_cache,
            check=carried is not None,
        )
    except ConfigError as exc:
        raise SimulateError(str(exc)) from exc
    reqs_p, reqs_c, reqs_r = bp.pipeline, bp.gates_closed, bp.recorded
    scale = bp.calibration if s.calibrate else 1.0
    if scale != 1.0:
        try:
            same_model = table.get(str(rec_cfg["model"])).model == price.model
        except UnknownModelError:
            same_model = False
        notes.append(
            f"token counts scaled by {scale:.3f}: {rec_cfg['model']}'s own tokens per engine token, "
            "learned from the recorded usage (applied to every simulated column, as_sent included; the "
            "engine planned each turn against the window with the ratio known by then)"
            + (
                f"; {model} has no recorded usage here, so its own tokenizer may count differently"
                if not same_model
                else ""
            )
        )

    failed, usages = index.usages(read)
    billed_failures = failed & usages.keys()
    failed = unbilled(failed, usages)
    if failed:
        # A failed call (server error, prompt too long) is not billed and leaves nothing in the cache.
        notes.append(
            f"{counted(len(failed), 'failed call')} left out of every column: turns {sorted(failed)}"
        )
    if billed_failures:
        notes.append(
            f"{counted(len(billed_failures), 'failed call')} billed all the same (the provider reported usage "
            f"before the failure, e.g. a stream cut short) kept in every column: turns {sorted(billed_failures)}"
        )
    outputs: dict[int, int] = {}
    for t, u in usages.items():
        outputs[t] = int(u.get("output_tokens") or 0)
    # A turn without provider usage (OpenHands, SWE-smith, SWE-agent imports have none) still generated
    # its reply: its output tokens are the recorded reply counted like the prompts (engine tokens at the
    # same scale). Pricing them at 0 left the output price out of every column's cost.
    uncharged = {t: bp.reply_tokens(t) for t in bp.replies if t not in outputs and t not in failed}
    if uncharged:
        for t, n in uncharged.items():
            outputs[t] = round(n * scale)
        notes.append(
            f"output tokens of {counted(len(uncharged), 'turn')} without recorded usage counted from the recorded "
            "replies with the engine's tokenizer"
        )

    def ok(reqs: Iterable[_Req]) -> Iterator[_Req]:
        return (r for r in reqs if r.turn not in failed)

    link = (
        rules == "deepseek"
        and "reasoner" not in model.lower()
        and "reasoner" not in str(rec_cfg["model"]).lower()
    )
    if rules == "deepseek" and not link:
        # A reasoner's reply includes reasoning tokens that are generated (and cached) but never sent
        # back, so no later prompt can contain the prompt+reply unit.
        notes.append("reasoning model: replies are not matched as cached prefixes")
    automatic = rules in ("openai", "deepseek")

    # Block conversions shared by every column (one scale): converted once for the whole report.
    converted: dict[tuple[str, int, bool, str, str], cachesim.Block] = {}

    def run(
        name: str, reqs: Iterable[_Req], as_sent: bool = False, outs: Mapping[int, int] | None = None
    ) -> PolicyFigures:
        return _simulate(
            name,
            ok(reqs),
            rules=rules,
            model=model,
            table=table,
            outputs=outputs if outs is None else outs,
            options=options,
            link_outputs=link,
            automatic_prefix=automatic,
            as_sent=as_sent,
            scale=scale,
            converted=converted,
        )

    try:
        pol_p = run("pipeline", reqs_p)
        # The same requests give the same figures: simulated once.
        pol_c = (
            replace(pol_p, name="gates_closed", turns=list(pol_p.turns))
            if bp.closed_is_pipeline
            else run("gates_closed", reqs_c)
        )
        if reqs_r is not None:
            # Said in what the recording lacks, not in event names: beside the column named "actual", "no
            # `actual` events" read as if the actual column had nothing in it.
            notes.append(
                "as_sent is the engine's requests under the recorded settings: this recording holds no copy "
                "of the requests as the agent sent them (an import or a `cp-inspect run` recording does)"
            )
            # Under the recorded settings the pipeline column already simulated these very requests.
            pol_s = (
                replace(pol_p, name="as_sent", turns=list(pol_p.turns))
                if bp.recorded_is_pipeline
                else run("as_sent", reqs_r)
            )
        else:
            actual, blobs = _actual_and_blobs(read())
            sent = _as_sent(actual, blobs, replayer.counter, rules in ("anthropic", "bedrock"))
            del actual, blobs
            pol_s = run("as_sent", sent, as_sent=True)
    except cachesim.CacheSimError as exc:
        raise SimulateError(f"the cache simulator rejected the requests: {exc}") from exc

    extra: dict[str, PolicyFigures | None] = {}
    try:
        for name in wanted:
            if name in engine_cols:
                extra[name] = run(name, bp.engine[name])
            elif name == "paper" and has_actual:
                extra[name] = replace(pol_s, name="paper")
            elif name in peer_cols:
                # The peer's requests are made as the simulator takes them, turn by turn, and let go
                # after their step (see _simulate).
                extra[name] = run(name, _peer_requests(PEERS[name](), bp.views, reqs_p), as_sent=True)
    except cachesim.CacheSimError as exc:
        raise SimulateError(f"the cache simulator rejected the requests: {exc}") from exc
    if "paper" in extra and not has_actual:
        notes.append(
            "paper: rebuilt from the uncompacted conversation (this recording holds no copy of the requests as "
            "the agent sent them)"
        )
    if "paper" in extra and s.window is not None:
        notes.append(
            f"paper is at the recorded window ({rec_cfg['window']:,}), every other column at {s.window:,}"
        )
    # A request larger than its window is one no provider serves: the column prices a session that
    # could not have run (a rebuilt paper baseline past the recorded window; a peer that keeps a whole
    # round larger than the window). Said, so its figures are not read as a bill someone could pay.
    # The engine's own columns too: a --window smaller than what the session cannot do without (the
    # system prompt, the tools, the newest round) leaves requests no trim brings under it, and --window
    # 10 priced the pipeline as a 71% saving on the demo with no word that no request could be sent.
    over = []
    for name, f in {**extra, "pipeline": pol_p, "gates_closed": pol_c}.items():  # the table's columns first
        limit = int(rec_cfg["window"]) if name == "paper" else int(s.window or rec_cfg["window"])
        n = sum(1 for t in f.turns if t.prompt_tokens > limit) if f is not None else 0
        if n:
            over.append(
                f"{name} {n} of {counted(len(f.turns) if f is not None else 0, 'call')} (window {limit:,})"
            )
    if over:
        notes.append("requests larger than their window, which a provider would reject: " + "; ".join(over))

    real_model = str(rec_cfg["model"])
    try:
        actual_table_model = table.get(real_model).model
        actual_model = real_model
    except UnknownModelError:
        actual_model = model
        actual_table_model = price.model
    if usages and actual_table_model != price.model:
        notes.append(f"actual is billed at {real_model} prices (what the provider really charged)")
    # Each call's time, for a row priced by the hour (DeepSeek's off-peak): the request's.
    req_times = index.times(read)
    pol_a = _actual(
        {t: u for t, u in usages.items() if t not in failed}, actual_model, table, usages, req_times
    )

    cols = {"pipeline": pol_p, "gates_closed": pol_c, "as_sent": pol_s, "actual": pol_a, **extra}
    notes.extend(_price_notes(cols, table))

    be = break_even_cached_price_ratio(
        pol_p.totals, pol_c.totals, price, pol_p.output_tokens - pol_c.output_tokens
    )
    return SimulationReport(
        source=source,
        recorded={"model": rec_cfg["model"], "provider": rec_cfg["provider"], "window": rec_cfg["window"]},
        model=model,
        engine_provider=engine_provider,
        cache_rules=rules,
        window=s.window or int(rec_cfg["window"]),
        turns=replayer.turns,
        simulated_turns=sum(1 for r in reqs_p if r.turn not in failed),
        policies=cols,
        break_even_cached_price_ratio=be,
        notes=notes,
        elapsed_s=time.perf_counter() - t0,
        prices={
            "model": price.model,
            "provider": price.provider,
            "input": price.input,
            "cache_read": price.cache_read,
            "cache_write": price.cache_write,
            "cache_write_1h": price.cache_write_1h,
            "output": price.output,
            "as_of": price.as_of,
            "source": price.source,
        },
        calibration=scale,
    )


def _price_notes(cols: Mapping[str, PolicyFigures | None], table: PriceTable) -> list[str]:
    """What the price rows billed that one rate per token does not show: calls billed whole at a row's
    long-context rates (Claude Sonnet 4/4.5 past 200K input tokens), and a row's own note (DeepSeek's
    peak rate, which off-peak hours halve)."""
    notes: list[str] = []
    by_model: dict[str, list[str]] = {}
    for name, f in cols.items():
        if f is not None and f.long_context_calls:
            by_model.setdefault(f.model, []).append(f"{name} {f.long_context_calls} of {len(f.turns)}")
    for model, parts in by_model.items():
        row = table.get(model)
        lc = row.long_context
        if lc is None or row.long_context_above is None:
            continue
        notes.append(
            f"calls over {row.long_context_above:,} input tokens billed whole at {row.model}'s long-context rates "
            f"(${lc.input}/M input, ${lc.cache_read}/M cached, ${lc.cache_write}/M cache write, ${lc.output}/M "
            f"output; such a prompt needs the 1M-context beta): " + "; ".join(parts)
        )
    off: dict[str, list[str]] = {}
    for name, f in cols.items():
        if f is not None and table.get(f.model).off_peak is not None:
            off.setdefault(f.model, []).append(f"{name} {f.off_peak_calls} of {len(f.turns)}")
    for model, parts in off.items():
        row = table.get(model)
        op = row.off_peak
        assert op is not None
        hours = " and ".join(f"{a:02d}:00-{b:02d}:00" for a, b in row.peak_hours)
        notes.append(
            f"{row.model}: calls made off-peak by their recorded time billed at the off-peak rates (${op.input}/M "
            f"input, ${op.cache_read}/M cached, ${op.output}/M output): "
            + "; ".join(parts)
            + f". Peak hours "
            f"are {hours} UTC{' on weekdays' if row.peak_weekdays_only else ''}. A call with no real time "
            "(an import without timestamps, or one from before off-peak billing began) and one on a public "
            "holiday the provider bills off-peak (not known here) bill at the list rate"
        )
    seen: set[str] = set()
    for f in cols.values():
        if f is None:
            continue
        row = table.get(f.model)
        if row.note and row.off_peak is None and row.model not in seen:  # (an off-peak row's: said above)
            seen.add(row.model)
            notes.append(f"{row.model}: {row.note}")
    return notes


def unbilled(failed: Iterable[int], usages: Mapping[int, object]) -> set[int]:
    """Of the turns whose call failed (an `error` event), those the provider did not bill: the ones with no
    usage. A call that failed before the provider read its prompt (a server error, a prompt too long) has
    none; one cut after the provider reported its usage (a stream closed early, an error event mid-stream:
    Anthropic's message_start carries the input and cache figures) was billed and wrote the cache, so it
    counts in every column as any other call (report's cost then agrees with `top`'s)."""
    return {t for t in failed if t not in usages}


def _failed_and_usages(
    events: list[Event], actual: list[Event]
) -> tuple[set[int], dict[int, dict[str, Any]]]:
    """The turns whose call failed (`error` events), and each turn's usage: an `actual` event's (of
    `actual`, the recording's), overridden by the engine's own `usage` event for the turn.

    One pass over the events for both (a long session's events are cold in the cache by now: each pass
    costs what touching every event costs). A malformed event raises what the separate passes this
    replaced raised, in their order: on any error the passes run again, one after the other."""
    failed: set[int] = set()
    own: dict[int, dict[str, Any]] = {}
    try:
        for e in events:
            k = e.get("k")
            if k == "usage":
                own[int(e["turn"])] = dict(e["usage"])
            elif k == "error":
                failed.add(int(e["turn"]))
        usages = {int(e["turn"]): dict(e["usage"]) for e in actual if e.get("usage")}
    except Exception:
        failed = {int(e["turn"]) for e in events if e.get("k") == "error"}  # raises as before (below too)
        usages = {}
        for e in events:
            if e.get("k") == "actual" and e.get("usage"):
                usages[int(e["turn"])] = dict(e["usage"])
        for e in events:
            if e.get("k") == "usage":
                usages[int(e["turn"])] = dict(e["usage"])
        raise  # (not reached: the passes do what the one pass did)
    usages.update(own)  # the engine's own feedback record wins (a new turn's is added at the end)
    return failed, usages


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


def _actual_and_blobs(events: Iterable[Event]) -> tuple[list[Event], dict[str, str]]:
    """The `actual` events and the blobs (replayer_blobs) of a journal, in one pass: what _as_sent reads."""
    actual: list[Event] = []
    blobs: dict[str, str] = {}
    for e in events:
        k = e.get("k")
        if k == "actual":
            actual.append(e)
        elif k == "blob":
            d = e["data"]
            blobs[e["h"]] = d if isinstance(d, str) else d.decode()
    return actual, blobs


def replayer_blobs(events: Iterable[Event]) -> dict[str, str]:
    out: dict[str, str] = {}
    for e in events:
        if e.get("k") == "blob":
            d = e["data"]
            out[e["h"]] = d if isinstance(d, str) else d.decode()
    return out


def load_recording_events(path: str | Path) -> tuple[list[Event], dict[str, Any]]:
    from engine.recording.cpsession import RecordingReader

    with RecordingReader.open(path) as r:  # its descriptor goes back now, not when the reader is collected
        return list(r.events()), dict(r.header)  # in their in-memory form already (RecordingReader's doc)


def read_counts(reader: Any) -> tuple[CountTable | None, str | None]:
    """A RecordingReader's token-count table, or (None, why) when it has one that cannot be used."""
    try:
        return reader.token_counts(), None
    except CountTableError as exc:
        return None, f"token counts: {exc}; counted afresh"


# A recording whose events (from data_start to data_end) take at most this many bytes on disk is read
# once and its events held (~16x the file in memory: ~100 MB at this size); a larger one is read again
# for each pass of simulate_stream, so its memory does not grow with its events. Each extra read
# decodes the whole file again (~5% of a simulate's CPU on a long session, more on a short one), which
# is worth it only where the events would not fit comfortably.
HOLD_EVENTS_BYTES = 6 << 20


def recording_events(
    reader: Any,
    trace_fields: Sequence[str] | None = TRACE_FIELDS,
    hold_bytes: int | None = None,
    convert: Callable[[Event], Event] | None = None,
) -> Callable[[], Iterable[Event]]:
    """The `read` simulate_stream takes, for an open RecordingReader: its events, held when the file is
    small (HOLD_EVENTS_BYTES, or `hold_bytes`), else read afresh from the file on each call (damage is
    a RecordingError from the iteration, as from reader.events()). `trace_fields` as reader.events';
    `convert`, when given, is applied to each event read."""
    limit = HOLD_EVENTS_BYTES if hold_bytes is None else hold_bytes

    def fresh() -> Iterable[Event]:
        got = reader.events(trace_fields=trace_fields)
        return got if convert is None else map(convert, got)

    if reader.data_end - reader.data_start <= limit:
        # A chunk's events a list at a time (RecordingReader.event_list): list(fresh()) resumed two
        # generators per event.
        event_list = getattr(reader, "event_list", None)
        events = list(fresh()) if convert is not None or event_list is None else event_list(trace_fields)
        return lambda: events
    return fresh


def simulate_file(
    path: str | Path, settings: SimSettings | None = None, *, counter: TokenCounter | None = None
) -> SimulationReport:
    from engine.recording.cpsession import RecordingReader

    with RecordingReader.open(path) as r:
        counts, why = read_counts(r) if counter is None else (None, None)
        report = simulate_stream(
            recording_events(r), settings, source=str(path), counter=counter, counts=counts
        )
    if why:
        report.notes.append(why)
    return report
