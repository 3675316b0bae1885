"""Agent sessions recorded by the engine, and simulate's per-turn builds over them, as the tests of
simulate's column builders compare them (a fast path against the reference through Pipeline.decide).

Two sessions: `coding_session` (one tool call a round; tests/test_sim_closed_build.py and the held lane,
wave-1 and auto tests) and `rounds_session` (one to three calls a round, user asides; the carried-cut
tests). Builds: `columns` (the what-if and gates-closed columns interleaved on one pipeline, as simulate
builds them) and `closed_builds` (the gates-closed column alone, a what-if build before each turn).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import strategies as st

from engine.optimize.context import OptimizeLimits
from engine.pipeline import Pipeline
from engine.policy.settings import PolicySettings
from engine.policy.state import CompactionState
from engine.recording.replay import Replayer
from engine.sim.blocks import SimBuilder
from tests.test_simulate import COUNTER

CLOSED = OptimizeLimits.all_closed()


def _agent(provider: str, revision: int, identity: str, now: list[float]) -> Pipeline:
    """A pipeline recording an agent at `provider` (Claude there, else DeepSeek's model) under the policy
    `revision`, with its identity and one bash tool; its clock reads now[0]."""
    model = "claude-sonnet-4" if provider == "anthropic" else "deepseek-chat"
    pipe = Pipeline(model, provider, 200_000, serve=False, counter=COUNTER, clock=lambda: now[0])
    pipe.config = replace(pipe.config, policy=PolicySettings(revision=revision))
    pipe.identity(identity)
    pipe.add_tool(
        "bash", "Run a shell command", {"type": "object", "properties": {"cmd": {"type": "string"}}}
    )
    return pipe


def coding_session(
    provider: str,
    turns: int,
    sizes: list[int],
    revision: int,
    latch_at: int | None,
    seed: int,
    task: int = 30,
) -> list[dict[str, Any]]:
    """A coding-agent loop recorded by the engine: one tool call a turn, outputs of `sizes` lines; the
    task ~5 tokens x `task` (past ~200, the prefix through it is long enough for a breakpoint of its own)."""
    now = [1000.0]
    pipe = _agent(
        provider, revision, f"You are a careful coding agent #{seed}. Work in small, verified steps.", now
    )
    pipe.latch("mode", "plan")
    pipe.user(f"Fix the failing test {seed}. " + "Context about the repository. " * task)
    for k in range(turns):
        if latch_at is not None and k == latch_at:
            pipe.latch("mode", "act")  # a flip: the history's breakpoints are suppressed this turn
            pipe.add_tool("grep", "Search files", {"type": "object", "properties": {"q": {"type": "string"}}})
        pipe.next_request()
        pipe.record_usage({"input_tokens": 900 + 650 * k, "output_tokens": 30 + k})
        calls = pipe.assistant(
            f"Step {k}.", [{"id": f"c{k}", "name": "bash", "arguments": {"cmd": f"cat f{k}"}}]
        )
        n = sizes[k % len(sizes)]
        pipe.tool_result(
            calls[0].id, "".join(f"line {seed}.{k}.{i}: value = f({i}, {k})\n" for i in range(n))
        )
        now[0] += 7.0
    pipe.next_request()
    return list(pipe.journal.events)


def rounds_session(
    provider: str, turns: int, calls: list[int], sizes: list[int], revision: int, seed: int, asides: int
) -> list[dict[str, Any]]:
    """A tool-using agent recorded by the engine: round k makes calls[k % len] tool calls with outputs of
    sizes[...] lines; every `asides`-th round the user adds a message of their own."""
    now = [1000.0]
    pipe = _agent(provider, revision, f"You are agent #{seed}.", now)
    pipe.user(f"Task {seed}: fix the failing test. " + "Some context. " * 20)
    j = 0
    for k in range(turns):
        pipe.next_request()
        pipe.record_usage({"input_tokens": 800 + 500 * k, "output_tokens": 20 + k})
        n = calls[k % len(calls)]
        made = pipe.assistant(
            f"Round {k}.",
            [{"id": f"c{k}.{i}", "name": "bash", "arguments": {"cmd": f"cat f{k}.{i}"}} for i in range(n)],
        )
        for c in made:
            lines = sizes[j % len(sizes)]
            j += 1
            pipe.tool_result(c.id, "".join(f"out {seed}.{k}.{i}: v = g({i})\n" for i in range(lines)))
        if asides and k % asides == asides - 1:
            pipe.user(f"Note {k}: keep going.")
        now[0] += 6.0
    pipe.next_request()
    return list(pipe.journal.events)


# rounds_session's arguments, drawn.
round_sessions = st.fixed_dictionaries(
    {
        "provider": st.sampled_from(["anthropic", "deepseek", "openai", "bedrock"]),
        "turns": st.integers(4, 30),
        "calls": st.lists(st.integers(1, 3), min_size=1, max_size=3),
        "sizes": st.lists(st.sampled_from([1, 8, 40, 120, 700]), min_size=1, max_size=4),
        "revision": st.sampled_from([1, 2]),
        "seed": st.integers(0, 10**6),
        "asides": st.sampled_from([0, 2, 5]),
    }
)


def observed(b: Any) -> tuple[Any, ...]:
    """What a build gives simulate, as one comparable tuple: [0] the Blocks, [1] what it did (actions),
    [2] latch flips, [3] its ceiling, [4] state, [5] the request it measures and [6] its total."""
    return (b.blocks, b.actions, b.latch_flips, b.ceiling, b.state, tuple(b.asm), b.measure.total(b.asm))


def columns(
    events: list[dict[str, Any]],
    window: int,
    early: bool = True,
    trigger: float = 1.0,
    **builder: Any,
) -> list[tuple[Any, ...]]:
    """Every turn's what-if (recorded settings at `window`, the policy's `early` and `trigger`) and
    gates-closed builds, interleaved on one pipeline as simulate builds them, as `observed` tuples
    (what-if first). `builder`: SimBuilder's options (closed_fast=, held=, ...)."""
    replayer = Replayer(events, COUNTER)
    pipe = replayer.new_pipeline()
    sim = SimBuilder(pipe, **builder)
    out: list[tuple[Any, ...]] = []
    st_p = st_c = CompactionState()
    cfgs: tuple[Any, Any, Any] | None = None
    for ev in events:
        if ev.get("k") == "request":
            pipe.begin_request(ev["turn"])
            bound = ev.get("bound", {})
            if cfgs is None or cfgs[0] is not pipe.config:
                # Derived once per recorded config, as simulate derives its columns' (_Configs).
                pcfg = pipe.config.with_overrides(window=window)
                if not early or trigger != 1.0:
                    pcfg = replace(pcfg, policy=replace(pcfg.policy, early=early, trigger=trigger))
                cfgs = (pipe.config, pcfg, replace(pcfg, limits=CLOSED))
            _base, pcfg, ccfg = cfgs
            bp = sim.build(bound, pcfg, st_p)
            bc = sim.build(bound, ccfg, st_c)
            st_p, st_c = bp.state or st_p, bc.state or st_c
            out.extend(observed(b) for b in (bp, bc))
        pipe.fold(ev)
    return out


def closed_builds(events: list[dict[str, Any]], window: int, carry: bool) -> list[tuple[Any, ...]]:
    """Every turn's gates-closed build at `window` from a fresh state (the cut carried between turns
    or not), with a what-if build before it (as simulate interleaves them on one pipeline), as
    `observed` tuples."""
    replayer = Replayer(events, COUNTER)
    pipe = replayer.new_pipeline()
    sim = SimBuilder(pipe, carry_cut=carry)
    out: list[tuple[Any, ...]] = []
    st_p = CompactionState()
    for ev in events:
        if ev.get("k") == "request":
            pipe.begin_request(ev["turn"])
            bound = ev.get("bound", {})
            pcfg = pipe.config.with_overrides(window=window)
            bp = sim.build(bound, pcfg, st_p)
            st_p = bp.state or st_p
            out.append(observed(sim.build(bound, replace(pcfg, limits=CLOSED), CompactionState())))
        pipe.fold(ev)
    return out
