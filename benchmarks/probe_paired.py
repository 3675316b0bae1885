"""bench_probe --paired: what a subject (a reader, hostile clients, or none: the A/A) adds to the agent
process's CPU a turn, by short interleaved blocks of one Pipeline a round."""

from __future__ import annotations

import argparse
import gc
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from probe_agents import (
    READERS,
    drain,
    fresh_pipeline,
    run_block,
    spills,
    start_subject,
    stop_subject,
    thread_cpu,
)


def paired(args: argparse.Namespace, subject: str) -> None:
    """What the subject adds to the agent process's CPU a turn, by short interleaved blocks (issue 15
    item 4 and issue 10 item 3): `none` as the subject is the A/A control, which this design holds at
    1.00 within its noise.

    Each round is a fresh Pipeline, warmed up (--warmup turns), then one octet of blocks of --block
    timed turns, A B B A B A A B or its mirror in turn (the first at random, --seed), A without the subject
    and B with it. Why this shape (the earlier design, one round of base subject subject base blocks of 40, read
    its A/A 0.83-0.99): the turn's cost grows with its history and not linearly (convex, and the first
    history write, ~6 ms, falls near turn 300), so the outer blocks of one long ABBA were dearer; that
    order cancels a straight drift, eight blocks in this order cancel a quadratic one too, and a round
    of 70 + 8 x 20 turns ends before the history's first write. Each block runs the same way on both
    sides: the subject started (a reader attached and its snapshot drained), --settle turns timed apart
    (the turns right after an attach cost more: the first 1.45x a turn without one, the eighth 1.08x,
    then even; once per attach, not per turn), the garbage collected before them and the collector off
    for the settling and timed turns (a full collection, ~5 ms, landing in one block of eight moved that octet
    ~10%), then the subject stopped. The turns of every block of an octet read the same files in
    the same order (the turn's cost depends on what it reads: 55-69% of its turn-to-turn variation
    recurs at the same turn in another round), so the blocks differ only in the subject. A block's CPU
    is the agent thread's clock around its turns plus the probe thread's clock from their start until
    their events are all sent (a reader detaching is counted apart): per-thread clocks, not the process
    clock, which also took in the harness's own waiting for the reader. The figure is the median over
    octets of B / A, with a bootstrap 95% interval. Left out: attaching and detaching, the turns right
    after an attach, and the garbage collector's passes (on both sides). --pace S: every turn (the
    settling ones too) followed by S seconds of sleep, the model call of an agent that waits on its
    model, and every block started 1 s after its subject; else turns back to back. --rounds is the
    number of octets (--turns is not used here)."""
    import random

    seed = args.seed if args.seed is not None else random.randrange(1_000_000)
    flip = random.Random(seed).randrange(2)
    rt = Path(tempfile.mkdtemp(prefix="cpb-", dir="/tmp")) / "contextpipe"
    block = max(1, args.block)
    # Per octet and side: agent thread, probe thread until sent, wall inside the turns, turns, the
    # settling turns' agent thread.
    octets: list[tuple[list[float], list[float]]] = []
    detach: list[float] = []  # the probe thread while a reader detaches, per block
    spilled = 0  # blocks whose timed turns wrote history or journal to disk
    blocks: list[float] = []
    by_pos: list[list[float]] = [[] for _ in range(8)]
    for rnd in range(args.rounds):
        server, step, pipe = fresh_pipeline(args, rt, rnd)
        run_block(step, 0, args.warmup)
        turn = first = args.warmup
        sums = {"A": [0.0] * 5, "B": [0.0] * 5}
        order = ("ABBABAAB", "BAABABBA")[(rnd + flip) % 2]  # as many of each, the first at random
        for side in order:
            proc = start_subject(subject, server, rt) if side == "B" else None
            if args.pace:
                # A paced agent's turns right after an attach may still go by the I/O thread (the
                # snapshot's tail, and now and then ~1 s more before the straight path serves the
                # client): once per attach. Both sides wait as long.
                time.sleep(1.0)
            gc.collect()
            gc.disable()
            s0 = time.thread_time()
            for i in range(args.settle):
                step(turn + i, first + block + i)
                if args.pace:
                    time.sleep(args.pace)
            settle = time.thread_time() - s0
            turn += args.settle
            # The timed turns follow at once, as turns back to back do (a pause here would start the
            # agent's thread a new send window, engine.probe.agent_send: its first 16 calls a tenth of a
            # second are its to send, the rest the I/O thread's, and a short block would be mostly the
            # former); what the probe thread still had to send of the settling turns is charged to the
            # block, as what it leaves of the block's own would be in a longer run.
            io0, w0, agent, wall = thread_cpu(server), spills(pipe), 0.0, 0.0
            for i in range(block):
                p0, a0 = time.perf_counter(), time.thread_time()
                step(turn + i, first + i)  # the same files in every block of the octet
                agent += time.thread_time() - a0
                wall += time.perf_counter() - p0
                if args.pace:
                    time.sleep(args.pace)
            gc.enable()
            spilled += spills(pipe) != w0
            if proc is not None and subject in READERS:
                drain(server)  # the block's events all sent: the reader's per-turn cost ends here
            io = thread_cpu(server) - io0
            if proc is not None:
                stop_subject(subject, proc, server)
                detach.append(thread_cpu(server) - io0 - io)
            turn += block
            for k, x in enumerate((agent, io, wall, block, settle)):
                sums[side][k] += x
            blocks.append(agent + io)
        octets.append((sums["A"], sums["B"]))
        mean = statistics.fmean(blocks[-8:])
        for pos in range(8):  # each block against its octet's mean: what the order must cancel
            by_pos[pos].append(blocks[pos - 8] / mean)
        pipe.close()
    shutil.rmtree(rt.parent, ignore_errors=True)  # its sockets are gone; the recordings are not kept

    def ratio(f: Callable[[list[float]], float]) -> list[float]:
        return [f(b) / f(a) for a, b in octets]

    def interval(xs: list[float]) -> tuple[float, float]:
        boot = random.Random(0)
        meds = sorted(statistics.median(boot.choices(xs, k=len(xs))) for _ in range(2000))
        return meds[50], meds[1949]

    med = statistics.median
    cpu = ratio(lambda s: s[0] + s[1])
    lo, hi = interval(cpu)
    pooled = sum(b[0] + b[1] for _, b in octets) / sum(a[0] + a[1] for a, _ in octets)
    turn_us = med(a[0] / a[3] for a, _ in octets) * 1e6
    probe = [b[1] / b[3] for _, b in octets]
    after = med((b[4] - a[4]) / 4 for a, b in octets) * 1e6  # the settling turns, B less A, a block
    rec = " (recording)" if args.recording else ""
    pace = f"each turn followed by {args.pace:g} s of sleep" if args.pace else "turns back to back"
    print(
        f"{subject:8s}{rec}: turn {turn_us:.0f} us CPU | CPU ratio (agent + probe thread clocks) median "
        f"{med(cpu):.3f} [95% {lo:.3f}-{hi:.3f}], pooled {pooled:.3f} | agent thread "
        f"{med(ratio(lambda s: s[0])):.3f} | wall in the turns {med(ratio(lambda s: s[2])):.3f} | probe thread "
        f"{med(probe) * 1e6:.1f} us a turn, {med(p * a[3] / a[0] for p, (a, _) in zip(probe, octets, strict=True)) * 100:.2f}% of one"
    )
    print(
        f"  {len(octets)} octets of 8 x {block} turns (ABBABAAB and its mirror in turn, seed {seed}), {pace}; "
        f"{args.settle} turns before each block: {after:+.0f} us in all with the subject"
        + (f"; a reader's detaching {med(detach) * 1e6:.0f} us of the probe thread" if detach and subject in READERS else "")
        + (f"; {spilled} blocks wrote to disk in their timed turns" if spilled else "")
    )
    print(f"  CPU ratio by octet: {' '.join(f'{r:.3f}' for r in cpu)}")
    print(f"  a block's CPU by its place in the octet, against the octet's mean: {' '.join(f'{med(p):.3f}' for p in by_pos)}")
