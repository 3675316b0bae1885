"""A cold turn's cache misses, counted by a simulated cache rather than timed (issue 12: a steady turn <= 2x
the json.dumps floor, cold).

bench_engine.py --iso times a cold turn (the CPU caches evicted before it, as after a model call): on 2
shared cores its figure moves by more than most changes make, and cold the time is mostly memory the turn
reads that is no longer in the caches (a warm django turn ~0.25 ms, cold ~0.75). This counts that memory
instead: each subject runs under valgrind's callgrind with its cache simulator (first-level instruction
and data caches and a last level the size of this host's per-core L2, `--l1i`, `--l1d`, `--ll`), a pass
over ~9 MB of Python objects between turns (as bench_engine's evictor), and only the steady turns (turn >=
--warm) collected (each is run inside functools.reduce, on which callgrind switches collection on and
off: nothing the engine or LangChain runs calls it). Deterministic for a given tree and host (the hash
seed is fixed): a change's A/B needs no repeats and no quiet hour. Per steady turn:

  instr     instructions executed (valgrind's; its CPU has no SHA extensions, so OpenSSL's hashing
            counts ~10x what it runs natively)
  ll_read   reads that missed the last level, code (ll_code) and data (ll_data): each is a trip to
            memory (or to a shared L3) of ~50-100 ns natively, what a cold turn pays beyond a warm one
  ll_write  writes that missed it (new memory: buffers, objects; cheaper, the store does not wait)
  l1_miss   first-level misses (code and data), served by the last level

With --warm below 10 (0: the whole trajectory) a whole replay runs first, not collected (as --iso
throws each process's first repeat away): the first turns counted are then a session's, not the process's.

Subjects: engine (one turn as bench_engine.engine_turn: the new messages, next_request, record_usage
with the SDK's usage object, the reply), floor (json.dumps of that turn's request body, the turn itself
not collected) and memo (trim_messages with the memoized counter, bench_engine's LcAgent under the
engine's ceilings). --by-object splits the engine's misses by the library their code is in (libpython:
the interpreter running the engine's Python and its objects; _bindings: the bpe-openai tokenizer's
tables; libc: memcpy of the request body, malloc; libcrypto: sha256). --calls splits them by agent call
instead (the messages fed, next_request, record_usage, the reply fed; each call a region of its own,
dumped apart: the turn's first call meets cold what the four share). --steps splits next_request's
express-lane turn instead, by the lane's steps (STEPS: the appended messages found, the lineage
extended and its stable rules' proof, the cut weighed and the early rule, the cache markers moved, the
request spliced and hashed, the record, the lineage remembered, the request event journaled, the open
turn closed, the new content counted): each step a region of its own, the rest of the turn run but not
collected (next_request's figure from --calls less these is the lane's own code: its checks, the
ceiling, the section hashes, and on a streak the lineage extended and kept in line, which the first
lane turn after a general-path turn asks of cost_aware). A step called inside another is counted in
the outer one. --ab BASE_DIR counts the engine
under BASE_DIR's code too (a `git archive` of older code, on PYTHONPATH in its own run). Needs valgrind
(apt-get install valgrind); a run takes a few minutes (callgrind runs Python ~50x slower), the subjects
two at a time.

    .venv/bin/python benchmarks/bench_cold_misses.py [--file PATH] [--provider anthropic] [--window 32000]
        [--warm 10] [--subjects engine,floor,memo] [--ab BASE_DIR] [--by-object | --calls | --steps] [--jobs 2]
        [--l1i 65536,8,64] [--l1d 49152,12,64] [--ll 2097152,16,64]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from turn_replay import add_replay_options, replay_child_options, start_child  # noqa: E402

SUBJECTS = ("engine", "floor", "memo")
# callgrind's events with --cache-sim=yes, in its order.
EVENTS = ("Ir", "Dr", "Dw", "I1mr", "D1mr", "D1mw", "ILmr", "DLmr", "DLmw")
JUNK = 30_000  # dicts the evictor walks between turns: ~9 MB, over 4x the simulated last level


def inside(f: Callable[[], Any]) -> Any:
    """f() inside functools.reduce, the one C function callgrind collects in (--toggle-collect)."""
    return functools.reduce(lambda _acc, g: g(), [f], None)


# --steps: (module, owner or None, attribute, label) of each express-lane step counted in a region of
# its own. None of them calls another on a steady turn (a nested one is counted in its caller's region:
# a second reduce inside the first would switch collection off, see _StepRegions). A step a tree does
# not have (--ab's older code, or a step this one does in line) is left out of that tree's count.
STEPS = (
    ("engine.pipeline_assembly", "Assembling", "history_tokens", "count new (history)"),
    ("engine.pipeline_express", None, "_appended", "appended since"),
    ("engine.assembly", "Measure", "item", "count new (pending)"),  # (and any other item the lane weighs)
    ("engine.policy.cost_aware", None, "_extend", "lineage extended"),
    ("engine.policy.cost_aware", None, "_stable_holds", "stable rules hold"),
    ("engine.policy.cost_aware", None, "_choose_cut", "cut weighed"),
    ("engine.policy.early_weigh", "EarlyRule", "compacts", "early rule"),
    ("engine.pipeline_express", None, "_moved_markers", "markers moved"),
    ("engine.pipeline_express", None, "lane_request", "request spliced"),
    ("engine.pipeline_express", None, "_later", "record made"),  # (TurnRecord.later, bound once)
    ("engine.trace_lazy", "TurnRecord", "later", "record made"),  # (a tree that reads it every turn)
    ("engine.policy.cost_aware", None, "_extended_lineage", "lineage kept"),
    ("engine.pipeline_turn_end", "TurnEnd", "_lane_record", "request event"),
    ("engine.pipeline_feedback", "Feedback", "_close_turn", "turn closed"),
)


class _StepRegions:
    """--steps: the lane's steps (STEPS) replaced by wrappers that run each inside `inside` while a
    steady turn's next_request runs (`on`), appending the step's label to `labels`."""

    def __init__(self, patch: Callable[[Any, str, Any], None] = setattr) -> None:
        """`patch(holder, name, wrapper)` puts each wrapper in place (a test's monkeypatch.setattr)."""
        import importlib

        self.on = False
        self.depth = 0
        self.labels: list[str] = []
        for mod_name, owner, attr, label in STEPS:
            mod = importlib.import_module(mod_name)
            holder = getattr(mod, owner, None) if owner else mod
            raw = getattr(holder, "__dict__", {}).get(attr) if owner else getattr(mod, attr, None)
            if raw is None:
                continue
            is_cls = isinstance(raw, classmethod)
            f = raw.__func__ if is_cls else raw
            w = self._wrap(f, label)
            patch(holder, attr, classmethod(w) if is_cls else w)

    def _wrap(self, f: Callable[..., Any], label: str) -> Callable[..., Any]:
        def step(*a: Any, **k: Any) -> Any:
            if not self.on or self.depth:
                return f(*a, **k)
            self.labels.append(label)
            self.depth += 1
            try:
                return inside(lambda: f(*a, **k))
            finally:
                self.depth -= 1

        return step


def child(args: argparse.Namespace) -> int:
    """Under callgrind: replay the trajectory, each steady turn of the subject inside `inside`."""
    be, imp = start_child(args)
    steps = _StepRegions() if args.steps and args.child == "engine" else None
    junk = [{"a": i, "b": -i} for i in range(JUNK)]

    def evict() -> int:
        return sum(d["a"] for d in junk)

    if args.warm < 10:
        # The first turns collected too: a whole replay first, not collected, as bench_engine --iso throws
        # its processes' first repeat away (lazy imports, first calls), so the turns counted are a session's,
        # not the process's first.
        prime = be.EngineRun(imp, args.window)
        fed = 0
        for call in imp.calls:
            _req, fed = be.engine_turn(prime, call, fed, be.agent_usage(call))
        prime.close()
        if args.child == "memo":
            from langchain_core.messages import trim_messages

            first = be.LcAgent(be.LcPlan(imp))
            count = be.memo_counter(be.tiktoken_one())
            for k, limit in enumerate(be.engine_only(imp, args.window)):
                first.turn(k, trim_messages, limit, count)
    measured = 0
    labels: list[str] = []  # with --calls: each collected region's call, in order
    if args.child in ("engine", "floor"):
        run = be.EngineRun(imp, args.window)
        fed = 0
        for k, call in enumerate(imp.calls):
            usage = be.agent_usage(call)  # (the SDK's object: made outside, as bench_engine does)
            evict()
            steady = k >= args.warm
            if args.child == "engine" and steady and args.calls:
                req, fed = engine_calls(be, run, call, fed, usage, labels)
                measured += 1
            elif steps is not None and steady:
                req, fed = engine_steps(run, call, fed, usage, steps)
                labels += steps.labels
                measured += 1
            elif args.child == "engine" and steady:
                req, fed = inside(functools.partial(be.engine_turn, run, call, fed, usage))
                measured += 1
            else:
                req, fed = be.engine_turn(run, call, fed, usage)
            if args.child == "floor" and steady:
                body = req.body  # (parsed outside, as bench_engine's floor)
                evict()
                inside(functools.partial(json.dumps, body))
                measured += 1
        run.close()
    else:
        from langchain_core.messages import trim_messages

        limits = be.engine_only(imp, args.window)
        agent = be.LcAgent(be.LcPlan(imp))
        memo = be.memo_counter(be.tiktoken_one())
        for k, limit in enumerate(limits):
            evict()
            turn = functools.partial(agent.turn, k, trim_messages, limit, memo)
            if k >= args.warm:
                inside(turn)
                measured += 1
            else:
                turn()
    Path(args.turns_out).write_text(json.dumps({"turns": measured, "calls": labels}))
    return 0


def engine_calls(be: Any, run: Any, call: Any, fed: int, usage: Any, labels: list[str]) -> tuple[Any, int]:
    """bench_engine.engine_turn's steps, each agent call in a region of its own (--calls): the new
    messages fed (user / tool_result), next_request, record_usage (or record_error), the reply fed
    (assistant); each region's name appended to `labels`."""
    pipe = run.pipe

    def feed() -> None:
        for m in call.messages[fed:]:
            run.feed(m)

    labels.append("feed")
    inside(feed)
    labels.append("next_request")
    req = inside(pipe.next_request)
    labels.append("record_usage")
    if usage is not None:
        inside(functools.partial(pipe.record_usage, usage))
    else:
        inside(functools.partial(pipe.record_error, "error", call.error or "no response"))
    if call.response is not None:
        labels.append("reply")
        inside(functools.partial(run.feed, call.response))
    return req, len(call.messages) + (call.response is not None)


def engine_steps(run: Any, call: Any, fed: int, usage: Any, steps: _StepRegions) -> tuple[Any, int]:
    """bench_engine.engine_turn, only the lane's steps inside its next_request collected (--steps),
    their labels in `steps.labels`."""
    pipe = run.pipe
    for m in call.messages[fed:]:
        run.feed(m)
    steps.labels = []
    steps.on = True
    try:
        req = pipe.next_request()
    finally:
        steps.on = False
    if usage is not None:
        pipe.record_usage(usage)
    else:
        pipe.record_error("error", call.error or "no response")
    if call.response is not None:
        run.feed(call.response)
    return req, len(call.messages) + (call.response is not None)


def totals(text: str) -> dict[str, int]:
    """The events' totals of a callgrind output file (its `summary:` line)."""
    events = next(line.split()[1:] for line in text.splitlines() if line.startswith("events:"))
    summary = next(line.split()[1:] for line in text.splitlines() if line.startswith(("summary:", "totals:")))
    return dict(zip(events, map(int, summary), strict=False))


_NAMED = re.compile(r"^(c?ob)=\((\d+)\)(?: (.*))?$")


def by_object(text: str) -> dict[str, dict[str, int]]:
    """Each library's own events (the code in it, not what it calls) from a callgrind output file."""
    names: dict[str, str] = {}
    out: dict[str, list[int]] = {}
    ob = "?"
    after_call = False
    for line in text.splitlines():
        m = _NAMED.match(line)
        if m:
            kind, num, name = m.groups()
            if name:
                names[num] = os.path.basename(name)
            if kind == "ob":
                ob = names.get(num, num)
            continue
        if line.startswith("calls="):
            after_call = True  # the next cost line is the call's inclusive cost: not this object's own
            continue
        if line[:1].isdigit() or line[:1] in "+-*":
            if after_call:
                after_call = False
                continue
            vals = line.split()[1:]
            acc = out.setdefault(ob, [0] * len(EVENTS))
            for i, v in enumerate(vals[: len(EVENTS)]):
                acc[i] += int(v)
    return {k: dict(zip(EVENTS, v, strict=True)) for k, v in out.items()}


def measure(tree: Path, subject: str, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    """One subject under one tree's code, under callgrind: per steady turn figures (and by library)."""
    out_file = tmp / f"{tree.name}-{subject}.callgrind"
    calls = (args.calls or args.steps) and subject == "engine"
    turns_file = tmp / f"{tree.name}-{subject}.json"
    cmd = [
        "valgrind", "--tool=callgrind", "--cache-sim=yes", f"--I1={args.l1i}", f"--D1={args.l1d}",
        f"--LL={args.ll}", "--collect-atstart=no", "--toggle-collect=functools_reduce",
        f"--callgrind-out-file={out_file}", *(["--dump-after=functools_reduce"] if calls else []),
        sys.executable, str(Path(__file__).resolve()), "--child", subject, "--turns-out", str(turns_file),
        *replay_child_options(args), *(["--calls"] if calls and args.calls else []),
        *(["--steps"] if calls and args.steps else []),
    ]  # fmt: skip
    env = dict(os.environ, PYTHONPATH=str(tree), PYTHONHASHSEED="0", PYTHONDONTWRITEBYTECODE="1")
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(
            f"{subject} under {tree}: callgrind failed ({done.returncode}):\n{done.stderr[-2000:]}"
        )
    told = json.loads(turns_file.read_text())
    n = told["turns"]
    if told["calls"]:
        # One dump a region (callgrind's --dump-after: FILE.1, FILE.2, ... in order), summed per call.
        by_call: dict[str, dict[str, float]] = {}
        whole = dict.fromkeys(EVENTS, 0.0)
        for i, label in enumerate(told["calls"], 1):
            dump = totals(Path(f"{out_file}.{i}").read_text())
            acc = by_call.setdefault(label, dict.fromkeys(EVENTS, 0.0))
            for k in EVENTS:
                acc[k] += dump.get(k, 0)
                whole[k] += dump.get(k, 0)
        got: dict[str, Any] = {"turns": n, **figures({k: v / n for k, v in whole.items()})}
        got["calls"] = {c: figures({k: v / n for k, v in ev.items()}) for c, ev in by_call.items()}
        return got
    text = out_file.read_text()
    per = {k: v / n for k, v in totals(text).items()}
    got = {"turns": n, **figures(per)}
    if args.by_object:
        got["objects"] = {
            ob: figures({k: v / n for k, v in ev.items()}) for ob, ev in by_object(text).items()
        }
    return got


def figures(ev: dict[str, float]) -> dict[str, float]:
    return {
        "instr": ev["Ir"],
        "ll_code": ev["ILmr"],
        "ll_data": ev["DLmr"],
        "ll_read": ev["ILmr"] + ev["DLmr"],
        "ll_write": ev["DLmw"],
        "l1_miss": ev["I1mr"] + ev["D1mr"] + ev["D1mw"],
    }


def line(name: str, f: dict[str, float]) -> str:
    return (
        f"{name:>14}: {f['ll_read']:8,.0f} last-level read misses ({f['ll_code']:,.0f} code, {f['ll_data']:,.0f} "
        f"data), {f['ll_write']:7,.0f} write misses, {f['l1_miss']:9,.0f} L1 misses, {f['instr']:11,.0f} instructions"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_replay_options(ap, "count the engine under BASE_DIR's code too")
    ap.add_argument("--subjects", default=",".join(SUBJECTS), help="engine, floor, memo (comma-separated)")
    ap.add_argument("--by-object", action="store_true", help="the engine's misses by library")
    ap.add_argument(
        "--calls",
        action="store_true",
        help="the engine's misses by agent call (the messages fed, next_request, record_usage, the reply fed), "
        "each counted in a region of its own (the turn's first call meets cold what all of them share)",
    )
    ap.add_argument(
        "--steps",
        action="store_true",
        help="the engine's next_request misses by express-lane step (STEPS), each counted in a region of "
        "its own; the rest of the turn is not collected",
    )
    ap.add_argument("--jobs", type=int, default=2, help="callgrind runs at once")
    ap.add_argument("--l1i", default="65536,8,64", help="simulated L1 instruction cache: size,assoc,line")
    ap.add_argument("--l1d", default="49152,12,64", help="simulated L1 data cache: size,assoc,line")
    ap.add_argument("--ll", default="2097152,16,64", help="simulated last level (this host's L2 a core)")
    ap.add_argument("--child", choices=SUBJECTS, help=argparse.SUPPRESS)
    ap.add_argument("--turns-out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args)
    if args.calls and args.steps:
        ap.error("--calls and --steps: choose one (each splits the turn its own way)")
    if shutil.which("valgrind") is None:
        print("bench_cold_misses: valgrind is not installed (apt-get install valgrind)", file=sys.stderr)
        return 1
    subjects = [s for s in args.subjects.split(",") if s]
    bad = [s for s in subjects if s not in SUBJECTS]
    if bad:
        ap.error(f"--subjects: unknown {bad}; choose from {', '.join(SUBJECTS)}")
    here = Path(__file__).resolve().parents[1]
    runs = [("new", here, s) for s in subjects]
    if args.ab:
        runs.insert(0, ("base", Path(args.ab).resolve(), "engine"))
    with tempfile.TemporaryDirectory(prefix="cp-cold-misses-") as tmp_dir:
        tmp = Path(tmp_dir)
        for i, (name, _tree, _s) in enumerate(runs):
            (tmp / f"{i}-{name}").mkdir()
        with ThreadPoolExecutor(max(1, args.jobs)) as pool:
            futures = [
                pool.submit(measure, tree, s, args, tmp / f"{i}-{name}")
                for i, (name, tree, s) in enumerate(runs)
            ]
            got = {(name, s): f.result() for (name, _t, s), f in zip(runs, futures, strict=True)}
    print(f"{args.file.name}, {args.provider}, window {args.window}: per steady turn (turns >= {args.warm}), "
          f"simulated caches L1i {args.l1i}, L1d {args.l1d}, last level {args.ll} (size,assoc,line)")  # fmt: skip
    for (name, s), f in got.items():
        print(line(f"{s}" if name == "new" else f"{s} ({name})", f))
    eng = got.get(("new", "engine"))
    if eng is not None:
        for other in ("floor", "memo"):
            o = got.get(("new", other))
            if o is not None:
                print(f"  engine / {other}: last-level read misses {eng['ll_read'] / o['ll_read']:.2f}x, "
                      f"instructions {eng['instr'] / o['instr']:.2f}x")  # fmt: skip
        base = got.get(("base", "engine"))
        if base is not None:
            print(f"  engine new / base: last-level read misses {eng['ll_read'] / base['ll_read']:.4f} "
                  f"({eng['ll_read'] - base['ll_read']:+,.0f}), write misses {eng['ll_write'] / base['ll_write']:.4f}, "
                  f"instructions {eng['instr'] / base['instr']:.4f}")  # fmt: skip
        if "calls" in eng:
            split = "express-lane step" if args.steps else "agent call"
            print(f"  the engine's misses by {split} (per steady turn):")
            for c, f in eng["calls"].items():
                print("  " + line(c, f))
        if args.by_object and "objects" in eng:
            print("  the engine's misses by library (its own code's, per steady turn):")
            objs = sorted(eng["objects"].items(), key=lambda kv: -kv[1]["ll_read"])
            for ob, f in objs[:10]:
                print("  " + line(ob[:14], f))
    return 0


if __name__ == "__main__":
    sys.exit(main())
