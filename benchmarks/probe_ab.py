"""bench_probe --encode-ab, --lean-ab, --pace-ab: in-process A/Bs of where a live event is encoded, of the
lean stream against every turn whole, and of how a paced agent's burst ends."""

from __future__ import annotations

import argparse
import gc
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from probe_agents import attach_reader, drain, fresh_pipeline, run_block, stop_subject, thread_cpu

from engine.recording.frames import encode_frame


def encode_ab(args: argparse.Namespace, modes: list[str]) -> None:
    """Where a live event is encoded while a reader is attached (issue 15 item 4): `io`, the probe's I/O
    thread, up to ~100 ms after the event was built (what a non-recording Pipeline does); `agent`, the
    agent's thread at publish, handing the frame to publish() as a recorder does; `discard`, encoded at
    publish and thrown away (the agent's cost of encoding alone, the I/O thread still encodes). One
    reader stays attached through rounds of four blocks A B B A (mirrored every other round: the middle
    blocks of a round cost more, so only a mirrored pair of rounds is fair) on a fresh Pipeline; after
    each block the benchmark waits until the probe has sent everything, so the block carries all of its
    own encoding and sending. Figures per turn from the thread clocks: the agent's thread (its turns
    only), the probe thread, and their sum. `io,io` is the A/A."""
    rt = Path(tempfile.mkdtemp(prefix="cpb-", dir="/tmp")) / "contextpipe"
    per: dict[int, list[list[float]]] = {0: [], 1: []}  # per round: agent, probe, encoding (s per turn)
    encodes: list[tuple[str, int]] = []  # (kind, ns) of each encoding at publish

    def clock_pair() -> float:
        pairs = []
        for _ in range(200):
            t0 = time.thread_time_ns()
            pairs.append(time.thread_time_ns() - t0)
        return statistics.median(pairs)

    for rnd in range(args.rounds):
        server, step, pipe = fresh_pipeline(args, rt, rnd)
        where = {"mode": "io"}
        publish = server.publish

        # Every mode goes through this wrapper, so it costs them alike.
        def routed(
            ev: dict[str, Any], frame: bytes | None = None, _p=publish, _w=where, _s=server
        ) -> None:
            if _w["mode"] != "io" and frame is None and _s.client_count:
                # The thread's CPU clock (a loaded machine's preemptions do not count); reading it is
                # a syscall of 1-3 us on this VM, so the median of an empty pair is subtracted below.
                t0 = time.thread_time_ns()
                f = encode_frame(ev)
                encodes.append((ev.get("k", "?"), time.thread_time_ns() - t0))
                if _w["mode"] == "agent":
                    frame = f
            _p(ev, frame)

        server.publish = routed  # type: ignore[method-assign,assignment]
        run_block(step, 0, args.warmup)
        turn = args.warmup
        reader = attach_reader(server, rt)
        sums = {0: [0.0, 0.0, 0.0], 1: [0.0, 0.0, 0.0]}
        for idx in (0, 1, 1, 0) if rnd % 2 == 0 else (1, 0, 0, 1):
            where["mode"] = modes[idx]
            drain(server)
            gc.collect()
            io0, a0 = thread_cpu(server), time.thread_time()
            run_block(step, turn, args.turns)
            agent = time.thread_time() - a0
            # Encoding at publish, per turn: each event kind's median (robust to the preemptions of a
            # loaded machine) times its count.
            by_kind: dict[str, list[int]] = {}
            for kind, ns in encodes:
                by_kind.setdefault(kind, []).append(ns)
            del encodes[:]
            empty = clock_pair()
            enc = sum(max(0.0, statistics.median(v) - empty) * len(v) for v in by_kind.values()) / 1e9
            drain(server)
            sums[idx][0] += agent
            sums[idx][1] += thread_cpu(server) - io0
            sums[idx][2] += enc
            turn += args.turns
        stop_subject("reader", reader, server)
        pipe.close()
        for idx in (0, 1):
            per[idx].append([x / (2 * args.turns) for x in sums[idx]])
    med = statistics.median
    us = {idx: [med(r[k] for r in per[idx]) * 1e6 for k in (0, 1, 2)] for idx in (0, 1)}
    total = [(b[0] + b[1]) / (a[0] + a[1]) for a, b in zip(per[0], per[1], strict=True)]
    # Each even round with the odd round after it: a mirrored pair, so the position effect cancels.
    pairs = [(total[i] * total[i + 1]) ** 0.5 for i in range(0, len(total) - 1, 2)]
    agent_pairs = [
        ((per[1][i][0] / per[0][i][0]) * (per[1][i + 1][0] / per[0][i + 1][0])) ** 0.5
        for i in range(0, len(total) - 1, 2)
    ]
    rec = " (recording)" if args.recording else ""
    print(
        f"encode {modes[0]} -> {modes[1]}{rec}, per turn (median over {args.rounds} rounds of "
        f"{args.turns}x4 turns): agent thread {us[0][0]:.1f} -> {us[1][0]:.1f} us (of which encoding at "
        f"publish {us[0][2]:.1f} -> {us[1][2]:.1f} us), probe thread {us[0][1]:.1f} -> {us[1][1]:.1f} us"
    )
    print(
        f"  agent+probe CPU ratio, median of mirrored round pairs: {med(pairs):.3f} "
        f"({' '.join(f'{x:.3f}' for x in pairs)}); agent thread alone: {med(agent_pairs):.3f}"
    )
    print("  agent+probe ratio by round:", " ".join(f"{x:.3f}" for x in total))
    shutil.rmtree(rt.parent, ignore_errors=True)


def lean_ab(args: argparse.Namespace) -> None:
    """The lean stream against every turn whole (issue 15 item 4), head to head on the thread clocks: one
    Pipeline per round, blocks A B B A (mirrored every other round), A with a reader of the whole
    stream attached (`fullreader`), B with a lean reader (`reader`, as the inspector's live source
    reads); each block attaches its reader, drains its snapshot, runs --turns turns, waits until the
    probe has sent everything, and detaches. Per turn: the probe thread, the agent's thread (its turns
    only), and their sum (a summary is made on the probe's thread; nothing moves to the agent's)."""
    rt = Path(tempfile.mkdtemp(prefix="cpb-", dir="/tmp")) / "contextpipe"
    per: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    for rnd in range(args.rounds):
        server, step, pipe = fresh_pipeline(args, rt, rnd)
        run_block(step, 0, args.warmup)
        turn = args.warmup
        sums = {False: [0.0, 0.0], True: [0.0, 0.0]}
        for lean in (False, True, True, False) if rnd % 2 == 0 else (True, False, False, True):
            reader = attach_reader(server, rt, "elide" if lean else "full")
            drain(server)
            gc.collect()
            io0, a0 = thread_cpu(server), time.thread_time()
            run_block(step, turn, args.turns)
            agent = time.thread_time() - a0
            drain(server)
            sums[lean][0] += thread_cpu(server) - io0
            sums[lean][1] += agent
            stop_subject("reader", reader, server)
            turn += args.turns
        pipe.close()
        for lean in (False, True):
            per[lean].append((sums[lean][0] / (2 * args.turns), sums[lean][1] / (2 * args.turns)))
    med = statistics.median
    full, lean_ = per[False], per[True]
    total = [(b[0] + b[1]) / (a[0] + a[1]) for a, b in zip(full, lean_, strict=True)]
    for name, rows in (("whole (fullreader)", full), ("lean (reader)", lean_)):
        probe = [r[0] for r in rows]
        agent = med(r[1] for r in rows)
        print(
            f"{name:19s}: probe thread {med(probe) * 1e6:5.1f} us a turn ({med(probe) / agent * 100:.2f}% of the "
            f"agent's {agent * 1e6:.0f} us) [{' '.join(f'{x * 1e6:.0f}' for x in probe)}]"
        )
    print(
        f"agent+probe CPU, lean / whole, by round: median {med(total):.3f} "
        f"[{' '.join(f'{x:.3f}' for x in total)}] ({args.rounds} rounds of 4 x {args.turns} turns)"
    )
    shutil.rmtree(rt.parent, ignore_errors=True)


def pace_ab(args: argparse.Namespace) -> None:
    """An agent that waits on its model between turns (issue 15 item 4): each turn is followed by
    --pace seconds of sleep, so every turn is a burst of its own and the probe's per-burst costs
    (wake-ups, a pass, a send) fall on every turn. One lean reader stays attached to one Pipeline per
    round; blocks A B B A (mirrored every other round) alternate how a burst ends: A, as before
    (the loop waits COALESCE more after a pass that sent something, and ends the burst at the
    pass that finds nothing), B, as now (a burst ends at the pass after which nothing was published in
    the second half of its wait). Per turn, from the thread clocks: the probe thread, its passes, and the
    agent's thread (its turns only: the sleeps are not counted)."""
    rt = Path(tempfile.mkdtemp(prefix="cpb-", dir="/tmp")) / "contextpipe"
    per: dict[str, list[tuple[float, float, float]]] = {"before": [], "now": []}
    for rnd in range(args.rounds):
        server, step, pipe = fresh_pipeline(args, rt, rnd)
        run_block(step, 0, args.warmup)
        turn = args.warmup
        reader = attach_reader(server, rt)
        flowing = server._flowing
        sums = {"before": [0.0, 0.0, 0.0], "now": [0.0, 0.0, 0.0]}
        order = ("before", "now", "now", "before") if rnd % 2 == 0 else ("now", "before", "before", "now")
        for mode in order:
            server._flowing = (lambda: True) if mode == "before" else flowing  # type: ignore[method-assign]
            drain(server)
            time.sleep(0.5)  # let the last burst end, so the block starts with the loop asleep
            gc.collect()
            io0, w0, agent = thread_cpu(server), server.wakeups, 0.0
            for t in range(turn, turn + args.turns):
                a0 = time.thread_time()
                step(t)
                agent += time.thread_time() - a0
                time.sleep(args.pace)
            drain(server)
            time.sleep(0.5)  # the burst's end (its last wait) belongs to this block
            sums[mode][0] += thread_cpu(server) - io0
            sums[mode][1] += server.wakeups - w0
            sums[mode][2] += agent
            turn += args.turns
        server._flowing = flowing  # type: ignore[method-assign]
        stop_subject("reader", reader, server)
        pipe.close()
        for mode in sums:
            per[mode].append(tuple(x / (2 * args.turns) for x in sums[mode]))  # type: ignore[arg-type]
    med = statistics.median
    for mode in ("before", "now"):
        rows = per[mode]
        probe = [r[0] for r in rows]
        agent = med(r[2] for r in rows)
        print(
            f"burst end {mode:6s}: probe thread {med(probe) * 1e6:6.1f} us a turn ({med(probe) / agent * 100:.2f}% of "
            f"the agent's {agent * 1e6:.0f} us), {med(r[1] for r in rows):.2f} passes a turn "
            f"[{' '.join(f'{x * 1e6:.0f}' for x in probe)}]"
        )
    print(f"  ({args.rounds} rounds of 4 x {args.turns} turns, each followed by {args.pace:g} s of sleep)")
    shutil.rmtree(rt.parent, ignore_errors=True)
