"""bench_probe --twin: two Pipelines of one process, their turns taken in turn, the subject attached to one;
and the stand-ins its fold subjects put in the probe's place (floor_publish, bypass_append)."""

from __future__ import annotations

import argparse
import gc
import shutil
import signal
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from probe_agents import (
    LINGER,
    READERS,
    drain,
    fresh_pipeline,
    spills,
    start_subject,
    stop_subject,
    thread_cpu,
)

from engine.probe.server import ProbeServer


def twin(args: argparse.Namespace, subject: str) -> None:
    """What the subject adds to the agent process's CPU a turn, turn by turn: two identical Pipelines in
    this process (twins), the subject attached to one of them for the whole round, their turns taken in
    turn (A B B A ...; A the twin without the subject, B the one with it), each followed by --pace
    seconds of sleep, the same file read by both turns of a pair. `none` as the subject is the A/A.

    Why (the octets of --paired read A/A 0.92-1.04 at 8 octets, wider than the 2% they were to show):
    a paced turn's CPU varies by 14-20% from one turn to the next (it runs cold after the sleep, and
    whatever else the machine runs decides how cold), and by ~0.2-0.4 correlation from one turn to the
    next (load comes and goes); a block design compares turns seconds apart, with an attach (and 1 s of
    waiting) between them, so a run spends most of its time not measuring. Here the two turns of a pair
    are ~pace apart, no attach falls between them, and every turn is measured. The subject is attached
    once a round and --settle paced pairs run before the timed ones (a turn right after an attach costs
    more). Which twin gets the subject alternates by round, so neither twin's own layout is the subject's.

    A turn's CPU is the agent thread's clock around it plus its twin's probe I/O thread clock over the
    turn and the sleep after it (so what the I/O thread does between turns is charged to its twin); a
    pair in which either turn wrote history or journal to disk (a round ends before the first such
    write, ~turn 300) is left out, as are the garbage collector's passes (collected before the timed
    pairs and off through them). The reader's own process runs through both twins' turns: what it does
    to the machine (its polls, ~0.25% of a core) falls on A and B alike, and this design does not
    show it (--paired's `mute` against `reader` did not tell them apart either).

    Figures: the added CPU a turn as the median of the pairs' differences B - A (a fixed cost added to
    every turn shifts B's distribution by that much, and the difference of two turns' noise is
    symmetric, so its median is that shift while a noisy turn moves it little) with a bootstrap 95%
    interval, and as a ratio to the median A turn; beside it the ratio of the sums, B / A (the mean
    cost; outliers move it), with its interval."""
    import random

    seed = args.seed if args.seed is not None else random.randrange(1_000_000)
    rng = random.Random(seed)
    rt = Path(tempfile.mkdtemp(prefix="cpb-", dir="/tmp")) / "contextpipe"
    pace = args.pace
    model_wait = args.model_wait
    # Per timed pair: (A's CPU, B's CPU, B's probe thread).
    pairs: list[tuple[float, float, float]] = []
    appends: dict[bool, list[float]] = {False: [], True: []}  # foldbypass: in the journal's appends a turn
    spilled = 0
    # Per twin, over the rounds: the sends on the agent's thread, and the closes it held back.
    sends = {"A": [0, 0], "B": [0, 0]}
    for rnd in range(args.rounds):
        # recordcost: no reader; B records (its Pipeline's record=), A does not: what writing the recording's
        # format costs an agent's turn (a spool an inspector could follow, as it follows a recording).
        recording = [args.recording, args.recording]
        if subject == "recordcost":
            recording[(rnd + seed) % 2 == 0] = True  # (the twin that will be B)
        twins = [
            fresh_pipeline(argparse.Namespace(**{**vars(args), "recording": recording[i]}), rt, 2 * rnd + i)
            for i in range(2)
        ]
        for t in range(args.warmup):
            for _, step, _ in twins:
                step(t)
        a, b = twins if (rnd + seed) % 2 == 0 else twins[::-1]
        # foldpath: the fold reader on both twins, A's turns sent by the general path (fold_straight off,
        # as before fold31), B's by publish()'s straight path: B - A is what that path saves a turn.
        # foldcoalesce: likewise, A's every turn sent at its close (fold_coalesce 0, as before fold34), B's
        # closes within FOLD_COALESCE of the last send held for the next (agent_send.FOLD_COALESCE).
        proc_a = None
        # foldmarks: likewise, A's every held event marked in its ring (mark_gap 0, as before probe38),
        # B's marked once a burst (ring.MARK_GAP).
        # foldview: likewise, A's ring header (held marks, written total) stored by struct.pack_into (as
        # before probe40), B's through the ring's u64 views (RingWriter.held_q, written_q).
        # foldbypass: likewise, B's journal putting each held kind in the probe's queue itself (no call into
        # the probe for it, no held mark, no note of the model's time: bypass_append, a prototype).
        # foldlane: likewise, A's journal handing each event on through its subscriber (Journal.append,
        # Sinks._publish, publish: as before probe51), B's through the journal's lane (engine.probe.journal_lane).
        ab = subject in (
            "foldpath", "foldcoalesce", "foldlinger", "foldsender", "foldmarks", "foldview", "foldbypass", "foldappends",
            "foldlane", "foldunlooked",
        )
        # foldfloor: the fold reader on B alone (as foldreader), B's publish() the floor of the agent's thread
        # sending it (see floor_publish): the least any restructuring of today's send could add.
        reader_of = "foldreader" if ab or subject == "foldfloor" else "none" if subject == "recordcost" else subject
        # followvsfold: both twins record; A's inspector the fold reader (today's), B's the recording
        # follower (open_live): B - A is what following the recording saves the agent a turn.
        if subject == "followvsfold":
            proc_a, reader_of = start_subject("foldreader", a[0], rt), "followreader"
        if subject == "foldpath":
            a[0].fold_straight = False
        if subject == "foldcoalesce":
            a[0].fold_coalesce = 0.0
        if subject == "foldmarks":
            a[0].mark_gap = 0.0
        if subject == "foldsender":  # A's turns sent on the agent's thread, B's by the hand-off thread
            b[0].handoff = True
            b[0]._start_handoff()
        if subject == "foldlinger":  # A's turns sent on the agent's thread, B's by the I/O thread's burst
            b[0].quiet_linger = LINGER
        if ab:
            proc_a = start_subject("foldreader", a[0], rt)
        proc = start_subject(reader_of, b[0], rt)
        if pace:
            time.sleep(1.0)  # past the attach's after-effect on the I/O thread (see paired())
        if subject == "foldview":
            deadline = time.monotonic() + 10
            while not a[0]._held_rings:
                assert time.monotonic() < deadline, "A's fold reader never got its ring"
                time.sleep(0.01)
            for ring in a[0]._held_rings:
                ring.held_q = ring.written_q = None  # (the views released as dropped: the mapping can close)
        if subject == "foldfloor":
            b[0].publish = floor_publish(b[0])  # type: ignore[method-assign]
        # The agent's thread clock inside each twin's journal appends, the turn's close (which
        # Journal.append_deferred hands on) included: every call into the probe from the turn, so a cold
        # first touch that moves from a held event's publish to the close's is counted either way, and far
        # less noisy than the turn's whole (the same timing wrappers on both twins).
        in_appends = {id(a): [0], id(b): [0]}
        if subject == "foldunlooked":
            # A prototype of a reader that says it is not looking (paused, or on an older turn): B's closes
            # held back like the rest of the turn, so B sends nothing until DEFER_EVENTS wait (or the
            # reader asks: it sees them marked held). Not a path the probe ships.
            from engine.probe.fold_send import _CLOSE

            b[0]._defer_kinds = b[0]._fold_defer = b[0]._defer_kinds | _CLOSE
        if subject == "foldlane":
            for attr in ("append", "append_deferred"):
                a[2].journal.__dict__.pop(attr)  # (A: the journal's own methods, its subscriber called)
        if subject in ("foldbypass", "foldappends", "foldlane", "foldunlooked"):  # (foldappends: both today's, the A/A of that clock)
            bypass = bypass_append(b[2].journal, b[0]) if subject == "foldbypass" else b[2].journal.append
            for side, append in ((a, a[2].journal.append), (b, bypass)):
                j = side[2].journal
                j.append = timed_append(append, in_appends[id(side)])  # type: ignore[method-assign]
                j.append_deferred = timed_append(j.append_deferred, in_appends[id(side)])  # type: ignore[method-assign]
        gc.collect()
        gc.disable()
        turn = args.warmup
        for i in range(args.settle):
            for _, step, _ in (a, b):
                step(turn + i, i, model_wait)
                if pace:
                    time.sleep(pace)
        turn += args.settle
        flip = rng.randrange(2)
        for k in range(args.pairs):
            cost = {}
            for side in ((a, b), (b, a))[(k % 4 in (0, 3)) ^ flip]:  # A B B A, or its mirror, by pairs
                server, step, pipe = side
                w0, io0 = spills(pipe), thread_cpu(server)
                box = in_appends[id(side)]
                j0 = box[0]
                c0 = time.thread_time()
                step(turn + k, k, model_wait)
                agent = time.thread_time() - c0
                appends[side is b].append((box[0] - j0) / 1e9)
                if pace:
                    time.sleep(pace)
                io = thread_cpu(server) - io0
                cost[side is b] = (agent + io, io, spills(pipe) != w0)
            if cost[False][2] or cost[True][2]:
                spilled += 1
                continue
            pairs.append((cost[False][0], cost[True][0], cost[True][1]))
        gc.enable()
        for side, p in ((a, proc_a), (b, proc)):
            if p is None:
                continue
            side[2].journal.__dict__.pop("append_deferred", None)
            bypassed = side[2].journal.__dict__.pop("append", None) is not None  # (foldbypass's)
            if side[0].__dict__.pop("publish", None) is not None or bypassed:  # (the real one for the drain)
                side[0]._send_now()  # (what it held back: it marks nothing held for the reader to ask for)
            reader = "foldreader" if p is proc_a else reader_of  # (A's is a fold reader where it has one)
            if reader == "foldmute":
                # Running again before the drain: the agent's last turns may be held for a send that
                # never comes (engine.probe.agent_send.FOLD_COALESCE) until the reader asks for them.
                p.send_signal(signal.SIGCONT)
            if reader in READERS:
                drain(side[0])
            stop_subject(reader, p, side[0])
        for side, name in ((a, "A"), (b, "B")):
            sends[name][0] += side[0].agent_sends
            sends[name][1] += getattr(side[0], "fold_closes_held", 0)
        for _, _, pipe in twins:
            pipe.close()
    shutil.rmtree(rt.parent, ignore_errors=True)

    med = statistics.median
    boot = random.Random(0)
    n = len(pairs)

    def interval(f: Callable[[list[tuple[float, float, float]]], float]) -> tuple[float, float]:
        xs = sorted(f(boot.choices(pairs, k=n)) for _ in range(2000))
        return xs[50], xs[1949]

    def added(ps: list[tuple[float, float, float]]) -> float:
        return med(b - a for a, b, _ in ps)

    def summed(ps: list[tuple[float, float, float]]) -> float:
        return sum(b for _, b, _ in ps) / sum(a for a, _, _ in ps)

    turn_a = med(a for a, _, _ in pairs)
    d, (dlo, dhi) = added(pairs), interval(added)
    r, (rlo, rhi) = summed(pairs), interval(summed)
    rec = " (recording)" if args.recording else ""
    how = f"each turn followed by {pace:g} s of sleep" if pace else "turns back to back"
    if model_wait:
        how += f", {model_wait:g} s between its request and its usage"
    print(
        f"{subject:8s}{rec}: turn {turn_a * 1e6:.0f} us CPU (median A) | added {d * 1e6:+.1f} us a turn "
        f"[95% {dlo * 1e6:+.1f} to {dhi * 1e6:+.1f}] = ratio {1 + d / turn_a:.3f} [{1 + dlo / turn_a:.3f}-"
        f"{1 + dhi / turn_a:.3f}] | ratio of sums {r:.3f} [95% {rlo:.3f}-{rhi:.3f}] | probe thread "
        f"{statistics.fmean(p for _, _, p in pairs) * 1e6:.1f} us a turn"
    )
    print(
        f"  {n} pairs of turns ({args.rounds} rounds of {args.pairs} after {args.warmup} + {args.settle}; seed {seed}), "
        f"{how}" + (f"; {spilled} pairs left out (a turn wrote to disk)" if spilled else "")
    )
    if subject in ("foldbypass", "foldappends", "foldlane", "foldunlooked"):
        # (every timed turn, the pairs a spill left out included: the appends are not what spilled)
        diffs = [y - x for x, y in zip(appends[False], appends[True], strict=True)]
        print(
            f"  in the journal's appends (the agent's thread, every event and the close): A "
            f"{med(appends[False]) * 1e6:.1f} us a turn, B {med(appends[True]) * 1e6:.1f}; B - A median "
            f"{med(diffs) * 1e6:+.1f} us over {len(diffs)} turns each"
        )
    print(
        "  sends on the agent's thread (closes held back): "
        + ", ".join(f"{k} {v[0]} ({v[1]})" for k, v in sends.items())
        + " over all turns of the rounds, warm-up and settling included"
    )


def floor_publish(server: ProbeServer) -> Callable[..., None]:
    """`--twin foldfloor`'s publish() for B: the least the agent's thread can do to send a fold client one
    batch a turn from publish(), for a benchmark only. While the fold client is named for the straight path
    (agent_send._ring_candidate), an event of a kind held back is appended to the queue and nothing else
    (no held mark for the reader, no note of the model's or the tools' time); a turn's close within
    fold_coalesce of the last send is held back likewise (agent_send.FOLD_COALESCE: the only clock read),
    and any other close makes the batch of everything waiting and writes it into the ring, with none of
    `_fold_now`'s checks and no pass lock (safe only while nothing else runs the probe: in this benchmark
    the I/O thread sleeps through the timed turns). Anything else, or with the client not named, goes to
    the real publish()."""
    from engine.probe.fold_send import _CLOSE

    general = ProbeServer.publish
    pending = server._pending
    sent_at = [0.0]

    def publish(event: Any, frame: bytes | None = None) -> None:
        c = server._ring_one
        if c is None or not c.fold or frame is not None or type(event) is not dict:
            return general(server, event, frame)
        kind = event.get("k")
        if kind in server._defer_kinds:
            pending.append(event)
            return
        fast = server._fold_pack
        if kind not in _CLOSE or fast is None or c.ring is None:
            return general(server, event, frame)
        pending.append(event)
        now = time.monotonic()
        if now - sent_at[0] < server.fold_coalesce:
            return
        sent_at[0] = now
        evs = list(pending)
        n = len(evs)
        jpos = c.jpos
        end = jpos + n
        batch = {"k": "batch", "events": evs, "at": list(range(jpos, end)), "end": end}
        payload = fast[0](batch, option=fast[1])
        pending.clear()
        server._head += n
        c.cursor = server._head
        c.jpos = end
        c.sent_events += n
        server.agent_sends += 1
        c.ring.write_frame((len(payload) << 32).to_bytes(8, "big"), payload)

    return publish


def bypass_append(journal: Any, server: ProbeServer) -> Callable[[dict[str, Any]], None]:
    """--flush-ab's `bypass` tag: Journal.append with a held kind put straight into the probe's queue
    while the fold client is named for the straight path (see flush_ab); anything else as Journal.append."""
    from engine.probe.agent_limits import DEFER_EVENTS

    log_append = journal.events.append
    sinks = journal._sinks
    pending = server._pending

    def append(event: dict[str, Any]) -> None:
        log_append(event)
        c = server._ring_one
        if c is not None and c.fold and event.get("k") in server._defer_kinds and len(pending) < DEFER_EVENTS:
            pending.append(event)
            return
        for sink in sinks:
            try:
                sink(event)
            except Exception:
                journal.sink_errors += 1

    return append


def timed_append(append: Callable[..., None], box: list[int]) -> Callable[..., None]:
    """`append` with the agent's thread clock inside it added to box[0] (ns; --twin foldbypass)."""
    clock = time.thread_time_ns

    def timed(*args: Any) -> None:
        t0 = clock()
        append(*args)
        box[0] += clock() - t0

    return timed
