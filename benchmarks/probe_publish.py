"""bench_probe --publish-split, --publish-cost: the probe's part of a paced agent's thread, publish() by
event kind and straight-path piece; publish()'s own cost a turn."""

from __future__ import annotations

import argparse
import gc
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from probe_agents import attach_fold_reader, attach_reader, drain, fresh_pipeline, run_block, stop_subject


def publish_split(args: argparse.Namespace) -> None:
    """Where the probe's part of a paced agent's thread goes, piece by piece (see the module docstring).

    Per block, each publish() on the agent's thread clock by the event's kind; the `none` blocks' figures
    are the timing wrapper's and publish()'s no-client test (one attribute), so reader less none is what
    the attached reader makes each publish do. Inside the turn's straight path (`_ring_now`), the calls it
    makes are wrapped on a wall clock (the thread runs throughout; a vDSO read, ~0.1 us, where the
    thread clock is a system call): the ormsgpack encode (`pack_payload_fast`), the frame header
    (`HEADER.pack`), taking the waiting events (`_take_pending`) and the ring's write (`write_frame`);
    the rest of `_ring_now`'s own time is its checks, the pass lock and the bookkeeping."""
    import engine.probe.agent_send as agent_send
    import engine.probe.fold_send as fold_send
    from engine.probe.ring import RingWriter

    rt = Path(tempfile.mkdtemp(prefix="cpb-", dir="/tmp")) / "contextpipe"
    fold = args.split_reader == "fold"
    wall = time.perf_counter_ns
    pair = statistics.median([-(wall() - wall()) for _ in range(1000)])
    pieces: dict[str, list[float]] = {}  # piece -> ns of each call in the reader blocks' timed turns
    timing = [False]  # (not the turns that settle a block)

    def piece(key: str, f: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*a: Any, **kw: Any) -> Any:
            t0 = wall()
            try:
                return f(*a, **kw)
            finally:
                if timing[0]:
                    pieces.setdefault(key, []).append(wall() - t0 - pair)

        return wrapper

    class _Header:  # agent_send's HEADER with its pack() timed
        def __init__(self, inner: Any) -> None:
            self.pack = piece("header (HEADER.pack)", inner.pack)
            self.size = inner.size

    real = (agent_send.pack_payload_fast, agent_send.HEADER, RingWriter.write_frame)
    # --split-marks: the fold reader's blocks, one with every held event marked in its ring (`marks`:
    # mark_gap 0, as before probe38), one marked once a burst (`reader`), in turn by rounds.
    marks = bool(getattr(args, "split_marks", False))
    # --split-header: likewise, one with the straight path's frame headers made by HEADER.pack (`marks`:
    # header_struct, as before probe41), one as one int's bytes (its header piece then not wrapped: the
    # wrapper's call would fall on one side only).
    header = bool(getattr(args, "split_header", False))
    before = (
        ("the frame header by HEADER.pack (before)", "one int's bytes (now)")
        if header
        else ("every held event marked (mark_gap 0, before)", "once a burst (now)")
    )
    marks = marks or header
    kinds: dict[str, dict[str, list[float]]] = {"none": {}, "reader": {}, "marks": {}}  # mode -> kind -> [us a turn]
    agent: dict[str, list[float]] = {"none": [], "reader": [], "marks": []}
    for rnd in range(args.rounds):
        server, step, pipe = fresh_pipeline(args, rt, rnd)
        if args.split_sender:  # the turn handed to the hand-off thread (engine.probe.handoff)
            server.handoff = True
            server._start_handoff()
        cur: dict[str, float] = {}
        # publish() timed by kind: every event through it, as before probe51 (the journal's lane does a fold
        # client's held event's part itself, untimed here; --twin foldlane and --flush-ab time it).
        for name in ("append", "append_deferred"):
            vars(pipe.journal).pop(name, None)
        publish = server.publish

        def timed_publish(
            ev: Any, frame: Any = None, publish: Callable[..., None] = publish, cur: dict[str, float] = cur
        ) -> None:
            t0 = time.thread_time_ns()
            publish(ev, frame)
            k = ev.get("k", "?") if type(ev) is dict else "?"
            cur[k] = cur.get(k, 0.0) + time.thread_time_ns() - t0

        server.publish = timed_publish  # type: ignore[method-assign,assignment]
        run_block(step, 0, args.warmup)
        turn = args.warmup
        sums: dict[str, dict[str, float]] = {"none": {}, "reader": {}, "marks": {}}
        spent = {"none": 0.0, "reader": 0.0, "marks": 0.0}
        middle = (("marks", "reader") if rnd % 2 == 0 else ("reader", "marks")) if marks else ("reader", "reader")
        for mode in ("none", *middle, "none"):
            reader = None if mode == "none" else attach_fold_reader(server) if fold else attach_reader(server, rt)
            gap = server.mark_gap
            if mode == "marks" and header:
                server.header_struct = True
            elif mode == "marks":
                server.mark_gap = 0.0
            if reader is not None:
                agent_send.pack_payload_fast = piece("encode (pack_payload_fast)", real[0])  # type: ignore[assignment]
                if not header:  # (read by _ring_now, and by _fold_now in its own module)
                    agent_send.HEADER = fold_send.HEADER = _Header(real[1])  # type: ignore[assignment]
                RingWriter.write_frame = piece("ring write (write_frame)", real[2])  # type: ignore[method-assign]
                server._take_pending = piece("take (_take_pending)", server._take_pending)  # type: ignore[method-assign]
                server._ring_now = piece("_ring_now, all of it", server._ring_now)  # type: ignore[method-assign]
                server._fold_now = piece("_fold_now, all of it", server._fold_now)  # type: ignore[method-assign]
            for t in range(turn, turn + 2):  # the attach's after-effect and the wrappers' first calls
                step(t)
                time.sleep(args.pace)
            turn += 2
            fast = getattr(server, "_fold_pack", None)
            if reader is not None and fast is not None:  # (_fold_now's encoder, named for it by now)
                server._fold_pack = (piece("encode (ormsgpack packb)", fast[0]), fast[1])
            drain(server)
            gc.collect()
            cur.clear()
            timing[0] = True
            for t in range(turn, turn + args.turns):
                a0 = time.thread_time()
                step(t)
                spent[mode] += time.thread_time() - a0
                time.sleep(args.pace)
            timing[0] = False
            turn += args.turns
            for k, v in cur.items():
                sums[mode][k] = sums[mode].get(k, 0.0) + v
            server.mark_gap = gap
            server.header_struct = False
            if reader is not None:
                agent_send.pack_payload_fast, agent_send.HEADER, RingWriter.write_frame = real  # type: ignore[assignment, method-assign]
                fold_send.HEADER = real[1]
                del server._take_pending, server._ring_now, server._fold_now  # type: ignore[method-assign]
                if fast is not None:
                    server._fold_pack = fast
                stop_subject("foldreader" if fold else "reader", reader, server)
        pipe.close()
        for mode in sums:
            blocks = (1 if mode != "none" else 2) if marks else 2
            if mode == "marks" and not marks:
                continue
            agent[mode].append(spent[mode] / (blocks * args.turns))
            for k, v in sums[mode].items():
                kinds[mode].setdefault(k, []).append(v / (blocks * args.turns) / 1e3)
    med = statistics.median
    turn_us = med(agent["none"]) * 1e6
    print(
        f"publish() on the agent's thread a turn, by kind (us, thread clock; median of {args.rounds} rounds, "
        f"2 x {args.turns} turns each; agent turn {turn_us:.0f} us with no client, {med(agent['reader']) * 1e6:.0f} attached):"
    )
    names = sorted(set(kinds["reader"]) | set(kinds["none"]), key=lambda k: -med(kinds["reader"].get(k, [0.0])))
    tot_r = tot_n = 0.0
    for k in names:
        r, n = med(kinds["reader"].get(k, [0.0])), med(kinds["none"].get(k, [0.0]))
        tot_r, tot_n = tot_r + r, tot_n + n
        print(f"  {k:14s} reader {r:6.1f}  none {n:5.1f}  added {r - n:6.1f}")
    print(
        f"  {'all':14s} reader {tot_r:6.1f}  none {tot_n:5.1f}  added {tot_r - tot_n:6.1f} "
        f"({(tot_r - tot_n) / turn_us * 100:.2f}% of the turn)"
    )
    if marks:
        print(f"{before[0]} against {before[1]}, us a turn by kind:")
        tot_m = 0.0
        for k in names:
            m, r = med(kinds["marks"].get(k, [0.0])), med(kinds["reader"].get(k, [0.0]))
            tot_m += m
            print(f"  {k:14s} before {m:6.1f}  now {r:6.1f}  now - before {r - m:6.1f}")
        diffs = [
            sum(kinds["reader"][k][i] for k in kinds["reader"]) - sum(kinds["marks"][k][i] for k in kinds["marks"])
            for i in range(args.rounds)
        ]
        print(
            f"  {'all':14s} before {tot_m:6.1f}  now {tot_r:6.1f}  now - before {tot_r - tot_m:6.1f} "
            f"(by round: {' '.join(f'{d:+.1f}' for d in diffs)})"
        )
    counted = 2 * args.turns * args.rounds
    inner = 0.0
    straight = "_fold_now" if fold else "_ring_now"
    whole = med(pieces.get(f"{straight}, all of it", [0.0]))
    print(
        f"inside the straight path ({straight}), us a call, median (wall clock: a call the scheduler cut into "
        f"is the tail the median leaves out; {pair:.0f} ns of clock reads subtracted a call):"
    )
    for k, ns in sorted(pieces.items(), key=lambda kv: -med(kv[1])):
        if not k.startswith("_"):
            inner += med(ns)
        print(f"  {k:28s} {med(ns) / 1e3:6.1f}  ({len(ns) / counted:.2f} calls a turn)")
    print(f"  {'rest (checks, lock, bookkeeping)':28s} {(whole - inner) / 1e3:6.1f}")
    who = "the live source on the fold stream" if fold else "the quiet elided ring reader"
    print(f"  ({args.rounds} rounds, each turn followed by {args.pace:g} s of sleep; {who})")
    shutil.rmtree(rt.parent, ignore_errors=True)


def publish_cost_blocks(args: argparse.Namespace) -> None:
    """`ProbeServer.publish`'s own cost on the agent's thread, per turn of a real Pipeline, as an elided
    reader would have it: a lean client is counted but none is attached and the wake-up flag is held set,
    so the I/O thread sleeps throughout and nothing else runs while publish does (with a reader attached
    the I/O thread takes the GIL inside publish now and then, and a clock around it times that too).
    Each call is timed with perf_counter (one clock pair, measured, is subtracted per call); the queue is
    emptied between blocks. Compare trees by running each one's own script."""
    rt = Path(tempfile.mkdtemp(prefix="cpb-", dir="/tmp")) / "contextpipe"
    clock = time.perf_counter_ns
    pair = int(statistics.median([-(clock() - clock()) for _ in range(1000)]))
    per_turn: list[float] = []
    for rnd in range(args.rounds):
        server, step, pipe = fresh_pipeline(args, rt, rnd)
        for name in ("append", "append_deferred"):  # (publish() itself timed: see publish_split)
            vars(pipe.journal).pop(name, None)
        run_block(step, 0, args.warmup)
        real = server.publish
        spent = [0]

        def timed(
            ev: dict[str, Any], frame: bytes | None = None, real: Any = real, spent: list[int] = spent
        ) -> None:
            t0 = clock()
            real(ev, frame)
            spent[0] += clock() - t0 - pair

        server.publish = timed  # type: ignore[method-assign,assignment]
        server._nclients, server._nlean, server._wake_pending = 1, 1, True
        turn = args.warmup
        for _ in range(4):
            server._pending.clear()
            gc.collect()
            spent[0] = 0
            run_block(step, turn, args.turns)
            per_turn.append(spent[0] / args.turns)
            turn += args.turns
        server._nclients, server._nlean = 0, 0
        server._pending.clear()
        server.publish = real  # type: ignore[method-assign]
        pipe.close()
    print(
        f"publish() on the agent's thread: median {statistics.median(per_turn) / 1e3:.2f} us a turn "
        f"[{' '.join(f'{x / 1e3:.1f}' for x in per_turn)}] ({args.rounds} rounds of 4 x {args.turns} turns; "
        f"a clock pair of {pair} ns subtracted per call)"
    )
    shutil.rmtree(rt.parent, ignore_errors=True)
