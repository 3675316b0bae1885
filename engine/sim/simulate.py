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

This module runs a what-if (`simulate_events`, `simulate_stream`, `simulate_file`); its parts are one
module each: what it is asked and its errors (`simulate_settings`), what it reports (`simulate_figures`),
the one pass that builds every column's requests (`simulate_pass`), a column's cache simulation
(`simulate_column`, on `simulate_requests` and `simulate_marks`), the requests as the agent sent them
(`simulate_as_sent`), what a column costs (`simulate_cost`), what it reads of the journal besides the
fold (`simulate_index`) and how it reads a recording file (`simulate_read`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from engine.errors import ConfigError, ContextPipeError
from engine.optimize.context import OptimizeLimits
from engine.policy.cachecost import cache_named, from_price
from engine.providers import canonical_provider
from engine.recording.counts import CarriedCounter, CountTable, CountTableError
from engine.recording.journal import Event
from engine.recording.replay import MALFORMED, Replayer, ReplayError, not_the_engines
from engine.sim import cachesim
from engine.sim.blocks import CountsDisagree
from engine.sim.cachesim import deepseek_persist_probability
from engine.sim.few_texts import FewTextsTokenizer
from engine.sim.pricing import PriceTable, UnknownModelError, load_prices
from engine.sim.simulate_as_sent import _actual_and_blobs, _as_sent
from engine.sim.simulate_column import _simulate
from engine.sim.simulate_cost import _actual, _price_notes, break_even_cached_price_ratio
from engine.sim.simulate_figures import PolicyFigures, SimulationReport
from engine.sim.simulate_index import _Index, unbilled
from engine.sim.simulate_pass import _build_pass
from engine.sim.simulate_read import read_counts, recording_events
from engine.sim.simulate_requests import _peer_requests, _Req
from engine.sim.simulate_settings import (
    CACHE_RULE_DOCS,
    NoRequests,
    SimSettings,
    SimulateError,
    _check_thresholds,
    _policy_list,
    _price_row,
    cache_rules_for,
)
from engine.store.gc_pause import collector_paused
from engine.tokens import TokenCounter
from engine.wording import counted


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
        raise ReplayError(f"its events are {not_the_engines(exc)}") from None


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
            f"policy and {cache_named(rules)} (recorded: {rec_cfg['model']} via {rec_cfg['provider']}); "
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
    if index.retried:
        # Attempts the agent (or its SDK) sent again after they failed unbilled (a 429, a 529): the turns
        # are the calls that were retried; the attempts cost nothing and cached nothing (as a failed call)
        notes.append(
            f"{counted(sum(index.retried.values()), 'failed attempt')} sent again (rate limits, overloads) "
            f"not billed, left out of every column: before turns {sorted(index.retried)}"
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

    # A cache break at a turn whose request rewrote the agent's own history is the agent's: in what it
    # sent, each rewrite; in what the engine's columns send, an edit the engine's history took too.
    by_agent: dict[int, str] = {}
    edited_by_agent: dict[int, str] = {}
    if index.rewrites:
        from engine.importers.history_edits import rewrite_cause

        by_agent = {t: rewrite_cause(d) for t, d in index.rewrites.items()}
        edited_by_agent = {t: c for t, c in by_agent.items() if index.rewrites[t].get("applied")}

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
            agent_causes=by_agent if as_sent else edited_by_agent,
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
    # Then the engine's own columns are at what they never evict (the instructions, the goal, the newest
    # round: no trim goes below it), and the largest of those requests is the least window that holds
    # them all. Said with the number (and as `least_window` in --json): the note above named no way out.
    window = int(s.window or rec_cfg["window"])
    need = max((t.prompt_tokens for f in (pol_p, pol_c) for t in f.turns), default=0)
    least_window = need if need > window else None
    if least_window is not None:
        notes.append(
            f"window {window:,} cannot hold what the engine never evicts (the instructions, the goal, the "
            f"newest round): its requests still need up to {need:,} tokens; give --window {need:,} or more "
            "(and room for the reply)"
        )

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
        window=window,
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
        retried_attempts=sum(index.retried.values()),
        least_window=least_window,
    )


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
