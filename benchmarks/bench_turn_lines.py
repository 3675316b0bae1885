"""Where an engine turn's time goes, statement by statement, without the tokenizer (issue 12).

cProfile charges each Python call ~1 us of its own, so on a steady turn of ~200 small calls it shows the
profiler, not the turn (a 27 ms trajectory reads ~140 ms under it, and the small functions the most
inflated). This times the top-level statements of one engine function instead: its source is rewritten
with a perf_counter checkpoint before each statement of its body (nothing else changes; the function
is compiled in its own module's namespace and put in place of the original), the trajectory is replayed
as bench_engine replays it (`engine_only`: feed, next_request, record_usage, the reply), and each
statement's time is the minimum over repeats per call (noise only adds time), less the time the
engine's tokenizer spent inside it (the trajectory's tokenizing is in the header line: counting new
content is what both the engine and its peer must do). A statement's figure includes the calls it makes; time one
of those as a target of its own to go further down.

    .venv/bin/python benchmarks/bench_turn_lines.py [--file PATH] [--provider anthropic] [--window 32000]
        [--repeats 12] [--top 25] [--target express.turn] [--target Serializer._appended] [--turns 0,25] [--evict] ...

Targets: `express.turn` (the express lane's steady turn, engine/pipeline_express.py), `Pipeline.NAME`
(a method; a public call's journaling wrapper is kept around the timed body), `Serializer.NAME`
(engine/providers/base.py) or `MODULE.NAME` for a function of engine.providers.anthropic / openai,
engine.policy.cost_aware or engine.pipeline_express (e.g. `anthropic.message_json`), or `engine.MODULE:NAME` / `engine.MODULE:CLASS.NAME`
for any other (e.g. `engine.trace_lazy:TurnRecord.outcome`). Only calls that
return something other than None are counted for express.turn (a turn the lane hands to the general
path is not a lane turn, unless `--turns` names its turn). `--turns` keeps only the calls made in those turns (0-based: next_request's
count so far), e.g. a trajectory's first turn and its compaction turn, which take the general path.

The rewritten function runs a few per cent slower than the original (a call a statement); the shares
are what to read, not the sum against bench_engine's figures. Thread CPU is not used: the time is
the turn's own, minimum over repeats.

--evict runs bench_engine's cache evictor before every turn (outside the timed statements), so each
statement is timed as an agent meets it after a model call: what a statement touches for the first time
in the turn (its code, the state it reads) is in its figure, which the warm figures leave out.
"""

from __future__ import annotations

import argparse
import ast
import functools
import gc
import importlib
import inspect
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_engine as be  # noqa: E402  (this directory: its replay and tokenizer)

from engine.importers import load  # noqa: E402

WALL = time.perf_counter
MODULES = {
    "express": "engine.pipeline_express",
    "anthropic": "engine.providers.anthropic",
    "openai": "engine.providers.openai",
    "cost_aware": "engine.policy.cost_aware",
    "base": "engine.providers.base",
}


class Clock:
    """The checkpoints of the call being timed and the tokenizer's time so far."""

    def __init__(self) -> None:
        self.marks: list[tuple[int, float, float]] = []  # (statement, wall, tokenizer total)
        self.tok = 0.0

    def mark(self, i: int) -> None:
        self.marks.append((i, WALL(), self.tok))


def resolve(target: str) -> tuple[Any, str, Callable[..., Any], dict[str, Any]]:
    """(owner to patch, attribute, the plain function, its module's namespace) for a target name."""
    if ":" in target:  # engine.MODULE:NAME or engine.MODULE:CLASS.NAME (any engine function or method)
        modname, _, path = target.partition(":")
        mod = importlib.import_module(modname)
        owner_any: Any = mod
        *outer, name = path.split(".")
        for part in outer:
            owner_any = getattr(owner_any, part)
        return owner_any, name, inspect.unwrap(getattr(owner_any, name)), vars(mod)
    owner_name, _, name = target.partition(".")
    if owner_name in ("Pipeline", "Serializer"):
        mod = importlib.import_module(
            "engine.pipeline" if owner_name == "Pipeline" else "engine.providers.base"
        )
        owner: Any = getattr(mod, owner_name)
    elif owner_name in MODULES:
        mod = importlib.import_module(MODULES[owner_name])
        owner = mod
    else:
        raise SystemExit(
            f"unknown target {target!r}: Pipeline.NAME, Serializer.NAME or one of {sorted(MODULES)}.NAME"
        )
    fn = inspect.unwrap(getattr(owner, name))
    # A method one of the class's bases holds (Pipeline's stages: engine/pipeline_state.py) is patched there.
    if isinstance(owner, type):
        owner = next(k for k in owner.__mro__ if name in vars(k))
    return owner, name, fn, fn.__globals__  # the namespace the function's code reads its globals from


def instrumented(
    fn: Callable[..., Any], ns: dict[str, Any], clock: Clock
) -> tuple[Callable[..., Any], list[str]]:
    """`fn` compiled again with clock.mark(i) before each top-level statement of its body, and the
    statements' labels (line and text)."""
    src = textwrap.dedent(inspect.getsource(fn))
    lines = src.split("\n")
    body = ast.parse(src).body[0].body  # type: ignore[attr-defined]
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring
    starts = {st.lineno - 1 for st in body}
    out: list[str] = ["from __future__ import annotations"]
    labels: list[str] = []
    first = fn.__code__.co_firstlineno
    for i, line in enumerate(lines):
        if line.lstrip().startswith("@"):
            continue  # the decorators: the caller keeps the original's wrapper
        if i in starts:
            indent = len(line) - len(line.lstrip())
            out.append(" " * indent + f"__bench_mark({len(labels)})")
            labels.append(f"{first + i}: {line.strip()[:60]}")
        out.append(line)
    scope = dict(ns)
    scope["__bench_mark"] = clock.mark
    exec(compile("\n".join(out), inspect.getsourcefile(fn) or "<bench>", "exec"), scope)  # noqa: S102
    return scope[fn.__name__], labels


def run_target(
    target: str,
    imp: Any,
    window: int,
    repeats: int,
    turns: frozenset[int] | None = None,
    evict: Callable[[], object] | None = None,
) -> tuple[list[str], list[list[list[float]]], list[float]]:
    """Per repeat, per call, each statement's time less its tokenizing; and the tokenizer's time per repeat.
    `evict`: run before every engine turn (outside the timed statements), as bench_engine's --evict."""
    owner, name, fn, ns = resolve(target)
    original = getattr(owner, name)
    clock = Clock()
    timed, labels = instrumented(fn, ns, clock)
    calls: list[list[float]] = []
    turn = [0]  # the trajectory's turn: next_request calls made so far in this repeat
    lane = target == "express.turn"

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        clock.marks.clear()
        out = timed(*args, **kwargs)
        clock.mark(-1)
        if (lane and out is None and turns is None) or (turns is not None and turn[0] not in turns):
            return out
        row = [0.0] * len(labels)
        for (i, t, k), (_j, t2, k2) in zip(clock.marks, clock.marks[1:], strict=False):
            row[i] += (t2 - t) - (k2 - k)
        calls.append(row)
        return out

    # A public Pipeline call keeps its journaling wrapper around the timed body.
    patched: Any = functools.wraps(fn)(wrapper)
    if original is not fn and hasattr(original, "__wrapped__"):
        from engine.pipeline import _journals

        patched = _journals(patched)
    count = be.TimedTokenizer.count

    def counted(self: Any, text: str) -> int:
        t = WALL()
        n = count(self, text)
        clock.tok += WALL() - t
        return n

    from engine.pipeline import Pipeline

    next_request = Pipeline.next_request

    def counting(self: Any) -> Any:
        try:
            return next_request(self)
        finally:
            turn[0] += 1

    engine_turn = be.engine_turn

    def evicted(*args: Any) -> Any:
        evict()  # type: ignore[misc]  # (only installed with an evictor)
        return engine_turn(*args)

    setattr(owner, name, patched)
    Pipeline.next_request = counting  # type: ignore[method-assign]
    if evict is not None:
        be.engine_turn = evicted  # type: ignore[assignment]  # engine_only looks it up in bench_engine's namespace each turn
    be.TimedTokenizer.count = counted  # type: ignore[method-assign]
    runs: list[list[list[float]]] = []
    toks: list[float] = []
    try:
        for r in range(repeats + 2):  # two warm-up repeats
            calls.clear()
            turn[0] = 0
            clock.tok = 0.0
            gc.collect()
            be.engine_only(imp, window)
            if r >= 2:
                runs.append([row[:] for row in calls])
                toks.append(clock.tok)
    finally:
        setattr(owner, name, original)
        Pipeline.next_request = next_request  # type: ignore[method-assign]
        be.TimedTokenizer.count = count  # type: ignore[method-assign]
        be.engine_turn = engine_turn
    return labels, runs, toks


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--file", type=Path, default=be.DEFAULT)
    ap.add_argument("--provider", default="anthropic")
    ap.add_argument("--window", type=int, default=32000)
    ap.add_argument("--repeats", type=int, default=12)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--target", action="append", help="what to time (repeatable; default express.turn)")
    ap.add_argument("--turns", default="", help="only calls made in these turns (0-based, comma-separated)")
    ap.add_argument(
        "--evict",
        action="store_true",
        help="evict the CPU caches before every turn (bench_engine's cache_evictor): each statement cold",
    )
    args = ap.parse_args()
    evict = be.cache_evictor() if args.evict else None
    be.PROVIDER = args.provider
    imp = load(args.file)
    us = 1e6
    for target in args.target or ["express.turn"]:
        labels, runs, toks = run_target(
            target,
            imp,
            args.window,
            args.repeats,
            frozenset(map(int, args.turns.split(","))) if args.turns else None,
            evict,
        )
        n = min(map(len, runs)) if runs else 0
        if not n:
            print(f"{target}: never called")
            continue
        # Each call's statement: its minimum over repeats (the calls come in the same order each repeat).
        best = [[min(run[c][i] for run in runs) for i in range(len(labels))] for c in range(n)]
        per = [sum(row[i] for row in best) / n for i in range(len(labels))]
        total = sum(per)
        print(f"{target}: {n} calls a trajectory ({args.file.name}, {args.provider}, {args.window}); "
              f"{'cold (caches evicted before each turn), ' if evict else ''}"
              f"mean per call of each statement's minimum over {len(runs)} repeats, tokenizing excluded: "
              f"{total * us:.1f} us a call; the tokenizer {min(toks) * 1000:.2f} ms a trajectory")  # fmt: skip
        for i in sorted(range(len(labels)), key=lambda i: -per[i])[: args.top]:
            print(f"  {per[i] * us:8.1f} us  {per[i] / total:6.1%}  {labels[i]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
