"""The demo agent: a scripted coding agent that embeds the engine, reading a fixed copy of a repository.

Tool calls (list, grep, read, run a small command) answered from a corpus the project ships: the
outputs recorded in demo_sessions/scout-anthropic.cpsession, the project's own source as it was when
that session was recorded. Scripted assistant turns, and the provider cache simulator standing in for
the provider's usage. Its window is small, so within a minute it climbs the tiers up to
AggressivePrune and compacts its history, spills one huge tool output, flips a latch (breaking the
cache), has a binder time out, and fires alerts.

The tools read the working tree until 2026-12: the demo's figures drifted as the repository grew (the
grep of every `def` was ~135k tokens and rising), so no two clones, nor two days, printed the same
session. Now every run prints the same figures, those of the recording.

    python -m inspector.demo_agent --turns 40 --record demo.cpsession --serve
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from engine.errors import ContextPipeError
from engine.optimize import OptimizeLimits
from engine.pipeline import Pipeline
from engine.sim.cachesim import Block, CacheSimulator, Call
from engine.types import CacheScope, Priority, SectionKind

ROOT = Path(__file__).resolve().parents[1]
MODEL = "claude-sonnet-4"
# Where the tools' answers come from (see the module's docstring).
CORPUS = ROOT / "demo_sessions" / "scout-anthropic.cpsession"
# The environment source's text as the corpus recorded it (the directory it ran in, the engine's modules).
ENVIRONMENT = "cwd: demo\nengine modules: 24"

TOOLS = {
    "list_files": (
        "List files under a directory of the repository.",
        {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    ),
    "grep": (
        "Search the repository for a regular expression; prints path:line: text.",
        {
            "type": "object",
            "properties": {"pattern": {"type": "string"}, "path": {"type": "string"}},
            "required": ["pattern"],
        },
    ),
    "read_file": (
        "Read a file of the repository.",
        {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    ),
    "run": (
        "Run a small Python snippet in the repository and return its output.",
        {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]},
    ),
    "edit_file": (
        "Replace text in a file (needs write permission).",
        {
            "type": "object",
            "properties": {"path": {"type": "string"}, "old": {"type": "string"}, "new": {"type": "string"}},
            "required": ["path", "old", "new"],
        },
    ),
    "web_search": ("Search the web.", {"type": "object", "properties": {"q": {"type": "string"}}}),
}

# (thought, tool, arguments). The script reads the engine the way a person new to it would.
SCRIPT: list[tuple[str, str, dict[str, str]]] = [
    ("Let me look at the repository layout first.", "list_files", {"path": "."}),
    ("The engine lives in engine/. What is in it?", "list_files", {"path": "engine"}),
    ("Where is the pipeline's public API?", "grep", {"pattern": r"^class \w+", "path": "engine/pipeline.py"}),
    ("Let me read the planner.", "read_file", {"path": "engine/plan.py"}),
    ("How are tiers chosen?", "grep", {"pattern": "tier_for|Tier\\.", "path": "engine"}),
    ("Read the optimize fold.", "read_file", {"path": "engine/optimize/__init__.py"}),
    ("Which rules exist?", "list_files", {"path": "engine/optimize"}),
    ("Check the Python version the tests run on.", "run", {"code": "import sys; print(sys.version)"}),
    ("Read the cache-alignment rule.", "read_file", {"path": "engine/optimize/align.py"}),
    ("Read the tool-result clearing rule.", "read_file", {"path": "engine/optimize/clear_results.py"}),
    ("How are markers placed?", "read_file", {"path": "engine/optimize/markers.py"}),
    (
        "Count lines per engine module.",
        "run",
        {
            "code": "import pathlib\nfor p in sorted(pathlib.Path('engine').glob('*.py')): print(len(p.read_text().splitlines()), p)"
        },
    ),
    ("Read the feedback module.", "read_file", {"path": "engine/feedback.py"}),
    (
        "Now I need write access to fix the docstring.",
        "edit_file",
        {"path": "engine/plan.py", "old": "x", "new": "y"},
    ),
    (
        "Where is cache-break attribution used?",
        "grep",
        {"pattern": "attribute_cache_break", "path": "engine"},
    ),
    ("Read the alert rules.", "read_file", {"path": "engine/alerts.py"}),
    ("Read the spill backends.", "read_file", {"path": "engine/spill.py"}),
    (
        "Grep every 'def ' in the engine to map it (this output is large).",
        "grep",
        {"pattern": r"def \w+", "path": "."},
    ),
    ("Read the trim rule.", "read_file", {"path": "engine/optimize/trim_sections.py"}),
    ("Read the providers.", "read_file", {"path": "engine/providers/base.py"}),
    ("Read the Anthropic serializer.", "read_file", {"path": "engine/providers/anthropic.py"}),
    ("Read the catalog.", "read_file", {"path": "engine/catalog.py"}),
    ("Read the statistics.", "read_file", {"path": "engine/stats.py"}),
    ("Read the replay module.", "read_file", {"path": "engine/recording/replay.py"}),
    ("Read the journal.", "read_file", {"path": "engine/recording/journal.py"}),
    (
        "Count the tests.",
        "run",
        {"code": "import pathlib; print(len(list(pathlib.Path('tests').rglob('test_*.py'))))"},
    ),
]

FLIP_TURN = 15  # the turn whose request carries the flipped permissions latch
# The turn whose tool output is doubled (turn 19 reads engine/providers/base.py: ~5.6k tokens, ~11k doubled).
# The largest output is turn 17's grep of every `def` in the repository (the corpus's: ~68k cl100k
# tokens, ~7 windows of 10,200), spilled on its own: from turn 18 the trace's `raw_history` (the
# conversation as the agent holds it, over the window) reads far over 1 while pressure stays under it.
HUGE_TURN = 19
BIND_FAIL_TURN = 12


Corpus = dict[tuple[str, str], str]  # (tool, its arguments as JSON) -> the output recorded for it


def load_corpus(path: Path = CORPUS) -> Corpus:
    """Every tool output of the recorded demo session, by the call that produced it. The recording
    holds each text once, as a blob its events name by hash (engine/recording/journal.py)."""
    from engine.recording.cpsession import RecordingReader

    blobs: dict[str, str] = {}
    calls: dict[str, tuple[str, str]] = {}  # call id -> (tool, arguments)
    corpus: Corpus = {}
    with RecordingReader.open(path) as r:
        for ev in r.events():
            k = ev.get("k")
            if k == "blob":
                blobs[ev["h"]] = ev["data"]
            elif k == "msg" and ev.get("role") == "assistant":
                for part in ev["parts"]:
                    if part.get("t") == "call":
                        calls[part["id"]] = (part["name"], blobs[part["h"]])
            elif k == "part" and ev["part"].get("t") == "result":
                part = ev["part"]
                out = blobs[part["h"]]
                if part["id"] == f"call_{HUGE_TURN:03d}":  # recorded doubled (see main): the tool's own output
                    out = out[: len(out) // 2]
                corpus.setdefault(calls[part["id"]], out)
    return corpus


def run_tool(name: str, args: dict[str, str], writable: bool, corpus: Corpus) -> str:
    if name == "edit_file":
        if not writable:
            return "error: permission denied: the session is read-only"
        return "ok (demo: no file was changed)"
    found = corpus.get((name, json.dumps(args)))
    if found is None:  # tool errors go back to the model as results, like a real agent loop
        return f"error: {name} {json.dumps(args)} is not in the demo's recorded repository"
    return found


def build_pipeline(args: argparse.Namespace, clock: Callable[[], float]) -> tuple[Pipeline, dict[str, int]]:
    limits = OptimizeLimits(spill_threshold=2500, max_clear_tokens=8000)
    if args.gates_closed:
        # The "no optimizer" scenario: every gate shut, so each turn lists what the closed gates would
        # have saved and only the budget guarantee (in-section trimming) keeps the request in the window.
        limits = limits.with_gates({g: False for g in OptimizeLimits.GATES})
    pipe = Pipeline(
        MODEL,
        args.provider,
        args.window,
        record=args.record,
        serve=args.serve,
        limits=limits,
        max_output_tokens=1024,
        default_response_reserve=600,
        clock=clock,
    )
    pipe.identity(
        "You are Scout, a careful coding agent. You read before you change anything, "
        "and you explain what you found in plain words."
    )
    pipe.constraints(
        "Never modify files outside the repository. Never run network commands. "
        "Ask before editing when the session is read-only."
    )
    pipe.goal(
        "Find out how the ContextPipe engine chooses its compaction tier and write a short summary "
        "of the rules, citing the modules."
    )
    for name, (desc, params) in TOOLS.items():
        pipe.add_tool(name, desc, params)
    pipe.latch("permissions", "read-only")
    pipe.memory("Project notes: the engine is pure Python; tests run with pytest.")
    pipe.user("Please explain how the compaction tier is chosen, with references to the code.")
    state = {"turn": 0}

    async def environment() -> str:
        if state["turn"] == BIND_FAIL_TURN:
            await asyncio.sleep(1.0)  # a slow environment probe: the binder times out, the section degrades
        return ENVIRONMENT

    pipe.add_source(
        "environment",
        SectionKind.CONTEXT,
        binder=environment,
        scope=CacheScope.NONE,
        priority=Priority.FIRST,
        timeout_s=0.5,
        name="Environment",
    )
    return pipe, state


PR_SET_PDEATHSIG = 1  # linux/prctl.h


def die_with_parent(parent_pid: int) -> None:
    """End this agent when the process that started it ends (cp-inspect demo killed by SIGKILL or SIGTERM):
    the kernel sends SIGTERM on the parent's death (Linux prctl), and a watchdog thread checks the parent
    pid twice a second where prctl is unavailable or the parent died before it was set."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        except (OSError, AttributeError):
            pass  # the watchdog below still applies

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(0.5)
        os.kill(os.getpid(), signal.SIGTERM)

    if os.getppid() != parent_pid:
        os.kill(os.getpid(), signal.SIGTERM)
    threading.Thread(target=watch, name="parent-watchdog", daemon=True).start()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m inspector.demo_agent", description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=40)
    ap.add_argument("--record", default=None)
    ap.add_argument("--serve", action="store_true")
    ap.add_argument("--delay", type=float, default=1.5)
    ap.add_argument("--window", type=int, default=10200)
    ap.add_argument("--provider", default="anthropic")
    ap.add_argument("--print", action="store_true", help="print one line per turn")
    ap.add_argument("--announce", action="store_true", help="say how to attach, once serving, before the turns")
    ap.add_argument("--gates-closed", action="store_true", help="run with every optimizer gate closed")
    ap.add_argument("--deterministic", action="store_true", help="fixed clock (for committed demo sessions)")
    ap.add_argument("--parent-pid", type=int, default=None, help="end when this process ends")
    args = ap.parse_args(argv)
    # SIGTERM ends the run through the finally below, so the recording is closed with its index.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    if args.parent_pid is not None:
        die_with_parent(args.parent_pid)
    fake = [1_767_225_600.0]
    clock = (lambda: fake[0]) if args.deterministic else time.time
    try:
        corpus = load_corpus()
    except (OSError, ContextPipeError) as exc:
        print(f"cp-inspect: demo agent: cannot read its recorded repository {CORPUS}: {exc} (run it from a clone of "
              "the project: pip install -e .)", file=sys.stderr)
        return 1
    pipe, state = build_pipeline(args, clock)
    if args.announce:
        # Said here, by the agent, once its probe socket is bound (Pipeline binds it before returning) and
        # before its first turn line: `cp-inspect demo --no-tui` said it before the agent served (attach,
        # run at once, said "start the agent with serve=True") and, waiting for the socket, after turn 0.
        me = os.getpid()
        print(f"demo agent pid {me}, recording to {args.record}\n"
              f"  watch it from another terminal: cp-inspect attach {me}   (or cp-inspect ps)", flush=True)
    sim = CacheSimulator("anthropic" if args.provider == "anthropic" else "openai", MODEL)
    writable = False
    try:
        for t in range(args.turns):
            state["turn"] = t  # the environment binder's clock: it times out on BIND_FAIL_TURN
            thought, tool, targs = SCRIPT[t % len(SCRIPT)]
            if t == FLIP_TURN:
                writable = True
                pipe.latch("permissions", "read-write")
            if t == HUGE_TURN + 1:
                pipe.emerge(
                    "findings", "A very large grep output was spilled; re-run a narrower search if needed."
                )
            if t >= len(SCRIPT):
                targs = dict(targs)
            req = pipe.next_request()
            ser = req.serialized
            call = Call(
                tuple(Block(b.sha, b.tokens, b.marker, "5m", b.segment) for b in ser.blocks),
                clock(),
                MODEL,
                output_tokens=60 + 7 * (t % 9),
            )
            cc = sim.step(call)
            # The provider's tokenizer is not cl100k: report ~6% more input than estimated.
            extra = int(cc.input_tokens * 0.06)
            pipe.record_usage(
                {
                    "input_tokens": cc.input_tokens + extra,
                    "output_tokens": call.output_tokens,
                    "cache_read_tokens": cc.cache_read,
                    "cache_write_tokens": cc.cache_write,
                }
            )
            trace = req.trace
            if args.print:
                acts = ",".join(a["step"] for a in trace["actions"] if a["step"] != "place_markers") or "-"
                alerts = ",".join(a["rule"] for a in trace["alerts"]) or "-"
                print(
                    f"turn {t:3d} tier={trace['tier']:<16} p={trace['pressure']['predictive']:.2f} "
                    f"tokens={trace['final_tokens']:>6} cache_read={cc.cache_read:>6} actions={acts} alerts={alerts}",
                    flush=True,
                )
            calls = pipe.assistant(
                thought, [{"id": f"call_{t:03d}", "name": tool, "arguments": json.dumps(targs)}]
            )
            out = run_tool(tool, targs, writable, corpus)
            if t == HUGE_TURN:
                out = out + "\n" + out  # a second large output, spilled as well
            pipe.tool_result(calls[0].id, out, is_error=out.startswith("error:"))
            fake[0] += 20.0
            if args.delay:
                time.sleep(args.delay)
        if args.serve and args.delay:
            time.sleep(
                args.delay * 2
            )  # let an attached inspector read the last turn before the socket closes
    except KeyboardInterrupt:
        # Ctrl-C in the terminal reaches the agent with `cp-inspect demo --no-tui`: it ends the run as
        # SIGTERM does (the recording closed below), with no traceback.
        return 130
    finally:
        pipe.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
