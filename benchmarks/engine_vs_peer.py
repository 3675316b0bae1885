"""bench_engine part 1: a real trajectory replayed call by call at one window, the engine's turn, the json.dumps
floor and trim_messages (naive and memoized) on the same growing history, interleaved, each turn's minimum
over the repeats."""

from __future__ import annotations

import argparse
import gc
import math
import statistics

from bench_engine import ENGINE_TIMED, KINDS, TIMED, cache_evictor, one_repeat, tiktoken_counter, tiktoken_one
from engine_peer import LcPlan, langchain_messages

from engine.importers import load
from engine.tokens import TokenCounter


def part1(args: argparse.Namespace) -> None:
    imp = load(args.file)
    lc_plan = LcPlan(imp)
    naive = tiktoken_counter()
    count_one = tiktoken_one()
    TokenCounter().count("warm up the tokenizer")
    naive(langchain_messages(imp.calls[0].messages))
    n = len(imp.calls)
    best: dict[str, list[list[float]]] = {k: [[math.inf] * n, [math.inf] * n] for k in TIMED}
    sizes: list[int] = []
    gc.collect()
    for _ in range(args.repeats):
        out, sizes = one_repeat(
            imp, args.window, lc_plan, naive, count_one, not args.no_peer, cache_evictor() if args.evict else None
        )
        for kind in TIMED if not args.no_peer else ENGINE_TIMED:
            for i, (w, c) in enumerate(out[kind]):
                best[kind][0][i] = min(best[kind][0][i], w)
                best[kind][1][i] = min(best[kind][1][i], c)
    ms = 1000.0
    warm = min(args.warm, n - 1)
    if args.no_peer:
        engine_summary(best, sizes, warm, args)
        return
    print(f"part 1: {args.file.name}: {n} calls, window {args.window} for engine and trim_messages, "
          f"{args.repeats} interleaved repeats, minimum per turn")  # fmt: skip
    print(f"final request {sizes[-1] / 1024:.0f} KiB; largest {max(sizes) / 1024:.0f} KiB")
    print()
    print(f"{'turn':>5} {'KiB':>5} {'engine ms':>10} {'floor ms':>9} {'trim ms':>8} {'memo ms':>8} "
          f"{'eng/floor':>9}  (CPU time)")  # fmt: skip
    e, f, t, mm = (best[k][1] for k in KINDS)
    for k in sorted({0, 1, 2, warm, n // 4, n // 2, 3 * n // 4, n - 1}):
        print(f"{k:>5} {sizes[k] / 1024:>5.0f} {e[k] * ms:>10.3f} {f[k] * ms:>9.3f} {t[k] * ms:>8.3f} "
              f"{mm[k] * ms:>8.3f} {e[k] / f[k]:>8.2f}x")  # fmt: skip
    print()
    for label, idx in (("wall", 0), ("CPU", 1)):
        e, f, t, mm = (best[k][idx] for k in KINDS)
        steady = statistics.median(a / b for a, b in zip(e[warm:], f[warm:], strict=True))
        print(f"[{label}] whole trajectory: engine {sum(e) * ms:.1f} ms, json.dumps floor {sum(f) * ms:.1f} ms, "
              f"trim_messages {sum(t) * ms:.1f} ms, trim_messages+memo {sum(mm) * ms:.1f} ms")  # fmt: skip
        print(f"[{label}]   engine / floor {sum(e) / sum(f):.2f}x; trim / floor {sum(t) / sum(f):.1f}x; "
              f"trim+memo / floor {sum(mm) / sum(f):.2f}x")  # fmt: skip
        print(f"[{label}]   engine / trim+memo {sum(e) / sum(mm):.2f}x (goal <= 1); "
              f"engine / naive trim {sum(e) / sum(t):.3f}x")  # fmt: skip
        print(f"[{label}]   steady-state engine turn / floor (median, turns >= {warm}): {steady:.2f}x "
              f"(goal <= 2x); median turn {statistics.median(e[warm:]) * ms:.3f} ms")  # fmt: skip
    # Tokenizing new content is O(new) work both the engine and trim+memo do (the minimum over repeats,
    # taken per turn like the rest). The rest of the engine turn is its own overhead.
    e, f, tk = best["engine"][1], best["floor"][1], best["tokenize"][1]
    rest = [max(0.0, a - b) for a, b in zip(e, tk, strict=True)]
    steady_rest = statistics.median(a / b for a, b in zip(rest[warm:], f[warm:], strict=True))
    print(f"[CPU] of which tokenizing new content {sum(tk) * ms:.1f} ms; engine without it "
          f"{sum(rest) * ms:.1f} ms = {sum(rest) / sum(f):.2f}x the floor; steady-state turn without it / "
          f"floor {steady_rest:.2f}x (median {statistics.median(rest[warm:]) * ms:.3f} ms)")  # fmt: skip
    print()


def engine_summary(best: dict[str, list[list[float]]], sizes: list[int], warm: int, args: argparse.Namespace) -> None:
    """Part 1 with --no-peer: the engine against its floor only, in a form meant for A/B runs (one line
    each, CPU and wall), without the minutes the naive trim_messages takes."""
    ms = 1000.0
    tk = best["tokenize"][1]
    print(f"part 1 (engine only): {args.file.name}: {len(sizes)} calls, window {args.window}, "
          f"{args.repeats} repeats, minimum per turn")  # fmt: skip
    for label, idx in (("wall", 0), ("CPU", 1)):
        e, f = best["engine"][idx], best["floor"][idx]
        steady = statistics.median(a / b for a, b in zip(e[warm:], f[warm:], strict=True))
        line = (f"[{label}] engine {sum(e) * ms:.1f} ms, floor {sum(f) * ms:.1f} ms; steady turn / floor "
                f"{steady:.2f}x (median turn {statistics.median(e[warm:]) * ms:.3f} ms)")  # fmt: skip
        if idx == 1:
            rest = [max(0.0, a - b) for a, b in zip(e, tk, strict=True)]
            steady_rest = statistics.median(a / b for a, b in zip(rest[warm:], f[warm:], strict=True))
            line += (f"; tokenizing {sum(tk) * ms:.1f} ms; without it {sum(rest) * ms:.1f} ms, steady "
                     f"{steady_rest:.2f}x (median {statistics.median(rest[warm:]) * ms:.3f} ms)")  # fmt: skip
        print(line)
