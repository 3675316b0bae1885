"""bench_engine --ab and --iso: part 1's subjects in long-lived child processes that take turns repeat by
repeat (this tree against an older one; the engine against trim+memo, warm and cold), each turn's minimum,
and the summaries."""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import statistics
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench_engine import (
    ENGINE_TIMED,
    EngineRun,
    TimedText,
    TimedTokenizer,
    cache_evictor,
    engine_only,
    one_repeat,
    text_counter,
    tiktoken_counter,
    tiktoken_one,
)
from engine_peer import LcAgent, LcPlan, Timer, langchain_messages, memo_counter

from engine.importers import ImportedSession, load
from engine.tokens import TokenCounter


# ----------------------------------------------------------------------------- paired A/B
def pair_child(args: argparse.Namespace) -> int:
    """--pair-child: one engine repeat of part 1 (engine and floor, no peer) per line read on stdin,
    answered with one JSON line of per-turn thread-CPU lists. Run by --ab under each tree's PYTHONPATH,
    so the engine timed is that tree's while the timing loop is this file's."""
    imp = load(args.file)
    TokenCounter().count("warm up the tokenizer")
    naive, count_one = tiktoken_counter(), tiktoken_one()  # unused without peers; one_repeat's signature
    evict = cache_evictor() if args.evict else None  # --ab --evict: both trees' turns cold
    for _line in sys.stdin:
        gc.collect()
        out, _sizes = one_repeat(imp, args.window, None, naive, count_one, peers=False, evict=evict)
        print(json.dumps({k: [c for _w, c in out[k]] for k in ENGINE_TIMED}), flush=True)
    return 0


def alternate(
    kids: list[tuple[str, Any]], rounds: int, asks: Sequence[str] = ("go",)
) -> dict[str, dict[str, list[float]]]:
    """Ask every child process for one repeat a round for each of `asks` (the word on its stdin, one JSON
    line of per-turn CPU lists back), in list order and reversed every other round (the asks too), each
    round on one core (the core changing round by round); per name (with more than one ask, per "name
    ask"), each list's minimum per turn over every repeat of every process of that name. Closes the
    children."""
    best: dict[str, dict[str, list[float]]] = {}
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    try:
        for r in range(rounds):
            for name, kid in kids if r % 2 == 0 else kids[::-1]:
                assert kid.stdin is not None and kid.stdout is not None
                if cpus:
                    os.sched_setaffinity(kid.pid, {cpus[r % len(cpus)]})
                for ask in asks if r % 2 == 0 else asks[::-1]:
                    kid.stdin.write(f"{ask}\n")
                    kid.stdin.flush()
                    got = json.loads(kid.stdout.readline())
                    key = name if len(asks) == 1 else f"{name} {ask}"
                    mine = best.setdefault(key, {k: [math.inf] * len(got[k]) for k in got})
                    for k, vals in got.items():
                        mine[k] = [min(a, b) for a, b in zip(mine[k], vals, strict=True)]
    finally:
        for _name, kid in kids:
            if kid.stdin is not None:
                kid.stdin.close()
            kid.wait()
    return best


def ab(args: argparse.Namespace) -> int:
    """--ab BASE_DIR: part 1's engine (no peer) under this tree and under BASE_DIR (a `git archive` of
    older code), in long-lived processes that take turns repeat by repeat (A B, then B A): both see the
    same load, turn by turn, instead of one whole run after the other (on a shared machine a whole
    run's CPU time moves by 1.5x from one minute to the next). Each turn's minimum over the repeats,
    as in part 1."""
    import subprocess

    here = Path(__file__).resolve().with_name("bench_engine.py")  # the children run the script
    trees = {"base": Path(args.ab).resolve(), "new": here.parents[1]}
    # Several processes per tree: in A/A runs (the same tree on both sides) one process ran 0.8-1.3x
    # the other's CPU time throughout, pinned or not (where its memory landed, how it shares a core),
    # so one process per side measures the processes, not the code. Each turn's minimum is over every
    # repeat of every process of a tree.
    kids: list[tuple[str, Any]] = []
    for _ in range(args.procs):
        for name, tree in trees.items():
            env = dict(os.environ, PYTHONPATH=str(tree))
            cmd = [sys.executable, str(here), "--pair-child", "--file", str(args.file), "--window", str(args.window),
                   "--backend", args.backend, "--provider", args.provider, "--observe", args.observe,
                   "--usage", args.usage] + (["--evict"] if args.evict else [])  # fmt: skip
            kids.append((name, subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)))
    best = alternate(kids, args.rounds)
    ms = 1000.0
    warm = args.warm
    summary: dict[str, dict[str, float]] = {}
    for name in ("base", "new"):
        e, f, tk = best[name]["engine"], best[name]["floor"], best[name]["tokenize"]
        rest = [max(0.0, a - b) for a, b in zip(e, tk, strict=True)]
        summary[name] = {
            "engine": sum(e) * ms,
            "floor": sum(f) * ms,
            "tokenize": sum(tk) * ms,
            "steady": statistics.median(a / b for a, b in zip(e[warm:], f[warm:], strict=True)),
            "steady_rest": statistics.median(a / b for a, b in zip(rest[warm:], f[warm:], strict=True)),
            "median_turn": statistics.median(e[warm:]) * ms,
        }
        v = summary[name]
        print(f"[CPU] {name}: engine {v['engine']:.1f} ms, floor {v['floor']:.1f} ms, tokenizing "
              f"{v['tokenize']:.1f} ms; steady turn / floor {v['steady']:.2f}x (median turn "
              f"{v['median_turn']:.3f} ms), without tokenizing {v['steady_rest']:.2f}x")  # fmt: skip
    b, n = summary["base"], summary["new"]
    print(f"[CPU] new / base: whole trajectory {n['engine'] / b['engine']:.3f}, median steady turn "
          f"{n['median_turn'] / b['median_turn']:.3f}, without tokenizing "
          f"{(n['engine'] - n['tokenize']) / (b['engine'] - b['tokenize']):.3f} "
          f"({args.procs} processes per tree, {args.rounds} repeats each, alternating)")  # fmt: skip
    return 0


def iso_child(args: argparse.Namespace) -> int:
    """--iso-child KIND: one repeat of one subject per line read on stdin (engine: the engine and its
    floor; memo: trim_messages with the memoized counter), warm or cold as the line says ("cold": the
    caches evicted before every turn and floor; "warm"), answered with one JSON line of per-turn
    thread-CPU lists."""
    imp = load(args.file)
    TokenCounter().count("warm up the tokenizer")
    # One evictor for both states, its ~300k objects frozen out of the collector's passes: warm and cold
    # repeats run on the same heap and differ only in whether the pass over it runs before each turn.
    evictor = cache_evictor()
    gc.freeze()

    def state(line: str) -> Callable[[], object] | None:
        return evictor if line.strip() == "cold" else None

    repeat = engine_repeat(args, imp) if args.iso_child == "engine" else memo_repeat(args, imp)
    # One repeat thrown away first: a process's first pays for what runs once (lazy imports, first
    # calls), which would otherwise land on whichever state is asked first.
    repeat(None)
    for line in sys.stdin:
        print(json.dumps(repeat(state(line))), flush=True)
    return 0


def engine_repeat(args: argparse.Namespace, imp: ImportedSession) -> Callable[[Any], dict[str, list[float]]]:
    """--iso's engine subject: one repeat of the engine and its floor (part 1's, no peer), evicting the
    caches before each turn and floor with `evict` (None: warm); per-turn thread-CPU lists."""

    def repeat(evict: Callable[[], object] | None) -> dict[str, list[float]]:
        gc.collect()
        chars = TimedTokenizer.chars
        out, _sizes = one_repeat(imp, args.window, None, tiktoken_counter(), tiktoken_one(), peers=False, evict=evict)
        return {**{k: [c for _w, c in out[k]] for k in ENGINE_TIMED}, "tokenize_chars": [TimedTokenizer.chars - chars]}

    return repeat


def memo_repeat(args: argparse.Namespace, imp: ImportedSession) -> Callable[[Any], dict[str, list[float]]]:
    """--iso's peer subject: one repeat of trim_messages with the memoized counter under the engine's
    ceilings (--iso-limits), and the peer's request on the wire; `evict` as in engine_repeat."""
    from langchain_core.messages import convert_to_openai_messages, trim_messages

    limits = json.loads(args.iso_limits.read_text())
    lc_plan = LcPlan(imp)
    timed = TimedText(text_counter())
    count_one = tiktoken_one(timed)
    count_one(langchain_messages(imp.calls[0].messages[:1])[0])
    # The request the peer's agent sends around the trimmed messages: the engine's own first request's
    # fields (model, max tokens, tool schemas), so both bodies carry the same things.
    first = EngineRun(imp, args.window)
    for m in imp.calls[0].messages:
        first.feed(m)
    # Less the system prompt: convert_to_openai_messages carries it as the first message (trim keeps it,
    # include_system=True), so an Anthropic body's `system` beside it would serialize it twice.
    frame = {k: v for k, v in first.pipe.next_request().body.items() if k not in ("messages", "system")}

    def repeat(evict: Callable[[], object] | None) -> dict[str, list[float]]:
        gc.collect()
        memo = memo_counter(count_one)  # fresh per repeat, as in one_repeat
        agent = LcAgent(lc_plan)
        cpu: list[float] = []
        wire: list[float] = []
        tokenize: list[float] = []
        chars = timed.chars
        for k, limit in enumerate(limits):
            if evict is not None:
                evict()
            tok0 = timed.cpu
            took, kept = agent.turn(k, trim_messages, limit, memo)
            cpu.append(took[1])
            tokenize.append(timed.cpu - tok0)
            # What trim_messages leaves is LangChain objects; the engine's turn ends with the request's
            # bytes. Turning the kept messages into the provider's wire form and serializing the body is
            # what the peer's agent (or its SDK) does next: timed apart, so both figures are reported.
            # Not evicted before: it continues the trim's turn, as the engine's serializing continues its plan.
            t = Timer()
            json.dumps({**frame, "messages": convert_to_openai_messages(kept)})
            wire.append(t.stop()[1])
        return {"memo": cpu, "wire": wire, "memo_tokenize": tokenize, "memo_tokenize_chars": [timed.chars - chars]}

    return repeat


ISO_STATES = {
    "warm": "warm (nothing else between turns)",
    "cold": "cold (caches evicted before every subject's turn and floor, as after a model call)",
}


def iso(args: argparse.Namespace) -> int:
    """--iso: the engine (with its floor) and trim_messages+memo, each alone in its own processes,
    taking turns repeat by repeat as --ab does. Nothing else runs in a subject's process, so neither
    inherits the other's cache state. Every process runs each repeat warm and cold (see iso_child; an
    agent's turns are separated by a model call, so its user meets the cold figure), unless --evict
    (cold only) or --iso-warm (warm only). Each turn's minimum over every repeat of every process of a
    subject, per state. The trims get the engine's ceiling of each turn, as in part 1."""
    import subprocess
    import tempfile

    here = Path(__file__).resolve().with_name("bench_engine.py")  # the children run the script
    imp = load(args.file)
    states = ("cold",) if args.evict else ("warm",) if args.iso_warm else ("warm", "cold")
    with tempfile.TemporaryDirectory() as tmp:
        limits_file = Path(tmp) / "limits.json"
        limits_file.write_text(json.dumps(engine_only(imp, args.window)))
        kids: list[tuple[str, Any]] = []
        for _ in range(args.procs):
            for kind in ("engine", "memo"):
                cmd = [sys.executable, str(here), "--iso-child", kind, "--iso-limits", str(limits_file),
                       "--file", str(args.file), "--window", str(args.window), "--backend", args.backend,
                       "--provider", args.provider, "--peer-counter", args.peer_counter, "--usage", args.usage]  # fmt: skip
                kids.append((kind, subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)))
        got = alternate(kids, args.rounds, states)
    warm = min(args.warm, len(imp.calls) - 1)
    figures: dict[str, dict[str, float]] = {}
    for st in states:
        tail = f" {st}" if len(states) > 1 else ""  # alternate's keys: "name ask" with more than one ask
        best = {**got[f"engine{tail}"], **got[f"memo{tail}"]}
        figures[st] = iso_summary(args, best, ISO_STATES[st], warm)
    if len(states) > 1:
        w, c = figures["warm"], figures["cold"]
        print(f"[CPU] warm / cold: engine / trim+memo {w['ratio']:.2f}x / {c['ratio']:.2f}x (goal <= 1); "
              f"engine / (trim+memo+wire) {w['ratio_wire']:.2f}x / {c['ratio_wire']:.2f}x; steady turn / floor "
              f"{w['steady']:.2f}x / {c['steady']:.2f}x (goal <= 2x); whole trajectory engine {w['engine']:.1f} / "
              f"{c['engine']:.1f} ms, trim+memo {w['memo']:.1f} / {c['memo']:.1f} ms, floor {w['floor']:.1f} / "
              f"{c['floor']:.1f} ms (cold: what an agent's user meets)")  # fmt: skip
    return 0


def iso_summary(args: argparse.Namespace, best: dict[str, list[float]], state: str, warm: int) -> dict[str, float]:
    """--iso's lines for one state (warm or cold) from each turn's minimum per list; its headline
    figures (ms and ratios) for the line that sets the states side by side."""
    ms = 1000.0
    e, f, tk, mm = best["engine"], best["floor"], best["tokenize"], best["memo"]
    rest = [max(0.0, a - b) for a, b in zip(e, tk, strict=True)]
    print(f"--iso, {state}: {args.file.name}, {len(e)} calls at {args.window}; {args.procs} processes per "
          f"subject x {args.rounds} repeats, alternating; minimum per turn; thread CPU")  # fmt: skip
    print(f"[CPU] whole trajectory: engine {sum(e) * ms:.1f} ms (tokenizing new content {sum(tk) * ms:.1f}), "
          f"trim_messages+memo {sum(mm) * ms:.1f} ms, json.dumps floor {sum(f) * ms:.1f} ms")  # fmt: skip
    # Issue 12's goal names this ratio: the peer's output is the kept message list, the engine's the
    # provider request's bytes. The wire line below adds what the peer's agent does next.
    print(f"[CPU]   engine / trim+memo {sum(e) / sum(mm):.2f}x (goal <= 1: issue 12's ratio); without the engine's "
          f"tokenizing {sum(rest) / sum(mm):.2f}x")  # fmt: skip
    # Both sides tokenize each message once: the engine's tokenizing against the peer's own (its counter
    # timed alike), and each turn without either's.
    ptk = best["memo_tokenize"]
    prest = [max(0.0, a - b) for a, b in zip(mm, ptk, strict=True)]
    print(f"[CPU]   tokenizing: engine {sum(tk) * ms:.1f} ms over {best['tokenize_chars'][0]:,.0f} characters, "
          f"trim+memo {sum(ptk) * ms:.1f} ms over {best['memo_tokenize_chars'][0]:,.0f} ({args.peer_counter}); "
          f"without either's tokenizing engine / trim+memo {sum(rest) / sum(prest):.2f}x "
          f"({sum(rest) * ms:.1f} against {sum(prest) * ms:.1f} ms)")  # fmt: skip
    wire = best["wire"]
    # The peer's messages go out in OpenAI's form whatever --provider says (langchain-anthropic, whose
    # converter writes Anthropic's, is not a dependency here): --provider openai compares like for like.
    print(f"[CPU]   the peer's request on the wire (convert_to_openai_messages + json.dumps of the body: OpenAI's "
          f"message form at any --provider) {sum(wire) * ms:.1f} ms: engine / (trim+memo+wire) "
          f"{sum(e) / (sum(mm) + sum(wire)):.2f}x (the engine's turn includes its request's bytes; the goal's ratio "
          f"is the one above)")  # fmt: skip
    peer = [a + b for a, b in zip(mm, wire, strict=True)]
    print(f"[CPU]   turns < {warm}: engine {sum(e[:warm]) * ms:.1f} ms, trim+memo+wire {sum(peer[:warm]) * ms:.1f} ms; "
          f"turns >= {warm}: engine {sum(e[warm:]) * ms:.1f} ms, trim+memo+wire {sum(peer[warm:]) * ms:.1f} ms")  # fmt: skip
    steady = statistics.median(a / b for a, b in zip(e[warm:], f[warm:], strict=True))
    print(f"[CPU]   steady turn (median, turns >= {warm}): engine {statistics.median(e[warm:]) * ms:.3f} ms, "
          f"trim+memo {statistics.median(mm[warm:]) * ms:.3f} ms, floor {statistics.median(f[warm:]) * ms:.3f} ms; "
          f"engine / floor {steady:.2f}x (goal <= 2x)")  # fmt: skip
    if args.split:
        split_turns(e, tk, mm, ptk, warm)
    return {
        "engine": sum(e) * ms,
        "memo": sum(mm) * ms,
        "floor": sum(f) * ms,
        "ratio": sum(e) / sum(mm),
        "ratio_wire": sum(e) / (sum(mm) + sum(wire)),
        "steady": steady,
    }


def split_turns(e: list[float], tk: list[float], mm: list[float], ptk: list[float], warm: int) -> None:
    """--split: per turn, the engine's and trim+memo's CPU with and without their tokenizing (each its
    minimum over repeats, as above), and the whole trajectory's difference of the two without tokenizing
    summed over three groups: the first turns (< warm), the later turns whose engine time without
    tokenizing is over twice the median of those (a compaction, another turn the express lane hands to
    the general path), and the rest (the steady turns, nearly all the express lane's)."""
    ms = 1000.0
    rest = [max(0.0, a - b) for a, b in zip(e, tk, strict=True)]
    prest = [max(0.0, a - b) for a, b in zip(mm, ptk, strict=True)]
    mid = statistics.median(rest[warm:]) if rest[warm:] else 0.0
    print("[CPU]   per turn, ms: engine (tokenizing, rest) | trim+memo (tokenizing, rest) | rest difference")
    groups = {"first": 0.0, "over 2x": 0.0, "steady": 0.0}
    count = dict.fromkeys(groups, 0)
    for k in range(len(e)):
        g = "first" if k < warm else "over 2x" if rest[k] > 2 * mid else "steady"
        groups[g] += rest[k] - prest[k]
        count[g] += 1
        print(f"        {k:4d} {e[k] * ms:7.3f} ({tk[k] * ms:6.3f}, {rest[k] * ms:6.3f}) | {mm[k] * ms:7.3f} "
              f"({ptk[k] * ms:6.3f}, {prest[k] * ms:6.3f}) | {(rest[k] - prest[k]) * ms:+7.3f}"
              f"{'  (over 2x)' if g == 'over 2x' else ''}")  # fmt: skip
    tok = sum(tk) - sum(ptk)
    print(f"[CPU]   engine - trim+memo, whole trajectory {(sum(e) - sum(mm)) * ms:+.2f} ms: tokenizing "
          f"{tok * ms:+.2f}; without it "
          + ", ".join(f"{g} {v * ms:+.2f} ({count[g]} turns)" for g, v in groups.items()))  # fmt: skip
    if warm >= 3:
        # The first turns apart: turn 0 (the general path's first build: sources, schemas, the first
        # placement and serialization), turn 1 (the lane's first turn after it) and the rest, which the
        # lane makes as it makes a steady turn (compare with the steady turns' median difference).
        diff = [a - b for a, b in zip(rest, prest, strict=True)]
        later = [diff[k] for k in range(warm, len(e)) if rest[k] <= 2 * mid]
        usual = statistics.median(later) if later else 0.0
        print(f"[CPU]     of the first: turn 0 {diff[0] * ms:+.2f}, turn 1 {diff[1] * ms:+.2f}, turns 2-{warm - 1} "
              f"{sum(diff[2:warm]) * ms:+.2f} (a steady turn's median {usual * ms:+.3f}, x{warm - 2} = "
              f"{usual * (warm - 2) * ms:+.2f})")  # fmt: skip
