"""bench_probe --flush-ab: a paced agent's events sent by its own thread against the I/O thread's (and the
other pairs of attached modes --flush-modes names), the agent's CPU with no client beside them."""

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

from probe_agents import (
    LINGER,
    attach_fold_reader,
    attach_reader,
    drain,
    fresh_pipeline,
    run_block,
    stop_subject,
    thread_cpu,
)
from probe_twins import bypass_append


def flush_ab(args: argparse.Namespace) -> None:
    """An agent that waits on its model between turns (issue 15 item 4), its events sent by its own
    thread at the end of each Pipeline call (`agent`, engine.probe.agent_send) against by the probe's I/O
    thread (`io`: the Pipeline's hold() made a no-op, so every publish wakes the thread as before), and
    the same agent with no client attached (`none`). One Pipeline per round, blocks none A B B A none
    (A and B swapped every other round); a reader (by default the live source on the fold stream, as
    `cp-inspect attach` reads; the quiet elided ring reader for the modes flush_reader says) attaches
    before an A or B block (its snapshot drained) and detaches after it. Per turn, from the
    thread clocks: the probe thread (the whole block, the sending after the last turn included), the
    agent's thread (its turns only: the sleeps are not counted), their sum, and that sum minus the agent's
    thread in the `none` blocks: what an attached inspector adds, as % of the turn."""
    rt = Path(tempfile.mkdtemp(prefix="cpb-", dir="/tmp")) / "contextpipe"
    a_mode, b_mode = args.flush_modes.split(",")
    modes = ("none", a_mode, b_mode)
    readers = {m: flush_reader(m, args.flush_reader) for m in (a_mode, b_mode)}
    per: dict[str, list[tuple[float, ...]]] = {m: [] for m in modes}
    for rnd in range(args.rounds):
        server, step, pipe = fresh_pipeline(args, rt, rnd)
        # The agent's thread clock inside the Pipeline's flushes: the probe's own part of the agent
        # thread, measured directly (the "added" figure below is a difference of two noisy totals).
        flush_cpu = [0.0]
        flush = server.flush

        def timed_flush(flush: Callable[[], None] = flush, flush_cpu: list[float] = flush_cpu) -> None:
            t0 = time.thread_time()
            flush()
            flush_cpu[0] += time.thread_time() - t0

        server.flush = timed_flush  # type: ignore[method-assign]
        # And inside publish() (a tree whose publish sends, see agent_send, does part of the work there).
        pub_cpu = [0.0]
        publish = server.publish
        inside = [0]  # (in the journal's lane, which calls publish(): timed once, by the lane's wrapper)

        def timed_publish(
            ev: Any,
            frame: Any = None,
            publish: Callable[..., None] = publish,
            pub_cpu: list[float] = pub_cpu,
            inside: list[int] = inside,
        ) -> None:
            if inside[0]:
                publish(ev, frame)
                return
            t0 = time.thread_time()
            publish(ev, frame)
            pub_cpu[0] += time.thread_time() - t0

        server.publish = timed_publish  # type: ignore[method-assign,assignment]
        # And the journal's lane to the probe (engine.probe.journal_lane, from probe51: it does publish()'s
        # part for a fold client's held event itself, and calls publish() for the rest), on the same count.
        # It appends to the journal's log first, which the `none` blocks' figure (the same wrapper, nobody
        # attached) takes off with the other wrappers' cost.
        for name in ("append", "append_deferred"):
            lane = vars(pipe.journal).get(name)
            if lane is None:
                continue

            def timed_lane(
                *a: Any, lane: Callable[..., None] = lane, pub_cpu: list[float] = pub_cpu, inside: list[int] = inside
            ) -> None:
                inside[0] += 1
                t0 = time.thread_time()
                try:
                    lane(*a)
                finally:
                    pub_cpu[0] += time.thread_time() - t0
                    inside[0] -= 1

            setattr(pipe.journal, name, timed_lane)
        # And hold() (a Pipeline call's start: in a tree that calls it, the probe's first touch after the
        # model call, outside flush()), on the same count.
        hold = server.hold

        def timed_hold(hold: Callable[[], None] = hold, pub_cpu: list[float] = pub_cpu) -> None:
            t0 = time.thread_time()
            hold()
            pub_cpu[0] += time.thread_time() - t0

        server.hold = timed_hold  # type: ignore[method-assign]
        run_block(step, 0, args.warmup)
        turn = args.warmup
        # probe thread, agent thread, passes, agent sends (flushes it completed), its send() calls, in
        # flush(), in publish()
        sums = {m: [0.0] * 7 for m in modes}
        pair = (a_mode, b_mode) if rnd % 2 == 0 else (b_mode, a_mode)
        for mode in ("none", pair[0], pair[1], pair[1], pair[0], "none"):
            tags = mode.split("-")
            wait = "block" if "block" in tags else "poll" if "poll" in tags else None
            # The inspector's live source on the fold stream (attach_fold_reader), as `cp-inspect attach`
            # reads since the thirtieth session (with --untraced the agent then builds no trace for it), or
            # the quiet elided ring reader (see flush_reader).
            fold = mode != "none" and readers[mode] == "fold"
            reader = (
                None
                if mode == "none"
                else attach_fold_reader(server)
                if fold
                else attach_reader(server, rt, wait=wait, loud="loud" in tags, socket_only="socket" in tags)
            )
            io_path = tags[0] == "io"
            if io_path:
                server.hold = lambda: None  # type: ignore[method-assign]
            general = "general" in tags and hasattr(server, "_ring_turn")
            if general:  # the general fill on the agent's thread, not the ring client's short path
                server._ring_turn = lambda c: False  # type: ignore[method-assign]
            # What a tree before probe12 did for a quiet ring client, one part at a time (see --flush-modes).
            winding = "winding" in tags and hasattr(server, "_ring_now")
            if winding or general:  # publish's straight path off: _send_now, _send_here, _ring_turn
                server._ring_now = lambda event, frame: False  # type: ignore[method-assign]
            # The turn handed to the I/O thread, encoded there (issue 15.4's idea): nothing is sent on
            # the agent's thread, so each event to send wakes the I/O thread, whose pass encodes it and
            # writes the ring. What it moves off the agent's thread shows in "probe thread".
            handoff = "handoff" in tags and hasattr(server, "_send_here")
            if handoff:
                server._ring_now = lambda event, frame: False  # type: ignore[method-assign]
                server._send_here = lambda: False  # type: ignore[method-assign]
            # The turns handed to the I/O thread's lingering burst (engine.probe.agent_send, "Lingering"):
            # nothing encoded or sent on the agent's thread.
            lingering = "linger" in tags and hasattr(server, "quiet_linger")
            linger = getattr(server, "quiet_linger", 0.0)
            if lingering:
                server.quiet_linger = LINGER
            # The straight path's turn handed to the probe's hand-off thread, woken by a lock's release
            # (engine.probe.handoff), not sent on the agent's thread.
            sender = "sender" in tags and hasattr(server, "handoff")
            if sender:
                server.handoff = True
                server._start_handoff()
            events = "events" in tags and hasattr(server, "_stand_in")
            if events:  # elided events wait in the queue themselves, not a stand-in each
                server._stand_in = None
            # A prototype of the agent's thread making no call into the probe for an event it holds back
            # (issue 15.4's "no per-event call"): while the fold client is named for the straight path, the
            # journal puts a held kind in the probe's queue itself (no Pipeline._publish, no publish(): no
            # held mark for the reader, no note of the model's or the tools' time). A benchmark's stand-in
            # only: what that design could save on the agent's thread, not a path the probe ships.
            bypass = "bypass" in tags
            kept = vars(pipe.journal).get("append")  # (the journal's lane, timed: put back after the block)
            if bypass:
                pipe.journal.append = bypass_append(pipe.journal, server)  # type: ignore[method-assign]
            bracketed = "bracketed" in tags and hasattr(server, "bracket")
            if bracketed:  # every Pipeline call calls hold() and flush(), quiet clients or not
                type(server).bracket = property(lambda s: True, lambda s, v: None)  # type: ignore[attr-defined,assignment]
            drain(server)
            time.sleep(0.5)  # let the last burst end, so the block starts with the loop asleep
            gc.collect()
            io0, w0, s0, agent = thread_cpu(server), server.wakeups, server.agent_sends, 0.0
            x0, f0, u0 = getattr(server, "agent_writes", 0), flush_cpu[0], pub_cpu[0]
            for t in range(turn, turn + args.turns):
                a0 = time.thread_time()
                step(t)
                agent += time.thread_time() - a0
                time.sleep(args.pace)
            drain(server)
            time.sleep(0.5)  # the burst's end (its last wait) belongs to this block
            acc = sums[mode]
            acc[0] += thread_cpu(server) - io0
            acc[1] += agent
            acc[2] += server.wakeups - w0
            acc[3] += server.agent_sends - s0
            acc[4] += getattr(server, "agent_writes", 0) - x0
            acc[5] += flush_cpu[0] - f0
            acc[6] += pub_cpu[0] - u0
            if io_path:
                server.hold = timed_hold  # type: ignore[method-assign]
            if general:
                del server._ring_turn  # type: ignore[method-assign]
            if winding or general or handoff:
                del server._ring_now  # type: ignore[method-assign]
            if handoff:
                del server._send_here  # type: ignore[method-assign]
            if lingering:
                server.quiet_linger = linger
            if sender:
                server.handoff = False
            if events:
                from engine.probe.elide import ELIDED_STAND_IN

                server._stand_in = ELIDED_STAND_IN
            if bypass:
                del pipe.journal.append  # type: ignore[method-assign]
                if kept is not None:
                    pipe.journal.append = kept  # type: ignore[method-assign]
            if bracketed:
                del type(server).bracket  # type: ignore[attr-defined]
                server.bracket = server._nclients > server._nquiet
            if reader is not None:
                stop_subject("foldreader" if fold else "reader", reader, server)
            turn += args.turns
        pipe.close()
        for mode in modes:
            per[mode].append(tuple(x / (2 * args.turns) for x in sums[mode]))  # type: ignore[arg-type]
    med = statistics.median
    base = [r[1] for r in per["none"]]
    hooks = [r[5] + r[6] for r in per["none"]]  # the timing wrappers and the probe's no-client hooks
    print(
        f"no client : agent thread {med(base) * 1e6:6.1f} us a turn [{' '.join(f'{x * 1e6:.0f}' for x in base)}], "
        f"in flush() {med(r[5] for r in per['none']) * 1e6:.1f} us, in publish() and hold() {med(r[6] for r in per['none']) * 1e6:.1f} us"
    )
    for mode in (a_mode, b_mode):
        rows = per[mode]
        added = [r[0] + r[1] - b for r, b in zip(rows, base, strict=True)]
        share = [a / b for a, b in zip(added, base, strict=True)]
        print(
            f"{mode:10s}: ({FLUSH_READERS[readers[mode]]}) probe thread {med(r[0] for r in rows) * 1e6:6.1f} us, "
            f"agent thread "
            f"{med(r[1] for r in rows) * 1e6:6.1f} us, sum {med(r[0] + r[1] for r in rows) * 1e6:6.1f} us a turn; "
            f"added {med(added) * 1e6:6.1f} us = {med(share) * 100:.2f}% of the turn "
            f"[{' '.join(f'{x * 100:.1f}' for x in share)}]; {med(r[2] for r in rows):.2f} passes, "
            f"{med(r[3] for r in rows):.2f} agent sends a turn ({med(r[4] for r in rows):.2f} send() calls); "
            f"in flush() {med(r[5] for r in rows) * 1e6:.1f} us a turn "
            f"({med(r[5] / b for r, b in zip(rows, base, strict=True)) * 100:.2f}%) "
            f"[{' '.join(f'{r[5] * 1e6:.0f}' for r in rows)}]"
        )
        probe_part = [r[5] + r[6] - h for r, h in zip(rows, hooks, strict=True)]
        print(
            f"{'':10s}  in publish() and hold() {med(r[6] for r in rows) * 1e6:.1f} us; all three less the "
            f"no-client blocks' (the timing wrappers) {med(probe_part) * 1e6:.1f} us a turn "
            f"({med(x / b for x, b in zip(probe_part, base, strict=True)) * 100:.2f}%) "
            f"[{' '.join(f'{x * 1e6:.0f}' for x in probe_part)}]"
        )
    rec = ", recording" if args.recording else ""
    traced = (
        "reads only each request's token count (--untraced)" if args.untraced else "reads each request's trace"
    )
    print(
        f"  ({args.rounds} rounds of 6 x {args.turns} turns{rec}, each turn followed by {args.pace:g} s of "
        f"sleep; the agent {traced})"
    )
    shutil.rmtree(rt.parent, ignore_errors=True)


# --flush-ab's readers, as its lines name them.
FLUSH_READERS = {
    "fold": "fold: the live source, as cp-inspect attach reads",
    "elide": "elide: the quiet elided ring reader, not cp-inspect attach's",
}


# Mode tags that only the elided ring reader has (how it waits, what it asks for) or that take apart the
# agent's paths to such a client (its short fill, publish's straight path to its ring, the elided stand-in,
# the quiet bracket, the hand-off of its sends): a mode with one of them reads the elided stream.
ELIDED_TAGS = frozenset(
    {"elide", "block", "poll", "loud", "socket", "general", "winding", "events", "bracketed", "handoff"}
)


def flush_reader(mode: str, default: str) -> str:
    """--flush-ab: which reader an attached mode attaches: `fold` (the live source on the fold stream,
    what cp-inspect attach reads) for a -fold mode, `elide` (the quiet elided ring reader)
    for a mode with an elided reader's tag (ELIDED_TAGS), else `default` (--flush-reader)."""
    tags = set(mode.split("-"))
    if "fold" in tags:
        return "fold"
    return "elide" if tags & ELIDED_TAGS else default
