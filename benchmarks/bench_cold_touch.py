"""What a cold turn pays for each distinct piece of code and data it touches (issue 12).

An agent's turn runs after a model call that has evicted the CPU caches, so each distinct code object
(its bytecode, constants, names) and each object it reads comes from memory once, however often it
runs. This measures that price on generated Python of the engine's shape (attribute loads, dict reads,
small arithmetic, a call per function), in four variants that run the SAME bytecodes:

  one code    one function called N times on one object
  many code   N distinct functions (the same source text, compiled apart) called once each, one object
  many data   one function called N times on N distinct objects
  many both   N distinct functions on N distinct objects

each timed warm (run right before) and cold (bench_engine's cache evictor run first, as --iso's cold
state does), thread CPU, the minimum over --repeats. Cold minus warm, divided by what the variant
touches that the one-code variant does not, is the price of a distinct code object (and its lines and
bytes of bytecode) or a distinct object. bench_turn_steps.py --touch counts those per engine turn:
multiplying gives the predicted cold excess of a turn, to set beside bench_engine.py --iso's measured
cold and warm turn.

    .venv/bin/python benchmarks/bench_cold_touch.py [--n 120] [--lines 9] [--repeats 40]
    .venv/bin/python benchmarks/bench_cold_touch.py --engine TRAJECTORY [--provider anthropic] [--window 32000]
        [--warm 10] [--per-turn] [--copies]
    .venv/bin/python benchmarks/bench_cold_touch.py --tokenizer TRAJECTORY [--repeats 40]

--engine splits an engine turn's cold excess itself. Each turn runs in three states, each with its own
pipeline A and a twin B fed the same trajectory (one process, the states interleaved turn by turn):
warm (B's turn, then A's, nothing evicted), cold (caches evicted, then A's turn: what --iso --evict
times) and twin (caches evicted, B's same turn, then A's). B's turn brings back everything the two
share: the code (the engine's Python, the interpreter's and the tokenizer's machine code, type caches)
and the turn's input (the new messages' strings) but not A's own state (its history, memos, carried
lane state). So cold - twin is what A's turn pays for code and shared input coming back, twin - warm
what it pays for its own state. Thread CPU, each turn's minimum over --repeats; with and without the
engine's tokenizing (its counter's own timer).

--engine FILE --copies: the engine-level check that distinct code, not bytecodes, sets the cold price.
A second copy of the engine is imported (the same source, its own modules, code objects, classes; the
tokenizer shared). Each timed region runs two pipelines' same turn back to back, after an eviction
(cold) or not (warm): "same", both pipelines on the first copy; "distinct", the second on the second
copy. The two run the same bytecodes; "distinct" touches twice the code. distinct - same, cold, is
what the second copy's distinct lines cost when they come from memory (bench_turn_steps --touch
counts them); warm it should be ~0.

--tokenizer FILE: one count of texts of the trajectory's tool outputs (shortest to longest, and a
five-character one), warm and cold, by the engine's counter (the bpe-openai crate) and by tiktoken
(the same counts): what a turn's counting of new content pays after a model call. Wall ns (a count
waits on nothing), the lower quartile over --repeats. One text at a time; bench_cold_count.py counts
the texts the engine itself tokenized, turn by turn, by those two counters and others.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

# One engine-like line: attribute and dict reads, a compare, arithmetic, a store to a local.
BODY = "    t{i} = s.a + s.b * {i} if s.c.get('k{i}', 0) >= 0 else s.d[{j}]\n"


class State:
    __slots__ = ("a", "b", "c", "d")

    def __init__(self, n: int) -> None:
        self.a, self.b = n, n + 1
        self.c = {f"k{i}": i for i in range(16)}
        self.d = list(range(16))


def make(k: int, lines: int) -> Callable[[State], int]:
    """A function of `lines` lines compiled from its own source (distinct code object, constants and
    names for each k: k only enters through the function's name and file name)."""
    src = "def f(s):\n" + "".join(BODY.format(i=i, j=i % 16) for i in range(lines)) + "    return t0\n"
    ns: dict[str, Any] = {}
    exec(compile(src, f"<touch {k}>", "exec"), ns)
    fn: Callable[[State], int] = ns["f"]
    return fn


def run(fns: list[Callable[[State], int]], objs: list[State]) -> int:
    t = 0
    for fn, o in zip(fns, objs, strict=True):
        t += fn(o)
    return t


ENGINE_STATES = ("warm", "cold", "twin")


def engine(args: argparse.Namespace) -> int:
    """--engine: each turn warm, cold and twin-warmed (see the docstring); per-turn minima summed over
    the first turns, the general-path turns after them and the lane's steady turns."""
    import gc

    import bench_engine as be

    from engine.importers import load
    from engine.tokens import TokenCounter

    be.PROVIDER = args.provider
    imp = load(args.engine)
    TokenCounter().count("warm up the tokenizer")
    evict = be.cache_evictor()
    gc.freeze()
    n = len(imp.calls)
    best = {st: [[float("inf")] * n, [float("inf")] * n] for st in ENGINE_STATES}  # [cpu, tokenizing]
    lane = [False] * n
    usages = [be.agent_usage(c) for c in imp.calls]
    for _ in range(args.repeats):
        runs = {st: (be.EngineRun(imp, args.window), be.EngineRun(imp, args.window)) for st in ENGINE_STATES}
        fed = dict.fromkeys(ENGINE_STATES, 0)
        gc.collect()
        gc.disable()
        for k, call in enumerate(imp.calls):
            for st in ENGINE_STATES:
                a, b = runs[st]
                if st != "warm":
                    evict()
                if st != "cold":  # (the cold state's twin is never used)
                    be.engine_turn(b, call, fed[st], usages[k])
                tok0 = a.tokenizer.cpu
                t0 = time.thread_time()
                _req, fed[st] = be.engine_turn(a, call, fed[st], usages[k])
                took = time.thread_time() - t0
                # Each list's own minimum, as --iso takes them (the turn's and its tokenizing's).
                best[st][0][k] = min(best[st][0][k], took)
                best[st][1][k] = min(best[st][1][k], a.tokenizer.cpu - tok0)
                carried = getattr(a.pipe, "_express", None)
                lane[k] = carried is not None and getattr(carried, "record", None) is not None
        gc.enable()
        for a, b in runs.values():
            a.close()
            b.close()
    warm = min(args.warm, n - 1)
    groups = {
        "turn 0": [0],
        f"turns 1-{warm - 1}": list(range(1, warm)),
        f"general path >= {warm}": [k for k in range(warm, n) if not lane[k]],
        f"lane >= {warm} (steady)": [k for k in range(warm, n) if lane[k]],
    }
    print(f"{args.engine.name}, {args.provider}, window {args.window}: thread CPU us, minimum per turn over "
          f"{args.repeats} repeats; summed per group (per turn in brackets); with / without the engine's tokenizing")  # fmt: skip
    for name, ks in groups.items():
        if not ks:
            continue
        cells = []
        for i, what in ((0, "all"), (1, "untokenized")):
            w, c, t = (sum(best[st][0][k] - i * best[st][1][k] for k in ks) * 1e6 for st in ENGINE_STATES)
            m = len(ks)
            cells.append(f"{what}: warm {w / m:6.0f}, cold {c / m:6.0f}, twin {t / m:6.0f}; code+shared "
                         f"(cold - twin) {(c - t) / m:+5.0f}, own state (twin - warm) {(t - w) / m:+5.0f}")  # fmt: skip
        print(f"  {name} ({len(ks)} turns) per turn, " + " | ".join(cells))
    if args.per_turn:
        print("  per turn, untokenized: turn path warm cold twin")
        for k in range(n):
            w, c, t = ((best[st][0][k] - best[st][1][k]) * 1e6 for st in ENGINE_STATES)
            print(f"    {k:4d} {'lane' if lane[k] else 'general':8s} {w:6.0f} {c:6.0f} {t:6.0f}")
    return 0


def second_engine() -> Any:
    """bench_engine again, over a second import of the engine package (every module anew: its own code
    objects and classes; lazy imports inside its functions find the first copy's modules, which are put
    back). The second copy counts with the first copy's tokenizer: the tokenizer is not the engine's
    code, and its tables would be data both copies share in an agent's process."""
    import importlib

    import bench_engine as be1

    from engine import tokens as tokens1

    tokens1.default_tokenizer()
    first = {
        k: v
        for k, v in sys.modules.items()
        if k == "engine" or k.startswith("engine.") or k == "bench_engine"
    }
    for k in first:
        del sys.modules[k]
    try:
        be2 = importlib.import_module("bench_engine")
        import engine.tokens as tokens2

        tokens2._DEFAULT = tokens1._DEFAULT
    finally:
        for k in [k for k in sys.modules if k == "engine" or k.startswith("engine.") or k == "bench_engine"]:
            del sys.modules[k]
        sys.modules.update(first)
    assert be2.Pipeline is not be1.Pipeline
    return be2


def copies(args: argparse.Namespace) -> int:
    """--engine FILE --copies (see the docstring): per turn, the two pipelines' turns timed together in
    the states same / distinct x warm / cold, interleaved; each turn's minimum over --repeats."""
    import gc

    import bench_engine as be

    from engine.importers import load

    be2 = second_engine()
    be.PROVIDER = be2.PROVIDER = args.provider
    imp = load(args.engine)
    from engine.tokens import TokenCounter

    TokenCounter().count("warm up the tokenizer")
    evict = be.cache_evictor()
    gc.freeze()
    n = len(imp.calls)
    states = [(v, st) for v in ("same", "distinct") for st in ("warm", "cold")]
    best = {key: [float("inf")] * n for key in states}
    tok = {key: [float("inf")] * n for key in states}
    usages = [be.agent_usage(c) for c in imp.calls]
    for _ in range(args.repeats):
        # Per state the two timed pipelines and, for the warm states, two more on the same copies that
        # run the same turn right before (the states take turns, so without them a copy's code would
        # last have run before another state's eviction).
        runs = {
            key: tuple(
                (be, be if key[0] == "same" else be2)[i % 2].EngineRun(imp, args.window) for i in range(4)
            )
            for key in states
        }
        fed = dict.fromkeys(states, 0)
        gc.collect()
        gc.disable()
        for k, call in enumerate(imp.calls):
            for key in states:
                a, b, c, d = runs[key]
                if key[1] == "cold":
                    evict()
                else:
                    be.engine_turn(c, call, fed[key], usages[k])
                    be.engine_turn(d, call, fed[key], usages[k])
                tok0 = a.tokenizer.cpu + b.tokenizer.cpu
                t0 = time.thread_time()
                be.engine_turn(a, call, fed[key], usages[k])
                _req, fed[key] = be.engine_turn(b, call, fed[key], usages[k])
                took = time.thread_time() - t0
                best[key][k] = min(best[key][k], took)
                tok[key][k] = min(tok[key][k], a.tokenizer.cpu + b.tokenizer.cpu - tok0)
        gc.enable()
        for four in runs.values():
            for r in four:
                r.close()
    warm = min(args.warm, n - 1)
    print(f"{args.engine.name}, {args.provider}, window {args.window}: two pipelines' same turn timed together, "
          f"thread CPU us per turn (mean of each turn's minimum over {args.repeats} repeats); untokenized in brackets")  # fmt: skip
    for name, ks in (
        ("turn 0", [0]),
        (f"turns 1-{warm - 1}", list(range(1, warm))),
        (f"turns >= {warm}", list(range(warm, n))),
    ):
        cell = {
            key: (
                sum(best[key][k] for k in ks) * 1e6 / len(ks),
                sum(best[key][k] - tok[key][k] for k in ks) * 1e6 / len(ks),
            )
            for key in states
        }
        line = ", ".join(f"{v} {st} {cell[(v, st)][0]:.0f} ({cell[(v, st)][1]:.0f})" for v, st in states)
        dc = cell[("distinct", "cold")][1] - cell[("same", "cold")][1]
        dw = cell[("distinct", "warm")][1] - cell[("same", "warm")][1]
        print(f"  {name}: {line}; distinct - same untokenized: cold {dc:+.0f}, warm {dw:+.0f}")
    return 0


def tokenizer(args: argparse.Namespace) -> int:
    """--tokenizer FILE (see the docstring)."""
    import gc

    from bench_engine import cache_evictor

    from engine.importers import load
    from engine.tokens import default_tokenizer

    imp = load(args.tokenizer)
    texts = sorted(
        {m.content for c in imp.calls for m in c.messages if m.role == "tool" and m.content}, key=len
    )
    tok = default_tokenizer()
    tok.count("load the counter")
    encode = tok._tiktoken_encode()
    counters: dict[str, Callable[[str], int]] = {tok.backend: tok.count, "tiktoken": lambda s: len(encode(s))}
    evict = cache_evictor()
    gc.freeze()
    gc.disable()

    def timed(fn: Callable[[str], int], text: str, cold: bool) -> int:
        got = []
        for _ in range(args.repeats):
            fn(text)
            if cold:
                evict()
            t0 = time.perf_counter_ns()
            fn(text)
            got.append(time.perf_counter_ns() - t0)
        return sorted(got)[len(got) // 4]

    print(f"{args.tokenizer.name}: one count, ns (lower quartile of {args.repeats}), warm / cold")
    for text in [
        "hello",
        *(texts[i] for i in (0, len(texts) // 4, len(texts) // 2, 3 * len(texts) // 4, -1)),
    ]:
        cells = []
        for name, fn in counters.items():
            w, c = timed(fn, text, False), timed(fn, text, True)
            cells.append(f"{name} {w:7d} / {c:7d} ({c / len(text):5.0f} a character cold)")
        print(f"  {len(text):6d} characters: " + ", ".join(cells))
    gc.enable()
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=120, help="calls a region makes (distinct functions or objects)")
    ap.add_argument("--lines", type=int, default=9, help="lines of each function")
    ap.add_argument("--repeats", type=int, default=40)
    ap.add_argument("--engine", type=Path, help="a trajectory: split the engine turn's cold excess instead")
    ap.add_argument("--provider", default="anthropic")
    ap.add_argument("--window", type=int, default=32_000)
    ap.add_argument("--warm", type=int, default=10, help="turns before steady state (as bench_engine's)")
    ap.add_argument("--per-turn", action="store_true", help="with --engine: each turn's figures too")
    ap.add_argument("--copies", action="store_true", help="with --engine: same code twice against two copies")
    ap.add_argument(
        "--tokenizer", type=Path, help="a trajectory: the cold price of counting its tool outputs"
    )
    args = ap.parse_args()
    if args.tokenizer is not None:
        return tokenizer(args)
    if args.engine is not None:
        return copies(args) if args.copies else engine(args)
    import gc

    from bench_engine import cache_evictor

    n = args.n
    evict = cache_evictor()
    gc.freeze()
    one_fn = make(0, args.lines)
    many_fn = [make(k, args.lines) for k in range(n)]
    one_obj = State(1)
    many_obj = [State(k) for k in range(n)]
    variants = {
        "one code": ([one_fn] * n, [one_obj] * n),
        "many code": (many_fn, [one_obj] * n),
        "many data": ([one_fn] * n, many_obj),
        "many both": (many_fn, many_obj),
    }
    best: dict[str, dict[str, list[float]]] = {v: {"warm": [], "cold": []} for v in variants}
    gc.disable()
    for _ in range(args.repeats):
        for name, (fns, objs) in variants.items():
            for state in ("warm", "cold"):
                run(fns, objs)  # warm: this; cold: evicted right after
                if state == "cold":
                    evict()
                t0 = time.thread_time_ns()
                run(fns, objs)
                best[name][state].append((time.thread_time_ns() - t0) / 1000)
    gc.enable()
    code = one_fn.__code__
    size = len(code.co_code)
    print(f"{n} calls of a {args.lines}-line function ({size} bytes of bytecode, {len(code.co_names)} names, "
          f"{len(code.co_consts)} constants); thread CPU us, min / median over {args.repeats} repeats")  # fmt: skip
    got: dict[str, tuple[float, float]] = {}
    for name in variants:
        w, c = min(best[name]["warm"]), min(best[name]["cold"])
        wm, cm = statistics.median(best[name]["warm"]), statistics.median(best[name]["cold"])
        got[name] = (w, c)
        print(
            f"  {name:9s}  warm {w:7.1f} / {wm:7.1f}   cold {c:7.1f} / {cm:7.1f}   cold - warm {c - w:7.1f}"
        )
    base = got["one code"][1] - got["one code"][0]
    per_code = (got["many code"][1] - got["many code"][0] - base) / (n - 1)
    per_obj = (got["many data"][1] - got["many data"][0] - base) / (n - 1)
    print(f"  a distinct code object cold: +{per_code * 1000:.0f} ns ({per_code * 1000 / args.lines:.0f} ns a "
          f"distinct line, {per_code * 1000 * 1024 / size:.0f} ns a KiB of bytecode); a distinct object read "
          f"cold: +{per_obj * 1000:.0f} ns")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
