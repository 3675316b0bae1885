"""An engine turn's interpreter steps and Python calls, counted, not timed (issue 12).

On a shared machine a steady turn's time moves by more than a change of a few per cent makes (the
fortieth session's A/Bs resolved nothing under 3% at load 3-8), while a steady turn is interpreter-bound
(the tokenizer, hashing and copying aside, ~15 ns a bytecode): how many bytecodes it runs is a measure
of the same work that does not depend on the load. This replays the trajectory as bench_engine replays
it (one turn = the new messages, next_request, record_usage, the reply) under sys.settrace with opcode
events, and reports per turn: Python calls (frames), line events, bytecodes (opcode events) and C
calls (sys.setprofile's c_call), the median over the steady express-lane turns (turn >= --warm, made by
the lane) and over all steady turns. Deterministic: the same code and trajectory give the same counts.
--peer counts trim+memo's turns (bench_engine's peer, under the engine's ceilings) the same way, beside the
engine's: issue 12's whole-trajectory ratio as interpreter work, which the load does not move.

    .venv/bin/python benchmarks/bench_turn_steps.py [--file PATH] [--provider anthropic] [--window 32000]
        [--warm 10] [--ab BASE_DIR] [--top 30 [--turns 0-9,25]] [--touch] [--peer]

--ab BASE_DIR counts under BASE_DIR's engine too (a `git archive` of older code; each tree in a child
process under its own PYTHONPATH) and prints both side by side. --top N lists the functions with the
most bytecodes of their own (and their calls) per steady lane turn, and the same inclusive of callees;
with --turns, per turn of those instead (each turn's count and path first): the first turn and a
compaction, which the general path makes, or the lane's first turns after them.
Not counted: time in C (the tokenizer, sha256, bytes joins), which bench_engine's --ab times.

--touch counts what a turn touches rather than what it runs (a cold turn, after a model call has
evicted the CPU caches, pays for each distinct piece of code and data once, however often it runs):
per turn the distinct code objects run, the distinct (code, line) pairs, the modules they are in, the
bytes of bytecode of those code objects, the distinct C functions called (sys.settrace call and line
events, sys.setprofile c_call; another replay than the bytecode count's, so neither perturbs the other),
and, in a third replay under tracemalloc, the memory blocks allocated in the turn that are still alive
at its end (the turn's new state: tomorrow's first touches). With --top N the modules and functions with
the most distinct lines (per steady lane turn, or per turn of --turns), and the modules allocating the
most surviving blocks. bench_engine.py --iso --split gives each turn's cold time to set beside them.

A proxy, not a clock: fewer bytecodes is less time only for like-for-like Python. A loop over a turn's
two or three items replaced by map/zip/filter runs fewer bytecodes and more time (each iterator object
is made and freed: 4729b10 took Serializer._appended from 9,596 to 9,520 bytecodes a turn and from ~33
to ~35.5 us; reverted). Check such a change with bench_turn_lines.py (the function's own time, minimum
over repeats) on both trees.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tracemalloc
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

sys.path.append(str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from turn_replay import add_replay_options, replay_child_options, start_child  # noqa: E402

KEYS = ("calls", "lines", "steps", "c_calls")


class Counter:
    """Counts of the region being traced; per function when `funcs` (self and inclusive bytecodes)."""

    def __init__(self, funcs: bool) -> None:
        self.n = dict.fromkeys(KEYS, 0)
        self.funcs = funcs
        self.stack: list[tuple[str, str]] = []
        self.own: dict[tuple[str, str], int] = {}
        self.incl: dict[tuple[str, str], int] = {}
        self.called: dict[tuple[str, str], int] = {}
        self.root = str(Path(__file__).resolve().parents[1]) + "/"

    def reset(self) -> None:
        self.n = dict.fromkeys(KEYS, 0)
        self.stack.clear()
        self.own, self.incl, self.called = {}, {}, {}

    def _key(self, frame: FrameType) -> tuple[str, str]:
        code = frame.f_code
        name = code.co_filename
        return (name[len(self.root) :] if name.startswith(self.root) else name, code.co_name)

    def trace(self, frame: FrameType, event: str, arg: Any) -> Any:
        if event == "opcode":
            self.n["steps"] += 1
            if self.funcs:
                k = self._key(frame)
                self.own[k] = self.own.get(k, 0) + 1
                for s in set(self.stack):
                    self.incl[s] = self.incl.get(s, 0) + 1
        elif event == "line":
            self.n["lines"] += 1
        elif event == "call":
            self.n["calls"] += 1
            frame.f_trace_opcodes = True
            if self.funcs:
                k = self._key(frame)
                self.called[k] = self.called.get(k, 0) + 1
                self.stack.append(k)
        elif event == "return" and self.funcs and self.stack:
            self.stack.pop()
        return self.trace

    def profile(self, frame: FrameType, event: str, arg: Any) -> None:
        if event == "c_call":
            self.n["c_calls"] += 1


TOUCH_KEYS = ("codes", "dlines", "modules", "code_bytes", "c_funcs")


class Touch:
    """What the region being traced touches, each thing once however often it runs: code objects with
    the lines run in each, and C functions called (keyed by module and qualified name: `list.append` of
    two lists is one function)."""

    def __init__(self) -> None:
        self.codes: dict[CodeType, set[int]] = {}
        self.c_funcs: set[tuple[str, str]] = set()

    def reset(self) -> None:
        self.codes = {}
        self.c_funcs = set()

    def trace(self, frame: FrameType, event: str, arg: Any) -> Any:
        if event == "line":
            self.codes[frame.f_code].add(frame.f_lineno)
        elif event == "call":
            self.codes.setdefault(frame.f_code, set())
        return self.trace

    def profile(self, frame: FrameType, event: str, arg: Any) -> None:
        if event == "c_call":
            self.c_funcs.add((str(getattr(arg, "__module__", "")), str(getattr(arg, "__qualname__", arg))))

    def counts(self) -> dict[str, int]:
        return {
            "codes": len(self.codes),
            "dlines": sum(len(v) for v in self.codes.values()),
            "modules": len({c.co_filename for c in self.codes}),
            "code_bytes": sum(len(c.co_code) for c in self.codes),
            "c_funcs": len(self.c_funcs),
        }


def turn_set(text: str) -> frozenset[int]:
    """--turns: comma-separated turns and ranges (0-9,25)."""
    out: set[int] = set()
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return frozenset(out)


def child(args: argparse.Namespace) -> int:
    """Count every turn of one replay (after an untraced one: memos and imports warm) under this
    process's PYTHONPATH; one JSON document on stdout."""
    be, imp = start_child(args)
    counter = Counter(args.top > 0)
    funcs: dict[str, dict[str, float]] = {"own": {}, "incl": {}, "called": {}}
    turns: list[dict[str, Any]] = []
    touch: dict[str, Any] = {"turns": [], "lines": {}, "modules": {}, "alloc_modules": {}}
    for traced in (False, True):
        if traced:
            # Garbage from the untraced replay (a recording writer's __del__, say) must not finalize
            # inside a counted turn: the counts would depend on when the collector fires.
            gc.collect()
            gc.disable()
        run = be.EngineRun(imp, args.window)
        pipe = run.pipe
        fed = 0
        for k, call in enumerate(imp.calls):
            usage = be.agent_usage(call)
            counter.reset()
            if traced:
                sys.setprofile(counter.profile)
                sys.settrace(counter.trace)
            _req, fed = be.engine_turn(run, call, fed, usage)
            sys.settrace(None)
            sys.setprofile(None)
            carried = getattr(pipe, "_express", None)
            lane = carried is not None and getattr(carried, "record", None) is not None
            if traced:
                turns.append({"lane": lane, **counter.n})
                if (k in args.turns) if args.turns is not None else (lane and k >= args.warm):
                    for name, got in (
                        ("own", counter.own),
                        ("incl", counter.incl),
                        ("called", counter.called),
                    ):
                        acc = funcs[name]
                        for key, v in got.items():
                            label = f"{key[0]}:{key[1]}"
                            acc[label] = acc.get(label, 0) + v
        run.close()
    if args.touch:
        touched(args, imp, turns, touch)
    peer = peer_turns(imp, args.window, args.touch) if args.peer else None
    gc.enable()
    print(json.dumps({"turns": turns, "funcs": funcs, "touch": touch, "peer": peer}))
    return 0


def peer_turns(imp: Any, window: int, touch: bool) -> list[dict[str, Any]]:
    """--peer: trim+memo's turns (bench_engine's LcAgent.turn: the new messages' LangChain objects, trim_messages
    under the engine's ceiling of each turn with the memoized counter, the reply's AIMessage), counted as the
    engine's are, after an untraced replay (LangChain's lazy set-up, imports); with --touch, a replay under
    Touch too. The peer's lane flag is True on every turn (it has one path)."""
    import bench_engine as be
    from langchain_core.messages import trim_messages

    limits = be.engine_only(imp, window)  # the ceilings --iso hands the peer
    plan = be.LcPlan(imp)
    count_one = be.tiktoken_one()
    counter = Counter(False)
    t = Touch()
    modes = ("warm", "count", "touch") if touch else ("warm", "count")
    turns: list[dict[str, Any]] = [{"lane": True} for _ in limits]
    for mode in modes:
        gc.collect()
        agent, memo = be.LcAgent(plan), be.memo_counter(count_one)
        for k, limit in enumerate(limits):
            tracer = counter if mode == "count" else t if mode == "touch" else None
            if tracer is not None:
                tracer.reset()
                sys.setprofile(tracer.profile)
                sys.settrace(tracer.trace)
            agent.turn(k, trim_messages, limit, memo)
            sys.settrace(None)
            sys.setprofile(None)
            if mode == "count":
                turns[k].update(counter.n)
            elif mode == "touch":
                turns[k].update(t.counts())
    return turns


def _label(root: str, name: str) -> str:
    return name[len(root) :] if name.startswith(root) else name


def touched(args: argparse.Namespace, imp: Any, turns: list[dict[str, Any]], out: dict[str, Any]) -> None:
    """--touch: two more replays (the collector off, as the counted one): one under Touch, one under
    tracemalloc, each turn's figures added to `turns`; per function and module the distinct lines (and per
    module the surviving blocks) summed over the turns --top lists, as in child."""
    import bench_engine as be

    root = str(Path(__file__).resolve().parents[1]) + "/"
    t = Touch()
    for mode in ("touch", "alloc"):
        gc.collect()
        run = be.EngineRun(imp, args.window)
        fed = 0
        for k, call in enumerate(imp.calls):
            usage = be.agent_usage(call)
            listed = (k in args.turns) if args.turns is not None else (turns[k]["lane"] and k >= args.warm)
            if mode == "touch":
                t.reset()
                sys.setprofile(t.profile)
                sys.settrace(t.trace)
                _req, fed = be.engine_turn(run, call, fed, usage)
                sys.settrace(None)
                sys.setprofile(None)
                turns[k].update(t.counts())
                if listed:
                    for code, lines in t.codes.items():
                        fn = f"{_label(root, code.co_filename)}:{code.co_qualname}"
                        mod = _label(root, code.co_filename)
                        out["lines"][fn] = out["lines"].get(fn, 0) + len(lines)
                        out["modules"][mod] = out["modules"].get(mod, 0) + len(lines)
            else:
                # Only blocks allocated after start() are traced: what is left at the turn's end is
                # what the turn made and kept.
                tracemalloc.start(1)
                _req, fed = be.engine_turn(run, call, fed, usage)
                snap = tracemalloc.take_snapshot()
                tracemalloc.stop()
                stats = snap.statistics("filename")
                turns[k]["kept_blocks"] = sum(st.count for st in stats)
                turns[k]["kept_bytes"] = sum(st.size for st in stats)
                if listed:
                    for st in stats:
                        mod = _label(root, st.traceback[0].filename)
                        out["alloc_modules"][mod] = out["alloc_modules"].get(mod, 0) + st.count
        run.close()


def summary(turns: list[dict[str, Any]], warm: int) -> dict[str, Any]:
    lane = [t for i, t in enumerate(turns) if i >= warm and t["lane"]]
    steady = turns[warm:]
    out: dict[str, Any] = {"lane_turns": len(lane), "steady_turns": len(steady)}
    for key in KEYS + TOUCH_KEYS + ("kept_blocks", "kept_bytes"):
        if key not in turns[0]:
            continue
        out[key] = statistics.median(t[key] for t in lane) if lane else float("nan")
        out["all_" + key] = statistics.median(t[key] for t in steady) if steady else float("nan")
        out["total_" + key] = sum(t[key] for t in turns)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_replay_options(ap, "count under BASE_DIR's engine too")
    ap.add_argument("--top", type=int, default=0, help="list the N functions with the most bytecodes")
    ap.add_argument(
        "--turns",
        type=turn_set,
        default=None,
        help="with --top: list the functions of these turns instead (0-based; e.g. 0-9 or 0,25): the "
        "first turns and a compaction, which the general path makes",
    )
    ap.add_argument(
        "--touch",
        action="store_true",
        help="also count what each turn touches: distinct code objects, lines, modules, bytecode bytes, C "
        "functions, and blocks allocated that survive the turn (with --top: by module and function)",
    )
    ap.add_argument(
        "--peer",
        action="store_true",
        help="also count trim+memo's turns (bench_engine's peer, under the engine's ceilings) the same way, "
        "beside the engine's: issue 12's ratio in interpreter work rather than time",
    )
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args)
    here = Path(__file__).resolve()
    trees = {"new": here.parents[1]}
    if args.ab:
        trees = {"base": Path(args.ab).resolve(), **trees}
    got: dict[str, dict[str, Any]] = {}
    for name, tree in trees.items():
        cmd = [sys.executable, str(here), "--child", *replay_child_options(args),
               "--top", str(args.top if name == "new" else 0)]  # fmt: skip
        if args.turns is not None:
            cmd += ["--turns", ",".join(map(str, sorted(args.turns)))]
        if args.touch:
            cmd.append("--touch")
        if args.peer and name == "new":
            cmd.append("--peer")
        env = dict(os.environ, PYTHONPATH=str(tree))
        out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
        got[name] = json.loads(out)
    print(
        f"{args.file.name}, {args.provider}, window {args.window}: per turn, median over turns >= {args.warm}"
    )
    for name, data in got.items():
        s = summary(data["turns"], args.warm)
        print(f"  {name}: {s['lane_turns']} of {s['steady_turns']} steady turns by the lane; a lane turn: "
              f"{s['steps']:.0f} bytecodes, {s['calls']:.0f} Python calls, {s['lines']:.0f} lines, "
              f"{s['c_calls']:.0f} C calls; any steady turn {s['all_steps']:.0f} bytecodes, "
              f"{s['all_calls']:.0f} calls; trajectory {s['total_steps']} bytecodes, {s['total_calls']} calls")  # fmt: skip
        if args.touch:
            print(f"  {name}: a lane turn touches {s['codes']:.0f} code objects in {s['modules']:.0f} modules, "
                  f"{s['dlines']:.0f} distinct lines, {s['code_bytes'] / 1024:.1f} KiB of bytecode, {s['c_funcs']:.0f} "
                  f"C functions; keeps {s['kept_blocks']:.0f} blocks allocated in it ({s['kept_bytes'] / 1024:.1f} KiB)")  # fmt: skip
            if args.turns is not None:
                for k in sorted(args.turns):
                    if k < len(data["turns"]):
                        print("    " + touch_line(k, data["turns"][k]))
    if "base" in got:
        b, n = summary(got["base"]["turns"], args.warm), summary(got["new"]["turns"], args.warm)
        print(f"  new / base: lane turn bytecodes {n['steps'] / b['steps']:.4f} ({n['steps'] - b['steps']:+.0f}), "
              f"calls {n['calls'] / b['calls']:.4f} ({n['calls'] - b['calls']:+.0f}); trajectory bytecodes "
              f"{n['total_steps'] / b['total_steps']:.4f}")  # fmt: skip
        if args.touch:
            print(f"  new / base: a lane turn's distinct lines {n['dlines'] / b['dlines']:.4f} ({n['dlines'] - b['dlines']:+.0f}), "
                  f"code objects {n['codes'] - b['codes']:+.0f}, modules {n['modules'] - b['modules']:+.0f}, blocks kept "
                  f"{n['kept_blocks'] - b['kept_blocks']:+.0f}")  # fmt: skip
    peer = got["new"].get("peer")
    if peer:
        n, q = summary(got["new"]["turns"], args.warm), summary(peer, args.warm)
        print(f"  trim+memo: a steady turn {q['steps']:.0f} bytecodes, {q['calls']:.0f} Python calls, "
              f"{q['lines']:.0f} lines, {q['c_calls']:.0f} C calls; trajectory {q['total_steps']} bytecodes "
              f"(first turn {peer[0]['steps']}, last {peer[-1]['steps']}: trim walks every message)")  # fmt: skip
        line = (
            f"  engine / trim+memo: lane turn bytecodes {n['steps'] / q['steps']:.2f}x, calls "
            f"{n['calls'] / q['calls']:.2f}x; trajectory bytecodes {n['total_steps'] / q['total_steps']:.2f}x"
        )
        if args.touch:
            print(f"  trim+memo: a steady turn touches {q['codes']:.0f} code objects in {q['modules']:.0f} modules, "
                  f"{q['dlines']:.0f} distinct lines, {q['code_bytes'] / 1024:.1f} KiB of bytecode, "
                  f"{q['c_funcs']:.0f} C functions")  # fmt: skip
            line += (f"; distinct lines {n['dlines'] / q['dlines']:.2f}x, code objects {n['codes'] / q['codes']:.2f}x, "
                     f"KiB of bytecode {n['code_bytes'] / q['code_bytes']:.2f}x")  # fmt: skip
        print(line)
    if args.top:
        data = got["new"]
        if args.turns is not None:
            lanes = max(1, len(args.turns & set(range(len(data["turns"])))))
            what = f"per turn of {','.join(map(str, sorted(args.turns)))}"
            print(f"  turns {','.join(map(str, sorted(args.turns)))}: " + ", ".join(
                f"{k} {data['turns'][k]['steps']} bytecodes ({'lane' if data['turns'][k]['lane'] else 'general'})"
                for k in sorted(args.turns) if k < len(data["turns"])))  # fmt: skip
        else:
            lanes = max(1, summary(data["turns"], args.warm)["lane_turns"])
            what = "per steady lane turn"
        f = data["funcs"]
        for title, key in (("own bytecodes", "own"), ("inclusive of callees", "incl")):
            print(f"{what}, {title} (calls):")
            for label, v in sorted(f[key].items(), key=lambda kv: -kv[1])[: args.top]:
                print(f"  {v / lanes:8.1f} ({f['called'].get(label, 0) / lanes:4.1f})  {label}")
        if args.touch:
            tc = data["touch"]
            for title, key in (("distinct lines by module", "modules"), ("distinct lines by function", "lines"),
                               ("blocks kept, by the module allocating them", "alloc_modules")):  # fmt: skip
                print(f"{what}, {title} ({len(tc[key])} in all):")
                for label, v in sorted(tc[key].items(), key=lambda kv: -kv[1])[: args.top]:
                    print(f"  {v / lanes:8.1f}  {label}")
    return 0


def touch_line(k: int, t: dict[str, Any]) -> str:
    return (f"turn {k} ({'lane' if t['lane'] else 'general'}): {t['steps']} bytecodes, {t['codes']} code objects "
            f"in {t['modules']} modules, {t['dlines']} distinct lines, {t['code_bytes'] / 1024:.1f} KiB bytecode, "
            f"{t['c_funcs']} C functions, {t['kept_blocks']} blocks kept ({t['kept_bytes'] / 1024:.1f} KiB)")  # fmt: skip


if __name__ == "__main__":
    raise SystemExit(main())
