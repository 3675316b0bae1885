"""Session-wide what-if (engine/sim/simulate.py, `cp-inspect simulate`).

Synthetic tests build a small session with engine.Pipeline directly, so they run everywhere. Real-data
tests import a DeepSeek trajectory from ../shared/trajectories (or $CONTEXTPIPE_TRAJECTORIES) into
tmp_path and skip, saying why, when that folder is absent.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from engine.pipeline import Pipeline
from engine.sim.cachesim import CallCache
from engine.sim.pricing import PriceTable, cost, load_prices
from engine.sim.simulate import SimSettings, simulate_events, simulate_file
from engine.sim.simulate_cost import break_even_cached_price_ratio
from engine.sim.simulate_figures import POLICY_NAMES
from engine.sim.simulate_settings import SimulateError, cache_rules_for
from engine.tokens import TokenCounter

TRAJ = Path(
    os.environ.get("CONTEXTPIPE_TRAJECTORIES")
    or Path(__file__).resolve().parents[2] / "shared" / "trajectories"
)
DEEPSEEK_FILE = TRAJ / "mini-swe-agent-pr816" / "deepseek_chat_dev__pyvista__pyvista-4315.traj.json"
KEYS = (
    "prompt_tokens",
    "uncached_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "cache_hit_rate",
    "cost_usd",
    "compactions",
    "cache_breaks",
    "cache_break_causes",
)
COUNTER = TokenCounter()  # shared: counts are cached by content hash, which keeps the suite fast


# ------------------------------------------------------------------------------ a synthetic session


def _synthetic(record: Path | None = None, turns: int = 14) -> Pipeline:
    """A coding-agent loop: each turn one tool call whose ~600-token output piles up in history."""
    now = [1000.0]
    pipe = Pipeline(
        "claude-sonnet-4",
        "anthropic",
        200_000,
        record=record,
        serve=False,
        counter=COUNTER,
        clock=lambda: now[0],
    )
    pipe.identity("You are a careful coding agent. Work in small, verified steps.")
    pipe.add_tool(
        "bash",
        "Run a shell command",
        {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]},
    )
    pipe.user("Fix the failing test in tests/test_io.py. " + "Context about the repository. " * 40)
    for k in range(turns):
        pipe.next_request()
        pipe.record_usage({"input_tokens": 1000 + 700 * k, "output_tokens": 50 + k, "cache_read_tokens": 0})
        pipe.assistant(
            f"Step {k}: looking at file {k}.",
            [{"id": f"c{k}", "name": "bash", "arguments": {"command": f"cat f{k}.py"}}],
        )
        body = "\n".join(f"line {k}.{i}: value = compute({i}, {k}) # a comment about it" for i in range(60))
        pipe.tool_result(f"c{k}", body)
        now[0] += 20.0
    pipe.next_request()
    pipe.record_usage({"input_tokens": 1000 + 700 * turns, "output_tokens": 10})
    return pipe


@pytest.fixture(scope="module")
def synth_events() -> list[dict[str, Any]]:
    pipe = _synthetic()
    return list(pipe.journal.events)


def test_synthetic_json_has_every_policy_and_key(synth_events: list[dict[str, Any]]) -> None:
    r = simulate_events(synth_events, SimSettings(), counter=COUNTER)
    j = r.to_json()
    assert set(j["policies"]) == set(POLICY_NAMES)
    assert "break_even_cached_price_ratio" in j
    for name in POLICY_NAMES:
        pol = j["policies"][name]
        assert pol is not None, name
        for k in KEYS:
            assert k in pol, (name, k)
    json.dumps(j)  # serialisable as is


def test_synthetic_without_actual_events_as_sent_is_the_recorded_engine(
    synth_events: list[dict[str, Any]],
) -> None:
    r = simulate_events(synth_events, SimSettings(), counter=COUNTER)
    p, s = r.policies["pipeline"], r.policies["as_sent"]
    assert p is not None and s is not None
    # No overrides: the what-if pipeline is the recorded engine, so both columns are identical.
    assert p.totals == s.totals
    assert any("holds no copy of the requests as the agent sent them" in n for n in r.notes)
    a = r.policies["actual"]
    assert a is not None
    usage = [e["usage"] for e in synth_events if e.get("k") == "usage"]
    assert a.totals.input_tokens == sum(u["input_tokens"] for u in usage)
    assert a.output_tokens == sum(u["output_tokens"] for u in usage)


def test_synthetic_tight_window_compacts_and_gates_closed_never_does(
    synth_events: list[dict[str, Any]],
) -> None:
    r = simulate_events(synth_events, SimSettings(window=6000), counter=COUNTER)
    p, c = r.policies["pipeline"], r.policies["gates_closed"]
    assert p is not None and c is not None
    assert c.compactions == 0
    assert p.compactions and p.compactions > 0
    assert p.totals.input_tokens < c.totals.input_tokens
    assert p.cache_breaks and p.cache_breaks > 0
    assert all("history rewritten" in k or "tool schemas" in k for k in (p.cache_break_causes or {}))
    # The budget guarantee still holds with every gate closed: no request exceeds the window.
    assert max(t.prompt_tokens for t in c.turns) <= 6000


def test_cost_is_pricing_cost_over_the_totals(synth_events: list[dict[str, Any]]) -> None:
    table = load_prices()
    r = simulate_events(synth_events, SimSettings(window=6000), counter=COUNTER)
    for name in POLICY_NAMES:
        pol = r.policies[name]
        assert pol is not None
        want = cost(pol.model, pol.totals, pol.output_tokens, prices=table)
        assert pol.cost_usd == pytest.approx(want, rel=1e-12)
        # ... and the per-turn costs add up to it (cost is linear in tokens).
        assert sum(t.cost_usd for t in pol.turns) == pytest.approx(want, rel=1e-9)
        assert pol.totals.input_tokens == (
            pol.totals.cache_read + pol.totals.cache_write + pol.totals.uncached
        )


def test_unknown_model_names_the_known_ones(synth_events: list[dict[str, Any]]) -> None:
    with pytest.raises(SimulateError) as exc:
        simulate_events(synth_events, SimSettings(model="no-such-model"), counter=COUNTER)
    msg = str(exc.value)
    assert "no-such-model" in msg and "claude-sonnet-4" in msg and "--model" in msg


def test_unknown_gate_and_threshold_fail_clearly(synth_events: list[dict[str, Any]]) -> None:
    with pytest.raises(SimulateError, match="known gates"):
        simulate_events(synth_events, SimSettings(gates={"nope": False}), counter=COUNTER)
    with pytest.raises(SimulateError, match="known thresholds"):
        simulate_events(synth_events, SimSettings(thresholds={"nope": 0.5}), counter=COUNTER)


# ------------------------------------------------------------------------------ break-even, mapping


def _table(cache_read: float) -> PriceTable:
    return PriceTable.from_dict(
        {
            "models": {
                "m": {
                    "provider": "x",
                    "input": 2.0,
                    "output": 8.0,
                    "cache_read": cache_read,
                    "cache_write": 2.5,
                    "as_of": "2026-01-01",
                    "source": "test",
                }
            }
        }
    )


def test_break_even_on_a_hand_made_case() -> None:
    # pipeline: fewer prompt tokens, fewer reads; gates closed: more tokens, mostly read from the cache.
    pipe = CallCache(input_tokens=800, cache_read=300, cache_write=100, uncached=400)
    closed = CallCache(input_tokens=1000, cache_read=900, cache_write=0, uncached=100)
    # d_unc = 300, d_read = -600, d_write = 100 at 2.5:  r = -(300*2 + 100*2.5) / (-600*2) = 850/1200
    r = break_even_cached_price_ratio(pipe, closed, _table(0.0).get("m"))
    assert r == pytest.approx(850 / 1200)
    t = _table(2.0 * 850 / 1200)  # cached price = r * input price: both cost the same
    assert cost("m", pipe, 0, prices=t) == pytest.approx(cost("m", closed, 0, prices=t))
    # Cheaper cached tokens favour the policy with more reads (gates closed); dearer ones the pipeline.
    lo, hi = _table(0.1), _table(1.9)
    assert cost("m", closed, prices=lo) < cost("m", pipe, prices=lo)
    assert cost("m", pipe, prices=hi) < cost("m", closed, prices=hi)


def test_break_even_none_without_a_crossing() -> None:
    same = CallCache(1000, 500, 0, 500)
    assert break_even_cached_price_ratio(same, same, _table(0.2).get("m")) is None
    # pipeline both reads less AND sends fewer uncached tokens: cheaper at every cached price.
    better = CallCache(600, 400, 0, 200)
    assert break_even_cached_price_ratio(better, same, _table(0.2).get("m")) is None


def test_cache_rules_mapping() -> None:
    table = load_prices()
    assert cache_rules_for("openai", "deepseek-chat", None, table.get("deepseek-chat")) == "deepseek"
    assert cache_rules_for("openai", "gpt-4o", None, table.get("gpt-4o")) == "openai"
    assert cache_rules_for("deepseek", "my-finetune", "deepseek", None) == "deepseek"
    assert cache_rules_for("anthropic", "claude-sonnet-4", None, None) == "anthropic"
    assert cache_rules_for("bedrock", "claude-sonnet-4", None, None) == "bedrock"
    # GPT-4 and GPT-4 Turbo have no prompt cache (a cached read costs what input does): no simulated hits.
    for model in ("gpt-4", "gpt-4-0613", "gpt-4-turbo-2024-04-09", "gpt-4-1106-preview"):
        assert cache_rules_for("openai", model, None, table.get(model)) == "none", model


def test_older_models_price_by_their_own_rows() -> None:
    """Names the shared trajectories and common datasets carry, each to its own row: a dated snapshot to
    its model, GPT-4 Turbo not to GPT-4 (the longest name that prefixes it), GPT-4o not to GPT-4."""
    table = load_prices()
    want = {
        "gpt-4": "gpt-4", "gpt-4-0613": "gpt-4", "gpt-4-turbo-2024-04-09": "gpt-4-turbo",
        "gpt-4-0125-preview": "gpt-4-turbo", "gpt-4o-2024-08-06": "gpt-4o", "gpt-4.1-mini": "gpt-4.1-mini",
        "claude-3-5-sonnet-20241022": "claude-3-5-sonnet", "claude-3-5-haiku-20241022": "claude-3-5-haiku",
    }  # fmt: skip
    assert {m: table.get(m).model for m in want} == want
    assert table.get("gpt-4").input == 30.0 and table.get("claude-3-5-sonnet").cache_read == 0.3


# ------------------------------------------------------------------------------ CLI


def test_cli_text_json_and_prices(tmp_path: Path) -> None:
    from inspector.cli import app

    rec = tmp_path / "s.cpsession"
    _synthetic(rec, turns=8).close()
    runner = CliRunner()
    res = runner.invoke(app, ["simulate", str(rec), "--window", "6000"])
    assert res.exit_code == 0, res.output
    for name in POLICY_NAMES:
        assert name in res.output
    assert "break-even" in res.output

    res = runner.invoke(app, ["simulate", str(rec), "--json", "--gate", "drop_rounds=off"])
    assert res.exit_code == 0, res.output
    j = json.loads(res.output)
    assert set(j["policies"]) == set(POLICY_NAMES)

    prices = tmp_path / "prices.json"
    prices.write_text(
        json.dumps(
            {
                "models": {
                    "claude-sonnet-4": {
                        "provider": "anthropic",
                        "input": 30.0,
                        "output": 150.0,
                        "cache_read": 3.0,
                        "cache_write": 37.5,
                        "as_of": "2026-01-01",
                        "source": "test",
                    }
                }
            }
        )
    )
    res2 = runner.invoke(
        app, ["simulate", str(rec), "--json", "--prices", str(prices), "--gate", "drop_rounds=off"]
    )
    assert res2.exit_code == 0, res2.output
    j2 = json.loads(res2.output)
    # Every price is 10x the bundled one, so is every bill.
    assert j2["policies"]["pipeline"]["cost_usd"] == pytest.approx(
        10 * j["policies"]["pipeline"]["cost_usd"], rel=1e-6
    )

    bad = runner.invoke(app, ["simulate", str(rec), "--model", "no-such-model"])
    assert bad.exit_code == 2
    assert "Known models" in bad.output


# ------------------------------------------------------------------------------ real DeepSeek data


@pytest.fixture(scope="module")
def deepseek_rec(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not DEEPSEEK_FILE.exists():
        pytest.skip(f"real trajectories not found at {TRAJ} (set CONTEXTPIPE_TRAJECTORIES)")
    from engine.importers import load
    from engine.importers.ingest import ingest

    rec = tmp_path_factory.mktemp("sim") / "pyvista.cpsession"
    pipe, _ = ingest(load(DEEPSEEK_FILE), rec, counter=COUNTER)
    pipe.close()
    return rec


def test_real_actual_equals_the_source_sums(deepseek_rec: Path) -> None:
    data = json.loads(DEEPSEEK_FILE.read_text())
    usage = [
        (m.get("extra") or {}).get("response", {}).get("usage") or {}
        for m in data["messages"]
        if m.get("role") == "assistant"
    ]
    usage = [u for u in usage if "prompt_tokens" in u]
    r = simulate_file(deepseek_rec, counter=COUNTER)
    a = r.policies["actual"]
    assert a is not None
    assert a.totals.input_tokens == sum(u["prompt_tokens"] for u in usage)
    assert a.totals.cache_read == sum(u["prompt_cache_hit_tokens"] for u in usage)
    assert a.totals.uncached == sum(u["prompt_cache_miss_tokens"] for u in usage)
    assert a.output_tokens == sum(u["completion_tokens"] for u in usage)
    assert r.cache_rules == "deepseek"  # engine policy "openai" + a DeepSeek model -> DeepSeek rules
    s = r.policies["as_sent"]
    assert s is not None
    # The simulator on what the agent really sent lands near the provider's own hit rate.
    assert abs(s.cache_hit_rate - a.cache_hit_rate) < 0.05


def test_simulate_of_an_import_reads_its_actual_events_without_the_importers(deepseek_rec: Path) -> None:
    """The as_sent column folds an import's `actual` events (engine/recording/actual.py) without
    importing the importers package and its format parsers, which a plain simulate never uses."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    code = (
        "import json, sys\n"
        "from inspector.simulate_command import simulate\n"
        f"simulate([__import__('pathlib').Path({str(deepseek_rec)!r})], as_json=True)\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('engine.importers'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(root)}, cwd=root).stdout
    report, _, modules = out.rpartition("\n[")
    assert json.loads("[" + modules) == []
    assert json.loads(report)["policies"]["as_sent"]["calls"] > 0


def test_real_tight_window_pipeline_sends_fewer_tokens(deepseek_rec: Path) -> None:
    r = simulate_file(deepseek_rec, SimSettings(window=32000), counter=COUNTER)
    p, c = r.policies["pipeline"], r.policies["gates_closed"]
    assert p is not None and c is not None
    assert c.compactions == 0
    assert p.compactions and p.compactions > 0
    assert p.totals.input_tokens < c.totals.input_tokens
    be = r.break_even_cached_price_ratio
    if be is not None:
        price = load_prices().get(r.model)
        # At the break-even cached price both cost the same (output tokens are identical).
        t = PriceTable.from_dict(
            {
                "models": {
                    "x": {
                        "provider": "deepseek",
                        "input": price.input,
                        "output": price.output,
                        "cache_read": be * price.input,
                        "cache_write": price.cache_write,
                        "as_of": "-",
                        "source": "-",
                    }
                }
            }
        )
        assert cost("x", p.totals, prices=t) == pytest.approx(cost("x", c.totals, prices=t), rel=1e-9)


def test_real_anthropic_pricing(deepseek_rec: Path) -> None:
    r = simulate_file(
        deepseek_rec,
        SimSettings(provider="anthropic", model="claude-sonnet-4", window=32000),
        counter=COUNTER,
    )
    p = r.policies["pipeline"]
    assert p is not None and r.cache_rules == "anthropic"
    assert p.totals.cache_write > 0 and p.totals.cache_read > 0
    a = r.policies["actual"]
    assert a is not None and a.model == "deepseek-chat"  # the real bill stays at the real model's prices


# ------------------------------------------------------------------ per-turn figures against a plain walk


def _naive(reqs: list[Any], rules: str, automatic: bool, as_sent: bool) -> list[tuple[Any, ...]]:
    """Per turn (cache split, compaction, cache-break cause) the slow, obvious way: every call's blocks
    converted afresh, every pair of requests walked block by block."""
    from engine.feedback import attribute_cache_break
    from engine.sim.cachesim import Block as CBlock
    from engine.sim.cachesim import CacheSimulator, Call
    from engine.sim.simulate_column import COMPACTION_STEPS
    from engine.sim.simulate_marks import _prefix_count

    calls = [
        Call(tuple(CBlock(b.sha, b.tokens, breakpoint=b.marker, segment=b.segment) for b in r.blocks),
             1.0 + k, "claude-sonnet-4")
        for k, r in enumerate(reqs)
    ]  # fmt: skip
    results = CacheSimulator(rules, "claude-sonnet-4", min_cacheable_tokens=100).simulate(calls)
    out = []
    for k, (r, c) in enumerate(zip(reqs, results, strict=True)):
        prev = reqs[k - 1] if k else None
        brk = None
        if prev is not None:
            b = attribute_cache_break(prev.blocks, r.blocks, _prefix_count(prev.blocks, automatic),
                                      model_changed=False, flipped_latches=r.latch_flips,
                                      actions=[{"step": s} for s in r.actions])  # fmt: skip
            brk = b["cause"] if b else None
        if as_sent:
            comp = prev is not None and [b.sha for b in r.blocks[: len(prev.blocks)]] != [
                b.sha for b in prev.blocks
            ]
        else:
            comp = any(s in COMPACTION_STEPS for s in r.actions)
        out.append((c.cache_read, c.cache_write, c.uncached, comp, brk))
    return out


@pytest.mark.parametrize("rules", ["anthropic", "openai", "deepseek"])
@pytest.mark.parametrize("as_sent", [False, True])
def test_per_turn_breaks_and_compactions_match_a_block_by_block_walk(rules: str, as_sent: bool) -> None:
    from engine.providers.base import Block
    from engine.sim.simulate_column import _simulate
    from engine.sim.simulate_requests import _Req

    def b(sha: str, section: str = "history", marker: bool = False, tokens: int = 300) -> Block:
        seg = {"tools": "tools", "identity": "system"}.get(section, "messages")
        return Block(section, seg, sha, tokens, marker)

    tools, ident = b("T", "tools"), b("I", "identity")
    seqs = [
        ([tools, ident, b("u"), b("a1", marker=True)], []),
        ([tools, ident, b("u"), b("a1"), b("r1"), b("a2", marker=True)], []),  # extends
        ([tools, ident, b("u"), b("a1"), b("r1"), b("a2"), b("r2", marker=True)], []),
        ([tools, ident, b("u"), b("s1"), b("r2", marker=True)], ["clear_tool_results"]),  # history rewritten
        ([tools, ident, b("u"), b("s1"), b("r2"), b("a3", marker=True)], []),
        ([tools, ident, b("u"), b("s1"), b("r2"), b("a3", marker=True)], []),  # the same request again
        ([tools, ident, b("u", tokens=301), b("a4", marker=True)], ["drop_rounds"]),  # same sha, other size
        ([b("T2", "tools"), ident, b("u"), b("a4", marker=True)], []),  # tools changed
        ([b("T2", "tools"), ident], []),  # shorter than the cached prefix
    ]
    reqs = [_Req(k, 1.0 + k, blocks, actions, []) for k, (blocks, actions) in enumerate(seqs)]
    automatic = rules != "anthropic"
    fig = _simulate("x", reqs, rules=rules, model="claude-sonnet-4", table=load_prices(), outputs={},
                    options={"min_cacheable_tokens": 100}, link_outputs=False, automatic_prefix=automatic,
                    as_sent=as_sent)  # fmt: skip
    got = [(t.cache_read_tokens, t.cache_write_tokens, t.uncached_tokens, t.compaction, t.cache_break)
           for t in fig.turns]  # fmt: skip
    assert got == _naive(reqs, rules, automatic, as_sent)
    assert fig.cache_breaks and fig.compactions  # the case exercises both


def test_body_less_builds_give_simulate_the_same_blocks_and_traces(
    synth_events: list[dict[str, Any]],
) -> None:
    """simulate builds without the request body (Pipeline.build(body=False)): every turn, under the
    recorded settings, a tight window and every gate closed, the blocks and the trace are those of the
    full build, bar the request and prefix hashes (left empty)."""
    from dataclasses import replace

    from engine.optimize.context import OptimizeLimits
    from engine.recording.replay import Replayer

    replayer = Replayer(synth_events, COUNTER)
    pipe = replayer.new_pipeline()
    checked = 0
    for ev in synth_events:
        if ev.get("k") == "request":
            pipe.begin_request(ev["turn"])
            base = pipe.config
            tight = base.with_overrides(window=6000)
            for cfg in (base, tight, replace(tight, limits=OptimizeLimits.all_closed())):
                full = pipe.build(ev.get("bound", {}), cfg)
                bare = pipe.build(ev.get("bound", {}), cfg, body=False)
                assert bare.serialized.body == b"" and full.serialized.body
                assert bare.serialized.blocks == full.serialized.blocks
                assert bare.trace["request_sha256"] == bare.trace["prefix_sha256"] == ""
                assert {**bare.trace, "request_sha256": "", "prefix_sha256": ""} == {
                    **full.trace, "request_sha256": "", "prefix_sha256": ""
                }
                checked += 1
        pipe.fold(ev)
    assert checked >= 3 * 14


def test_lean_builds_weigh_no_compaction_behind_a_closed_gate(synth_events: list[dict[str, Any]]) -> None:
    """simulate's builds are lean (Pipeline.build(lean=True)): with the drop_rounds gate closed no cut
    is chosen only for the trace to report it, and nothing simulate reads changes: the blocks, the
    state, the actions and every section of the trace are those of the weighed build."""
    from dataclasses import replace

    from engine.optimize.context import OptimizeLimits
    from engine.policy import cost_aware
    from engine.recording.replay import Replayer

    replayer = Replayer(synth_events, COUNTER)
    pipe = replayer.new_pipeline()
    real, chosen = cost_aware._choose_cut, [0]

    def counted(*a: Any) -> Any:
        chosen[0] += 1
        return real(*a)

    unweighed = 0
    for ev in synth_events:
        if ev.get("k") == "request":
            pipe.begin_request(ev["turn"])
            tight = pipe.config.with_overrides(window=6000)
            for cfg in (replace(tight, limits=OptimizeLimits.all_closed()), tight.with_overrides(gates={"drop_rounds": False})):
                full = pipe.build(ev.get("bound", {}), cfg, body=False)
                cost_aware._choose_cut = counted  # type: ignore[assignment]
                try:
                    before = chosen[0]
                    lean = pipe.build(ev.get("bound", {}), cfg, body=False, lean=True)
                    assert chosen[0] == before  # nothing chosen behind the closed gate
                finally:
                    cost_aware._choose_cut = real  # type: ignore[assignment]
                assert lean.serialized.blocks == full.serialized.blocks
                assert lean.state == full.state
                assert lean.trace["actions"] == full.trace["actions"]
                assert lean.trace["sections"] == full.trace["sections"]
                if full.trace["compaction"]["decision"] == "skipped":
                    assert lean.trace["compaction"]["reason"] == "gate drop_rounds is off (not weighed)"
                    unweighed += 1
        pipe.fold(ev)
    assert unweighed >= 10  # the tight window puts the closed gate to work on most turns


def test_as_sent_counts_a_tool_with_its_description_as_the_engine_does(tmp_path: Path) -> None:
    """The as-sent column (the paper baseline of `--policies`) counted each tool as its name and
    parameters only, while the engine's columns count name, description and parameters: on an agent
    with long tool descriptions every engine column read a few percent dearer than the agent's own
    requests for the same content. An import's requests rebuilt unchanged by the engine (no optimizer
    gate, a window nothing is trimmed in) now price exactly as the agent's."""
    from engine.importers.ingest import ingest
    from engine.importers.model import CallRec, ImportedSession, MessageRec, ToolSchemaRec, UsageRec

    params = {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}
    long_doc = "Run a shell command in the repository and return its output. " * 40
    tools = (ToolSchemaRec("bash", long_doc, params), ToolSchemaRec("view", "Show a file. " * 30, params))
    msgs = [MessageRec("system", "You are careful."), MessageRec("user", "fix the failing test")]
    calls = []
    for k in range(6):
        said = MessageRec("assistant", f"step {k}: looking at module {k}")
        calls.append(CallRec(tuple(msgs), said, tools, UsageRec(0, 5, 0, 0), float(k), "gpt-4o"))
        msgs += [said, MessageRec("user", f"output {k} " * 20)]
    pipe, _ = ingest(ImportedSession("test", "test", "gpt-4o", "openai", calls), tmp_path / "t.cpsession")
    pipe.close()
    r = simulate_file(tmp_path / "t.cpsession", SimSettings(window=128_000, calibrate=False))
    sent, closed = r.policies["as_sent"], r.policies["gates_closed"]
    assert sent is not None and closed is not None
    assert [t.prompt_tokens for t in sent.turns] == [t.prompt_tokens for t in closed.turns]
    # The descriptions are most of each request: without them as_sent read far below the engine.
    tools_only = TokenCounter().count(long_doc)
    assert sent.turns[0].prompt_tokens > tools_only
