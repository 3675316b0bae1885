"""Session-wide what-if (`cp-inspect simulate`): figures on the long real trajectories, and timing.

Imports every long trajectory (mini-swe-agent, DeepSeek, >= 30 model calls) from ../shared/trajectories
into a temp dir, then simulates each one: the default pipeline against every optimizer gate closed, at
the recorded window and at a tighter one (where compaction kicks in), priced at DeepSeek
(deepseek-chat, DeepSeek disk-cache rules) and at Anthropic (claude-sonnet-4, engine policy anthropic
with its cache_control markers). Prints a markdown table for benchmarks/BENCHMARKS.md.

Timing (issue 15 item 6: simulate linear in the session, under 1 s CPU end to end): the longest shared
trajectory (imported) and synthetic sessions recorded by the real engine at 1x, 2x and 10x its length
(a coding-agent loop with tool outputs of 5-150 lines, recorded window). For each, interleaved over
--repeats rounds: in process (open the recording, read its events and token-count table as the CLI
does, fold, build every turn, simulate and price every column; no counter is shared between runs, so
what the table does not hold is tokenized as a first run would), thread-CPU and wall; and end to end,
`cp-inspect simulate FILE` as its own process (child CPU from getrusage, and wall), on the recording
and on a copy written without the token-count table (as every recording before it), beside
`cp-inspect --help` (the start-up every command pays) and `Replayer.verify()` (one build per turn).
With --baseline DIR (e.g. a `git archive` of an older commit), the older code's `cp-inspect simulate`
on the same file, interleaved. Medians; CPU is the figure that holds on a loaded machine.

With --ab DIR --pairs N, only the A/B that holds on a loaded machine: `cp-inspect simulate FILE` as its own
process (each tree's console-script entry point, as its pyproject.toml names it), the code under DIR and this checkout alternating (the order flips every pair), on the longest shared
trajectory and the 10x synthetic session (recorded by this checkout's engine); per session the median and
minimum child CPU of each side and the median of the per-pair ratios (this / DIR). Neighbouring runs share
the machine's state, so a pair's ratio holds where medians of rounds minutes apart do not.

    .venv/bin/python benchmarks/bench_simulate.py [TRAJECTORY_DIR] [--tight 32000,16000] [--repeats 5]
        [--timing-only] [--baseline DIR] [--ab DIR --pairs 5 [--ab-longer 20,40]] [--serialize-ab --repeats 5]
        [--bytecode cached|none] [--phases FILE...] [--growth FILE... --repeats 3] [--linearity --repeats 3]

With --phases FILE..., only where one in-process simulate of each file spends its thread CPU (by phase
and column; see phases). With --growth FILE..., only whether a turn's work grows with the session: per
fifth, each column's build and cache-simulator step (see growth). With --linearity, only the in-process CPU per turn at 1x/5x/10x (see linearity). With --serialize-ab, simulate's serialization alone, with and without request bodies (see serialize_ab).

Children find their compiled modules in a bytecode cache kept for the run (`--bytecode cached`, the
default: as an installed cp-inspect finds its .pyc files), or compile every module on every run
(`--bytecode none`: what PYTHONDONTWRITEBYTECODE=1 without .pyc files gives, as every figure measured
before 2026-12-01 21:00 UTC was; ~0.2-0.3 s CPU more per process).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from engine.importers import load  # noqa: E402
from engine.importers.ingest import ingest  # noqa: E402
from engine.recording.replay import Replayer  # noqa: E402
from engine.sim.simulate import SimSettings, SimulationReport, simulate_events  # noqa: E402
from engine.sim.simulate_read import load_recording_events  # noqa: E402
from engine.tokens import TokenCounter  # noqa: E402

MIN_CALLS = 30
PRICINGS = {
    "DeepSeek": SimSettings(),  # the recording's model (deepseek-chat / -reasoner) and rules
    "Anthropic": SimSettings(provider="anthropic", model="claude-sonnet-4"),
}


def default_root() -> Path:
    env = os.environ.get("CONTEXTPIPE_TRAJECTORIES")
    return Path(env) if env else REPO.parent / "shared" / "trajectories"


def import_long(root: Path, out_dir: Path) -> list[tuple[str, Path, int]]:
    out: list[tuple[str, Path, int]] = []
    for src in sorted((root / "mini-swe-agent-pr816").glob("*.traj.json")):
        imp = load(src)
        if len(imp.calls) < MIN_CALLS:
            continue
        name = src.name.removesuffix(".traj.json")
        rec = out_dir / f"{name}.cpsession"
        pipe, report = ingest(imp, rec)
        pipe.close()
        out.append((name, rec, report.turns))
    return out


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _be(r: SimulationReport) -> str:
    p, c = r.policies["pipeline"], r.policies["gates_closed"]
    assert p is not None and c is not None
    if r.break_even_cached_price_ratio is not None:
        return _pct(r.break_even_cached_price_ratio)
    if p.totals == c.totals:
        return "same"
    # No crossing in [0, 1]: the one cheaper at the table's price is cheaper at every price.
    return "never: pipeline cheaper" if p.cost_usd <= c.cost_usd else "never: gates closed cheaper"


def row(name: str, turns: int, window: str, pricing: str, r: SimulationReport) -> str:
    p, c = r.policies["pipeline"], r.policies["gates_closed"]
    assert p is not None and c is not None
    return (
        f"| {name} | {turns} | {window} | {pricing} | {p.totals.input_tokens:,} / {c.totals.input_tokens:,} "
        f"| {p.totals.uncached + p.totals.cache_write:,} / {c.totals.uncached + c.totals.cache_write:,} "
        f"| {_pct(p.cache_hit_rate)} / {_pct(c.cache_hit_rate)} | ${p.cost_usd:.4f} / ${c.cost_usd:.4f} "
        f"| {p.compactions} | {p.cache_breaks} / {c.cache_breaks} | {_be(r)} |"
    )


def synthetic_output(t: int) -> str:
    rnd = random.Random(t)
    n = rnd.choice((5, 20, 60, 150))
    return "".join(f"line {t}.{i}: {rnd.random():.6f} value = compute(x_{i}, y_{t})\n" for i in range(n))


def make_synthetic(path: Path, turns: int, window: int = 128_000) -> None:
    """A coding-agent loop recorded by the real engine: one tool call per turn, usage fed back."""
    from engine.pipeline import Pipeline

    now = [1_000.0]
    pipe = Pipeline("deepseek-chat", "deepseek", window, record=path, serve=False, clock=lambda: now[0])
    pipe.identity("You are a careful coding agent.")
    pipe.add_tool("bash", "Run a shell command", {"type": "object", "properties": {"cmd": {"type": "string"}}})
    pipe.user("Fix the failing test in tests/test_io.py.")
    for t in range(turns):
        req = pipe.next_request()
        pipe.record_usage({"prompt_tokens": req.trace["final_tokens"], "completion_tokens": 40})
        now[0] += 5
        args = json.dumps({"cmd": f"sed -n 1,200p src/module_{t % 97}.py"})
        calls = pipe.assistant(f"Step {t}: read the next module.", [{"id": f"c{t}", "name": "bash", "arguments": args}])
        pipe.tool_result(calls[0].id, synthetic_output(t))
    pipe.close()


def cli_events(reader: Any) -> Any:
    """The events as `cp-inspect simulate` reads them: of each turn's trace only what simulate reads,
    since 2026-12-03 (engine.sim.simulate_read.TRACE_FIELDS, in engine.sim.simulate before 2026-12-07);
    older code reads every trace whole."""
    try:
        from engine.sim import simulate_read as sim
    except ImportError:  # older code: in simulate itself, or not at all
        from engine.sim import simulate as sim  # type: ignore[no-redef]

    fields = getattr(sim, "TRACE_FIELDS", None)
    return reader.events() if fields is None else reader.events(trace_fields=fields)


def _child_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


# How a child finds its compiled modules. "cached": in a bytecode cache kept for the run (one per code
# checkout, filled by the first, untimed, run), as an installed cp-inspect finds its .pyc files. "none":
# every module compiled from source on every run, as under PYTHONDONTWRITEBYTECODE=1 with no .pyc files
# next to the sources (the helpers' shells set it: ~0.2-0.3 s CPU of every figure measured so before).
BYTECODE = {"mode": "cached", "dir": ""}


def _process(cmd: list[str], code: Path = REPO) -> tuple[float, float]:
    """(CPU, wall) of one command run as its own process, importing the code under `code`."""
    env = {**os.environ, "PYTHONPATH": str(code)}
    if BYTECODE["mode"] == "cached":
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        key = hashlib.sha256(str(code.resolve()).encode()).hexdigest()[:16]
        env["PYTHONPYCACHEPREFIX"] = str(Path(BYTECODE["dir"]) / key)
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env.pop("PYTHONPYCACHEPREFIX", None)
    c0, w0 = _child_cpu(), time.perf_counter()
    # cwd too: `python -m` puts the working directory first on sys.path, ahead of PYTHONPATH, so a child
    # started from this checkout would import this checkout's code whatever PYTHONPATH says.
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env, cwd=code)
    return _child_cpu() - c0, time.perf_counter() - w0


def without_counts(src: Path, dst: Path) -> None:
    """The same recording written as before the token-count table existed (no counter given)."""
    from engine.recording.cpsession import RecordingReader, RecordingWriter

    with RecordingReader.open(src) as r, RecordingWriter(dst, dict(r.header)) as w:
        for ev in r.events():
            w.append(ev)


def timing(recs: list[tuple[str, Path, int]], tmp: Path, repeats: int, baseline: Path | None = None) -> None:
    from engine.recording.cpsession import RecordingReader
    from engine.recording.journal import unpack_event
    from engine.sim.simulate_read import read_counts

    name, rec, turns = max(recs, key=lambda x: x[2])
    sessions: list[tuple[str, Path, int]] = [(f"{name} (shared, longest)", rec, turns)]
    for mult in (1, 2, 10):
        path = tmp / f"synthetic-{mult}x.cpsession"
        make_synthetic(path, turns * mult)
        sessions.append((f"synthetic {mult}x", path, turns * mult))
    plain: dict[str, Path] = {}
    for label, path, _n in sessions:
        plain[label] = path.with_suffix(".nocounts.cpsession")
        without_counts(path, plain[label])
    cli = [sys.executable, "-m", "inspector.cli"]
    rows: dict[str, dict[str, list[float]]] = {s[0]: {} for s in sessions}
    help_cpu: list[float] = []
    help_wall: list[float] = []
    _process(cli + ["--help"])  # untimed: fills the bytecode cache (see BYTECODE) and the OS file cache
    for _label, path, _n in sessions:
        _process(cli + ["simulate", str(path)])
        if baseline is not None:
            _process(cli + ["simulate", str(path)], baseline)
    for _ in range(repeats):  # interleaved: every subject once per round
        c, w = _process(cli + ["--help"])
        help_cpu.append(c)
        help_wall.append(w)
        for label, path, _n in sessions:
            r = rows[label]
            # In process, as the CLI does it: open, read the events and the recording's token counts.
            c0, w0 = time.thread_time(), time.perf_counter()
            with RecordingReader.open(path) as reader:
                events = [unpack_event(e) for e in cli_events(reader)]
                counts, _why = read_counts(reader)
            simulate_events(events, SimSettings(), counts=counts)
            r.setdefault("cpu", []).append(time.thread_time() - c0)
            r.setdefault("wall", []).append(time.perf_counter() - w0)
            c0 = time.thread_time()
            events, _ = load_recording_events(path)
            ok = Replayer(events, TokenCounter()).verify().ok
            r.setdefault("verify", []).append(time.thread_time() - c0)
            assert ok, f"verify failed on {path}"
            c, w = _process(cli + ["simulate", str(path)])
            r.setdefault("e2e_cpu", []).append(c)
            r.setdefault("e2e_wall", []).append(w)
            c, w = _process(cli + ["simulate", str(plain[label])])
            r.setdefault("plain_cpu", []).append(c)
            r.setdefault("plain_wall", []).append(w)
            if baseline is not None:  # the older code on the same file (it skips the table)
                c, w = _process(cli + ["simulate", str(path)], baseline)
                r.setdefault("base_cpu", []).append(c)
                r.setdefault("base_wall", []).append(w)
    med = statistics.median
    base = rows["synthetic 1x"]
    print(f"\nsimulate timing, {repeats} interleaved rounds, medians (CPU = thread CPU in process, "
          f"child CPU end to end)")  # fmt: skip
    print(f"`cp-inspect --help` process: {1000 * med(help_cpu):.0f} ms CPU, {1000 * med(help_wall):.0f} ms wall\n")
    head = ("| session | calls | in process CPU | wall | per call CPU | x of 1x per call | verify CPU "
            "| `cp-inspect simulate` CPU | wall | same, recording without counts: CPU | wall |")  # fmt: skip
    if baseline is not None:
        head += f" baseline ({baseline}) CPU | wall |"
    print(head)
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|" + ("---:|---:|" if baseline else ""))
    for label, _path, n in sessions:
        r = rows[label]
        per_call = med(r["cpu"]) / n
        scale = per_call / (med(base["cpu"]) / turns)
        line = (f"| {label} | {n} | {1000 * med(r['cpu']):.0f} ms | {1000 * med(r['wall']):.0f} ms "
                f"| {1000 * per_call:.2f} ms | {scale:.2f}x | {1000 * med(r['verify']):.0f} ms "
                f"| {1000 * med(r['e2e_cpu']):.0f} ms | {1000 * med(r['e2e_wall']):.0f} ms "
                f"| {1000 * med(r['plain_cpu']):.0f} ms | {1000 * med(r['plain_wall']):.0f} ms |")  # fmt: skip
        if baseline is not None:
            line += f" {1000 * med(r['base_cpu']):.0f} ms | {1000 * med(r['base_wall']):.0f} ms |"
        print(line)
    print("\ngoal: the longest shared and the 10x synthetic session under 1,000 ms CPU end to end")


def console_simulate(code: Path) -> list[str]:
    """`cp-inspect simulate` as the installed script runs it for the code under `code`: the entry point
    its pyproject.toml names (inspector.cli:app until 2026-12-02, inspector.entry:main since, which takes
    a plain simulate line before importing the typer app), imported and called with argv set."""
    import tomllib

    target = tomllib.loads((code / "pyproject.toml").read_text())["project"]["scripts"]["cp-inspect"]
    module, _, func = str(target).partition(":")
    return [sys.executable, "-c", f"import sys; from {module} import {func}; sys.exit({func}())", "simulate"]


def ab(
    recs: list[tuple[str, Path, int]], tmp: Path, other: Path, pairs: int, longer: tuple[int, ...] = ()
) -> None:
    name, rec, turns = max(recs, key=lambda x: x[2])
    synthetic = tmp / "synthetic-10x.cpsession"
    make_synthetic(synthetic, turns * 10)
    sessions = [(f"{name} (shared, longest; in-sample)", rec, turns), ("synthetic 10x", synthetic, turns * 10)]
    for mult in longer:  # --ab-longer: longer synthetic sessions (does a turn's cost grow with the session?)
        path = tmp / f"synthetic-{mult}x.cpsession"
        make_synthetic(path, turns * mult)
        sessions.append((f"synthetic {mult}x", path, turns * mult))
    print(f"\n`cp-inspect simulate` A/B, {pairs} pairs per session, order flipped every pair; child CPU (wall)")
    print(f"B = {other}, A = {REPO}; bytecode: {BYTECODE['mode']}\n")
    print("| session | calls | B CPU median (min) | A CPU median (min) | median pair ratio A/B | A wall median "
          "| load average |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|")
    for label, path, n in sessions:
        _process(console_simulate(REPO) + [str(path)])  # warm the OS file cache and both's .pyc files, untimed
        _process(console_simulate(other) + [str(path)], other)
        load0 = os.getloadavg()[0]
        a: list[float] = []
        b: list[float] = []
        a_wall: list[float] = []
        for i in range(pairs):
            order = [(REPO, a), (other, b)] if i % 2 == 0 else [(other, b), (REPO, a)]
            for code, out in order:
                c, w = _process(console_simulate(code) + [str(path)], code)
                out.append(c)
                if out is a:
                    a_wall.append(w)
        med = statistics.median
        ratio = med([x / y for x, y in zip(a, b, strict=True)])
        print(f"| {label} | {n} | {1000 * med(b):,.0f} ms ({1000 * min(b):,.0f}) "
              f"| {1000 * med(a):,.0f} ms ({1000 * min(a):,.0f}) | {ratio:.2f} | {1000 * med(a_wall):,.0f} ms "
              f"| {load0:.1f}-{os.getloadavg()[0]:.1f} |")  # fmt: skip
    print("\ngoal: the longest shared and the 10x synthetic session under 1,000 ms CPU end to end (column A)")


def serialize_ab(tmp: Path, turns: int, rounds: int) -> None:
    """simulate's serialization with and without the request body, in one process: the serialize calls
    of one simulate of the 10x synthetic session (the same assemblies, in the same order, warm token
    counts), replayed into a fresh serializer per round, body=True and body=False alternating."""
    from engine.providers import make_serializer
    from engine.providers.base import Serializer

    path = tmp / "synthetic-10x.cpsession"
    if not path.exists():
        make_synthetic(path, turns * 10)
    calls: list[tuple[str, Any]] = []
    orig = Serializer.serialize

    def capture(self: Serializer, *args: Any, **kw: Any) -> Any:
        calls.append((self.policy.name, args))
        return orig(self, *args, **kw)

    Serializer.serialize = capture  # type: ignore[method-assign,assignment]
    try:
        events, _ = load_recording_events(path)
        simulate_events(events, SimSettings())
    finally:
        Serializer.serialize = orig  # type: ignore[method-assign]
    cpu: dict[bool, list[float]] = {True: [], False: []}
    for i in range(rounds):
        for body in (True, False) if i % 2 == 0 else (False, True):
            ser = make_serializer(calls[0][0])
            c0 = time.thread_time()
            for _name, args in calls:
                asm, markers, model, max_tokens, measure = args[:5]
                ser.serialize(asm, markers, model, max_tokens, measure, body=body)
            cpu[body].append(time.thread_time() - c0)
    med = statistics.median
    print(f"\nserialize calls of one simulate of {path.name}: {len(calls)}, {rounds} rounds, thread CPU")
    for body in (True, False):
        xs = cpu[body]
        print(f"body={body}: median {1000 * med(xs):,.0f} ms (min {1000 * min(xs):,.0f})")
    ratios = [a / b for a, b in zip(cpu[False], cpu[True], strict=True)]
    print(f"median ratio body=False / body=True: {med(ratios):.2f}")


def linearity(tmp: Path, turns: int, rounds: int) -> None:
    """Per-turn thread CPU of one in-process simulate (read + simulate, as the CLI runs it: collector
    off, counts from the recording) of synthetic sessions at 1x, 5x and 10x the longest shared
    trajectory's length, interleaved over `rounds` (the order flips every round), medians. Linear in
    the session means the per-turn figure holds as the session grows; what does grow is the request
    (the 10x session's gates-closed requests fill the 128k window), so some rise from 1x is expected."""
    import gc

    from engine.recording.cpsession import RecordingReader
    from engine.recording.journal import unpack_event
    from engine.sim.simulate_read import read_counts

    sessions: list[tuple[int, Path]] = []
    for mult in (1, 5, 10):
        path = tmp / f"synthetic-{mult}x.cpsession"
        if not path.exists():
            make_synthetic(path, turns * mult)
        sessions.append((turns * mult, path))
    cpu: dict[int, list[float]] = {n: [] for n, _ in sessions}
    for i in range(rounds):
        for n, path in sessions if i % 2 == 0 else sessions[::-1]:
            gc.collect()
            gc.disable()
            try:
                c0 = time.thread_time()
                with RecordingReader.open(path) as reader:
                    events = [unpack_event(e) for e in cli_events(reader)]
                    counts, _why = read_counts(reader)
                simulate_events(events, SimSettings(), counts=counts)
                cpu[n].append(time.thread_time() - c0)
            finally:
                gc.enable()
    med = statistics.median
    one = med(cpu[sessions[0][0]]) / sessions[0][0]
    print(f"\nin-process simulate per turn, {rounds} interleaved rounds, thread CPU medians "
          f"(load {os.getloadavg()[0]:.1f})")  # fmt: skip
    print("| session | turns | in process CPU | per turn | x of 1x per turn |")
    print("|---|---:|---:|---:|---:|")
    for n, _path in sessions:
        per = med(cpu[n]) / n
        print(f"| synthetic {n // turns}x | {n} | {1000 * med(cpu[n]):,.0f} ms | {1000 * per:.2f} ms | {per / one:.2f}x |")


def phases(path: Path) -> None:
    """Where one in-process simulate of `path` (at the recorded settings, as the CLI runs it: collector
    off, counts from the recording) spends its thread CPU, by phase and by column. Wrappers, not
    cProfile (which inflates small calls ~2x); a phase nested in another is counted in both."""
    import gc

    from engine import pipeline_build
    from engine.optimize import OptimizeLimits
    from engine.pipeline import Pipeline
    from engine.policy import cost_aware
    from engine.providers.base import Serializer
    from engine.recording.cpsession import RecordingReader
    from engine.recording.journal import unpack_event
    from engine.sim import simulate as sim
    from engine.sim.cachesim import CacheSimulator

    try:
        from engine.sim.blocks import SimBuilder
    except ImportError:  # older code: simulate built through Pipeline.build
        SimBuilder = None  # type: ignore[assignment,misc]

    cpu: dict[str, float] = {}
    calls: dict[str, int] = {}
    closed = OptimizeLimits.all_closed()

    def wrap(owner: Any, name: str, label: Any) -> None:
        orig = getattr(owner, name)

        def timed(*a: Any, **kw: Any) -> Any:
            key = label(a, kw) if callable(label) else label
            c0 = time.thread_time()
            try:
                return orig(*a, **kw)
            finally:
                cpu[key] = cpu.get(key, 0.0) + time.thread_time() - c0
                calls[key] = calls.get(key, 0) + 1

        setattr(owner, name, timed)

    def column(a: tuple[Any, ...], kw: dict[str, Any]) -> str:
        cfg = a[2] if len(a) > 2 else kw.get("config")
        if cfg is None:
            return "build: recorded settings"
        return "build: gates closed" if cfg.limits == closed else f"build: {cfg.policy.name}"

    wrap(Pipeline, "build", column)
    if SimBuilder is not None:  # simulate's own builds (engine/sim/blocks.py), since 2026-12-02
        from engine.sim.blocks import BlockSerializer

        wrap(SimBuilder, "build", column)
        wrap(Pipeline, "decide", "  decide (plan + optimize)")
        # (The providers' Serializer._laid_out until 2e0f9bd, engine/sim/block_layout.py since: one row.)
        wrap(BlockSerializer, "blocks", "  block layout (BlockSerializer.blocks)")
        if hasattr(SimBuilder, "_closed"):  # gates-closed builds without the policy's decision, since 12-03
            wrap(SimBuilder, "_closed", "  closed build: plan + budget guarantee + markers (no decide)")
    try:  # the texts the recording's count table lacks (engine/sim/few_texts.py), since 2026-12-02
        from engine.sim.few_texts import FewTextsTokenizer

        wrap(FewTextsTokenizer, "count", "  tokenizing texts the count table lacks")
    except ImportError:
        pass
    wrap(Pipeline, "fold", "fold (replay of the journal)")
    wrap(cost_aware, "run", "  cost_aware.run")
    wrap(Serializer, "serialize", "  serialize")
    wrap(pipeline_build, "build_trace", "  build_trace")
    wrap(sim, "_simulate", lambda a, kw: f"cache simulation + pricing: {a[0]}")
    wrap(CacheSimulator, "simulate", "  cache simulator")
    wrap(sim, "_as_sent", "as_sent requests (imports)")
    gc.disable()
    try:
        c0 = time.thread_time()
        with RecordingReader.open(path) as reader:
            # As the CLI reads it (simulate_command.run: recording_events, since 2026-12-03 with fields).
            held = getattr(sim, "recording_events", None)
            events = list(held(reader)()) if held is not None else [unpack_event(e) for e in cli_events(reader)]
            counts, _why = sim.read_counts(reader)
        read = time.thread_time() - c0
        c0 = time.thread_time()
        simulate_events(events, SimSettings(), counts=counts)
        total = time.thread_time() - c0
    finally:
        gc.enable()
    print(f"\n{path.name}: read {1000 * read:,.0f} ms, simulate {1000 * total:,.0f} ms thread CPU")
    for key in sorted(cpu, key=lambda k: -cpu[k]):
        print(f"| {key} | {calls[key]:,} | {1000 * cpu[key]:,.0f} ms |")


def growth(path: Path, runs: int) -> None:
    """Whether a turn's work grows with the session: per fifth of one in-process simulate of `path` (as
    the CLI runs it, collector off), the median thread CPU of each column's build and of each column's
    cache-simulator step, every turn's figure the minimum over `runs` runs (the same turn, so load spikes
    drop out). Linear in the session means flat rows. One wrapper per call (~0.3 us, the same in every
    fifth)."""
    import gc

    from engine.optimize import OptimizeLimits
    from engine.recording.cpsession import RecordingReader
    from engine.sim import simulate as sim
    from engine.sim.blocks import SimBuilder
    from engine.sim.cachesim import CacheSimulator

    closed = OptimizeLimits.all_closed()
    times: dict[str, list[float]] = {}
    column = [""]
    real_build, real_simulate, real_sim = SimBuilder.build, CacheSimulator.simulate, sim._simulate

    def build(self: Any, bound: Any, cfg: Any, *a: Any, **kw: Any) -> Any:
        c0 = time.thread_time()
        try:
            return real_build(self, bound, cfg, *a, **kw)
        finally:
            key = "build: gates closed" if cfg.limits == closed else f"build: {cfg.policy.name}"
            times.setdefault(key, []).append(time.thread_time() - c0)

    def simulate_calls(self: Any, calls: Any) -> Any:
        out, key = [], f"cache simulator step: {column[0]}"
        for c in calls:
            c0 = time.thread_time()
            out.append(self.step(c))
            times.setdefault(key, []).append(time.thread_time() - c0)
        return out

    def named(name: str, *a: Any, **kw: Any) -> Any:
        column[0] = name
        return real_sim(name, *a, **kw)

    SimBuilder.build = build  # type: ignore[method-assign]
    CacheSimulator.simulate = simulate_calls  # type: ignore[method-assign]
    sim._simulate = named  # type: ignore[assignment]
    per_run: list[dict[str, list[float]]] = []
    try:
        for _ in range(runs):
            times.clear()
            with RecordingReader.open(path) as reader:
                events = list(cli_events(reader))
                counts, _why = sim.read_counts(reader)
            gc.collect()
            gc.disable()
            try:
                simulate_events(events, SimSettings(), counts=counts)
            finally:
                gc.enable()
            per_run.append({k: list(v) for k, v in times.items()})
    finally:
        SimBuilder.build = real_build  # type: ignore[method-assign]
        CacheSimulator.simulate = real_simulate  # type: ignore[method-assign]
        sim._simulate = real_sim
    med = statistics.median
    print(f"\n{path.name}: per fifth of the session, median us a call (each call the min of {runs} runs; "
          f"load {os.getloadavg()[0]:.1f})")  # fmt: skip
    print("| what | calls | 1st | 2nd | 3rd | 4th | 5th | last / 2nd |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for key in sorted(per_run[0]):
        n = min(len(r[key]) for r in per_run)
        best = [min(r[key][i] for r in per_run) for i in range(n)]
        f = max(1, n // 5)
        fifths = [1e6 * med(best[i * f : (i + 1) * f]) for i in range(5)]
        cells = " | ".join(f"{x:,.0f}" for x in fifths)
        print(f"| {key} | {n:,} | {cells} | {fifths[4] / fifths[1]:.2f} |")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("root", nargs="?", type=Path, default=default_root())
    ap.add_argument("--tight", default="32000,16000", help="comma-separated tighter windows")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--timing-only", action="store_true", help="skip the policy table")
    ap.add_argument(
        "--baseline", type=Path, help="a checkout of older code: also time its `cp-inspect simulate`"
    )
    ap.add_argument("--ab", type=Path, help="a checkout of other code: only the alternating A/B of simulate")
    ap.add_argument("--pairs", type=int, default=5, help="A/B pairs per session (with --ab)")
    ap.add_argument(
        "--ab-longer", default="", help="with --ab: also synthetic sessions this many times the longest (e.g. 20,40)"
    )
    ap.add_argument(
        "--serialize-ab", action="store_true", help="only simulate's serialization, with vs without bodies"
    )
    ap.add_argument(
        "--bytecode",
        choices=("cached", "none"),
        default="cached",
        help="children's compiled modules: cached (as installed; default) or none (compiled every run)",
    )
    ap.add_argument("--phases", type=Path, nargs="*", help="only where one simulate of each FILE spends its CPU")
    ap.add_argument("--linearity", action="store_true", help="only in-process CPU per turn at 1x/5x/10x")
    ap.add_argument("--growth", type=Path, nargs="*", help="only per-fifth build and cache-step CPU of each FILE")
    args = ap.parse_args(argv[1:])
    BYTECODE["mode"] = args.bytecode
    if args.phases:
        for path in args.phases:
            phases(path)
        return 0
    if args.growth:
        for path in args.growth:
            growth(path, args.repeats)
        return 0
    tights = [int(x) for x in str(args.tight).split(",") if x.strip()]
    if not (args.root / "mini-swe-agent-pr816").is_dir():
        print(f"no trajectories under {args.root}; nothing to measure")
        return 1
    with tempfile.TemporaryDirectory(prefix="cp-bench-sim-") as tmp:
        BYTECODE["dir"] = str(Path(tmp) / "pycache")
        recs = import_long(args.root, Path(tmp))
        print(f"{len(recs)} long trajectories (>= {MIN_CALLS} calls) imported\n")
        if args.serialize_ab:
            serialize_ab(Path(tmp), max(r[2] for r in recs), args.repeats)
            return 0
        if args.linearity:
            linearity(Path(tmp), max(r[2] for r in recs), args.repeats)
            return 0
        if args.ab is not None:
            longer = tuple(int(x) for x in str(args.ab_longer).split(",") if x.strip())
            ab(recs, Path(tmp), args.ab, args.pairs, longer)
            return 0
        if args.timing_only:
            timing(recs, Path(tmp), args.repeats, args.baseline)
            return 0
        print(
            "Pipeline / gates-closed. 'billed-new' = uncached + cache-write tokens (what is not read from "
            "the cache);\nbreak-even = cached-token price as a fraction of the input price at which both "
            "cost the same.\n"
        )
        print(
            "| trajectory | calls | window | prices | prompt tokens | billed-new tokens | cache hit | cost "
            "| compactions | cache breaks | break-even |"
        )
        print("|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|")
        counter = TokenCounter()
        for name, rec, turns in recs:
            events, _ = load_recording_events(rec)
            for wname, window in [("recorded", None)] + [(f"{t // 1000}k", t) for t in tights]:
                for pname, base in PRICINGS.items():
                    s = SimSettings(provider=base.provider, model=base.model, window=window)
                    r = simulate_events(events, s, source=str(rec), counter=counter)
                    wlabel = f"{r.window // 1000}k" if window is None else wname
                    print(row(name, turns, wlabel, pname, r))

        timing(recs, Path(tmp), args.repeats, args.baseline)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
