"""bench_engine part 2: a synthetic 10,000-turn session through the public API, the engine's turn against the
json.dumps floor as the history grows, its RSS, and trim+memo sampled along it."""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import statistics
from typing import Any

from bench_engine import TimedTokenizer, final_tokens, tiktoken_one, turn_ceiling
from engine_peer import Timer, memo_counter

from engine.optimize import OptimizeLimits
from engine.pipeline import Pipeline
from engine.tokens import TokenCounter


# ----------------------------------------------------------------------------- part 2
def synthetic_output(t: int) -> str:
    """A tool output of 5-150 lines, deterministic in t."""
    rnd = random.Random(t)
    n = rnd.choice((5, 20, 60, 150))
    return "".join(f"line {t}.{i}: {rnd.random():.6f} value = compute(x_{i}, y_{t})\n" for i in range(n))


def synthetic_round(pipe: Pipeline, t: int, output: str | None = None) -> None:
    """One round as the agent feeds it; `output` is the tool output (made before the timed region by
    part 2: producing it is the agent's work, not the engine's)."""
    args = json.dumps({"cmd": f"sed -n 1,200p src/module_{t % 97}.py"})
    calls = pipe.assistant(f"Step {t}: read the next module.", [{"id": f"c{t}", "name": "bash", "arguments": args}])
    pipe.tool_result(calls[0].id, synthetic_output(t) if output is None else output)


def rss_mb() -> float:
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6
    except OSError:
        return float("nan")


def part2(args: argparse.Namespace) -> None:
    # Pass A: the engine alone (so RSS is the engine's), with the floor of each turn's request.
    tokenizer = TimedTokenizer()
    pipe = Pipeline(
        "deepseek-chat",
        "openai",
        args.long_window,
        serve=False,
        clock=lambda: 0.0,
        policy=args.long_policy,
        counter=TokenCounter(tokenizer),
        limits=OptimizeLimits.all_closed() if args.long_gates_closed else None,
    )
    system, task = "You are a careful coding agent.", "Fix the failing test in tests/test_io.py."
    pipe.identity(system)
    pipe.add_tool("bash", "Run a shell command", {"type": "object", "properties": {"cmd": {"type": "string"}}})
    pipe.user(task)
    # messages, engine wall/CPU, floor wall/CPU, bytes sent, CPU tokenizing new content
    rows: list[tuple[int, float, float, float, float, int, float]] = []
    ceilings: list[int] = []
    rss: list[tuple[int, int, float]] = []
    gc.collect()
    rss0 = rss_mb()
    for t in range(args.long_turns):
        output = synthetic_output(t)
        tok0 = tokenizer.cpu
        tm = Timer()
        synthetic_round(pipe, t, output)
        req = pipe.next_request()
        pipe.record_usage({"input_tokens": final_tokens(req), "output_tokens": 40})
        ew, ec = tm.stop()
        body = req.body
        tm = Timer()
        json.dumps(body)
        fw, fc = tm.stop()
        rows.append((len(pipe.history) + 1, ew, ec, fw, fc, len(req.bytes), tokenizer.cpu - tok0))
        ceilings.append(turn_ceiling(req))
        if (t + 1) % 1000 == 0:
            rss.append((t + 1, len(pipe.history) + 1, rss_mb() - rss0))
    log = pipe.journal.events
    # A journal kept as a plain list (engines before the event log) holds every event in memory.
    journal = (len(log), len(log), 0)
    if hasattr(log, "in_memory"):
        journal = (len(log), log.in_memory(), log.spilled_bytes())
    # Engines before the history log kept every message and text in memory.
    hist, blobs = pipe.history, pipe.journal.blobs
    held = (
        (len(hist), hist.in_memory(), hist.spilled_bytes()) if hasattr(hist, "in_memory") else (len(hist), len(hist), 0)
    )
    texts = (
        (len(blobs), blobs.in_memory(), blobs.spilled_bytes()) if hasattr(blobs, "in_memory") else (len(blobs), len(blobs), 0)
    )
    del pipe, req, body, log, hist, blobs
    # Pass B: LangChain alone, the same messages, trim+memo every 500 turns at the engine's ceiling.
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage, trim_messages

    lc: list[Any] = [SystemMessage(system), HumanMessage(task)]
    memo = memo_counter(tiktoken_one())
    samples: list[tuple[int, int, float]] = []
    for t in range(0 if args.long_no_peer else args.long_turns):  # --long-no-peer: the engine alone
        args_json = json.dumps({"cmd": f"sed -n 1,200p src/module_{t % 97}.py"})
        lc.append(AIMessage(f"Step {t}: read the next module.",
                            tool_calls=[{"name": "bash", "args": json.loads(args_json), "id": f"c{t}"}]))
        lc.append(ToolMessage(synthetic_output(t), tool_call_id=f"c{t}"))
        if (t + 1) % 500 == 0:
            memo(lc)  # count the new messages outside the sample: a memoizing agent did so as they came
            tm = Timer()
            trim_messages(lc, max_tokens=ceilings[t], token_counter=memo, strategy="last", include_system=True)
            samples.append((t + 1, len(lc), tm.stop()[1]))
    ms = 1000.0
    print(f"part 2: synthetic session, {args.long_turns} turns ({rows[-1][0]} messages), window "
          f"{args.long_window}, policy {args.long_policy or 'default'}"
          f"{', every gate closed' if args.long_gates_closed else ''}; one run, each point the median of "
          f"the 50 turns before it; counted by {getattr(tokenizer.inner, 'backend', '') or '?'}")  # fmt: skip
    print(f"{'messages':>9} {'KiB sent':>8} {'engine ms':>10} {'floor ms':>9} {'eng/floor':>9} "
          f"{'CPU eng/floor':>13} {'CPU w/o tokenizing':>18}")  # fmt: skip
    for target in (1_000, 5_000, 20_000):
        idx = next((i for i, r in enumerate(rows) if r[0] >= target), None)
        if idx is None or idx < 50:
            continue
        win = rows[idx - 50 : idx]
        ew = statistics.median(r[1] for r in win)
        ec = statistics.median(r[2] for r in win)
        fw = statistics.median(r[3] for r in win)
        fc = statistics.median(r[4] for r in win)
        ratio_w = statistics.median(r[1] / r[3] for r in win)
        ratio_c = statistics.median(r[2] / r[4] for r in win)
        ratio_r = statistics.median(max(0.0, r[2] - r[6]) / r[4] for r in win)
        tk = statistics.median(r[6] for r in win)
        print(f"{target:>9} {win[-1][5] / 1024:>8.0f} {ew * ms:>10.3f} {fw * ms:>9.3f} {ratio_w:>8.2f}x "
              f"{ratio_c:>12.2f}x {ratio_r:>17.2f}x   (CPU {ec * ms:.3f} / {fc * ms:.3f} ms; "
              f"tokenizing {tk * ms:.3f} ms)")  # fmt: skip
    tot_e = sum(r[2] for r in rows)
    tot_f = sum(r[4] for r in rows)
    tot_t = sum(r[6] for r in rows)
    print(f"whole session CPU: engine {tot_e:.2f} s (tokenizing new content {tot_t:.2f} s), json.dumps floor "
          f"{tot_f:.2f} s ({tot_e / tot_f:.2f}x; {(tot_e - tot_t) / tot_f:.2f}x without tokenizing)")  # fmt: skip
    print("engine RSS growth (MB, pass A): " + ", ".join(f"turn {t} ({n} msgs) +{m:.1f}" for t, n, m in rss))
    if len(rss) >= 2:
        (t0, _, m0), (t1, _, m1) = rss[0], rss[-1]
        print(f"  {(m1 - m0) * 1000 / (t1 - t0):.1f} MB per 1,000 turns after turn {t0}")
    print(f"journal: {journal[0]} events, {journal[1]} in memory, {journal[2] / 1e6:.1f} MB on disk")
    print(f"history: {held[0]} messages, {held[1]} in memory, {held[2] / 1e6:.1f} MB on disk; "
          f"texts: {texts[0]}, {texts[1]} in memory, {texts[2] / 1e6:.1f} MB on disk")  # fmt: skip
    print(f"{'turn':>6} {'messages':>9} {'trim+memo ms':>12} {'/floor':>7}  (CPU, pass B, sampled)")
    for turn, nmsg, mc in samples[:: max(1, len(samples) // 6)] + samples[-1:]:
        fc = statistics.median(r[4] for r in rows[max(0, turn - 50) : turn])
        print(f"{turn:>6} {nmsg:>9} {mc * ms:>12.2f} {mc / fc:>6.1f}x")
    print()
