"""bench_probe --profile, --floor, --ship-floor: where the probe thread's time goes on a turn, the elided
fill's per-turn work hot and cold, and the least a paced turn can pay to ship its trace."""

from __future__ import annotations

import argparse
import gc
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from probe_agents import REPO, attach_reader, drain, fresh_pipeline, run_block, stop_subject, thread_cpu


def profile(args: argparse.Namespace) -> None:
    """The probe thread on a realistic turn, part by part (see the module docstring)."""
    import engine.probe.elided_fill as elided_fill
    import engine.probe.queues as queues

    rt = Path(tempfile.mkdtemp(prefix="cpb-", dir="/tmp")) / "contextpipe"
    clock = time.thread_time_ns
    pair = statistics.median(
        [-(clock() - clock()) for _ in range(500)]  # one clock read, as the wrappers below make two
    )
    parts: dict[str, list[float]] = {}  # part -> [ns, calls] while encoding as usual
    real = queues.pack_payload_fast
    table: dict[str, bytes | None] = {}

    def stand_in(ev: dict[str, Any]) -> bytes | None:
        # The same bytes per kind as the real encoder (from its first event of that kind), no encoding;
        # a lean reader's batch frames by kind and number of events (about the same size).
        k = ev.get("k", "")
        if k == "batch":
            k = f"batch/{len(ev['events'])}"
        if k not in table:
            table[k] = real(ev)
        return table[k]

    def timed(obj: Any, name: str, key: str) -> None:
        f = getattr(obj, name)

        def wrapper(*a: Any, **kw: Any) -> Any:
            t0 = clock()
            try:
                return f(*a, **kw)
            finally:
                acc = parts.setdefault(key, [0, 0])
                acc[0] += clock() - t0 - pair
                acc[1] += 1

        setattr(obj, name, wrapper)

    # Per-turn steps that are module functions: the summaries and the encoder (the latter only while
    # encoding as usual; the stand-in's table look-ups are not timed).
    # (Each where its callers read it: the lean stream's fill in queues, the elided and fold streams' in
    # elided_fill.)
    summary_fns = (queues.summary_event, elided_fill.summary_event)
    timed(queues, "summary_event", "  summary_event")
    timed(elided_fill, "summary_event", "  summary_event")
    kept_fn = elided_fill.kept
    timed(elided_fill, "kept", "  kept (elided stream: which events go)")
    # A recording agent's turns, spliced whole into the elided stream's batches (engine.probe.splice).
    splice_fns = (elided_fill.batch_payload, elided_fill.payload_of)
    timed(elided_fill, "batch_payload", "  batch_payload (splicing)")
    timed(elided_fill, "payload_of", "  payload_of (a frame's payload)")

    class _Enc:
        pack = staticmethod(real)

    timed(_Enc, "pack", "  encoder (pack_payload_fast)")
    encoder = _Enc.pack
    per: dict[str, list[tuple[float, float]]] = {"encoding": [], "stand-in": []}
    turns_counted = 0
    for rnd in range(args.rounds):
        server, step, pipe = fresh_pipeline(args, rt, rnd)
        run_block(step, 0, args.warmup)
        reader = attach_reader(server, rt)
        for name in ("_drain_wake", "_service", "_fill", "_budget", "_rest", "_accept", "_on_readable"):
            timed(server, name, name)
        # The lean stream's steps inside _fill (each also inside _fill's figure).
        for name in ("_absorb", "_newest_turn", "_append_run", "_fill_fetch", "_fill_elided", "_fill_framed", "_emit"):
            timed(server, name, f"  {name}")
        assert server._sel is not None
        timed(server._sel, "select", "select (sleeping, waking)")
        for c in server._clients.values():
            sock = c.sock

            class Timed:  # the client's socket, its send() timed
                def __init__(self, inner: Any) -> None:
                    self._inner = inner

                def __getattr__(self, name: str) -> Any:
                    return getattr(self._inner, name)

            c.sock = Timed(sock)  # type: ignore[assignment]
            timed(c.sock, "send", "send")
        turn = args.warmup
        sums = {"encoding": [0.0, 0.0], "stand-in": [0.0, 0.0]}
        a, b = ("encoding", "stand-in") if rnd % 2 == 0 else ("stand-in", "encoding")
        for mode in (a, b, b, a):
            queues.pack_payload_fast = encoder if mode == "encoding" else stand_in  # type: ignore[assignment]
            drain(server)
            gc.collect()
            saved = {k: list(v) for k, v in parts.items()}
            io0, agent = thread_cpu(server), 0.0
            for t in range(turn, turn + args.turns):
                a0 = time.thread_time()
                step(t)
                agent += time.thread_time() - a0
                if args.pace:
                    time.sleep(args.pace)  # the agent waits on its model (--pace)
            drain(server)
            if args.pace:
                time.sleep(0.5)  # the burst's end (its last wait) belongs to this block
            sums[mode][0] += thread_cpu(server) - io0
            sums[mode][1] += agent
            if mode != "encoding":  # the part-by-part profile is of the real thing only
                parts.clear()
                parts.update(saved)
            else:
                turns_counted += args.turns
            turn += args.turns
        queues.pack_payload_fast = real
        stop_subject("reader", reader, server)
        pipe.close()
        for mode in sums:
            per[mode].append((sums[mode][0] / (2 * args.turns), sums[mode][1] / (2 * args.turns)))
    queues.summary_event, elided_fill.summary_event = summary_fns  # type: ignore[assignment]
    elided_fill.kept = kept_fn  # type: ignore[assignment]
    elided_fill.batch_payload, elided_fill.payload_of = splice_fns  # type: ignore[assignment]
    med = statistics.median
    enc = [x[0] for x in per["encoding"]]
    floor = [x[0] for x in per["stand-in"]]
    agent_turn = med(x[1] for x in per["encoding"])
    print(
        f"probe thread per turn (its clock; median of {args.rounds} rounds, {args.turns}x4 turns each, "
        f"agent thread {agent_turn * 1e6:.0f} us a turn):"
    )
    print(
        f"  encoding as usual {med(enc) * 1e6:.1f} us ({med(enc) / agent_turn * 100:.2f}% of a turn) "
        f"[{' '.join(f'{x * 1e6:.0f}' for x in enc)}]"
    )
    print(
        f"  stand-in encoder  {med(floor) * 1e6:.1f} us ({med(floor) / agent_turn * 100:.2f}%) "
        f"[{' '.join(f'{x * 1e6:.0f}' for x in floor)}]: the rest is msgpack-encoding"
    )
    print(f"parts, encoding as usual (each wrapped call's ~{pair / 1e3:.1f} us of clock reads subtracted):")
    for name, (ns, calls) in sorted(parts.items(), key=lambda kv: -kv[1][0]):
        print(
            f"  {name:28s} {ns / turns_counted / 1e3:6.2f} us/turn  {calls / turns_counted:6.3f} calls/turn  "
            f"{ns / max(calls, 1) / 1e3:8.1f} us/call"
        )
    print("  (_fill includes encoding; _service includes _fill and send; a pass is one _budget call)")
    shutil.rmtree(rt.parent, ignore_errors=True)


def floor(args: argparse.Namespace) -> None:
    """The elided stream's per-turn work, hot and cold (issue 15 item 4): a real Pipeline's published
    events (no probe client: they are collected as the Pipeline hands them to publish), then, --rounds
    times for each of 8 runs of --turns turns, the steps `_fill_elided` takes for one pass over them
    (which events go, the summaries, the batch encoding) timed on this thread's clock, once right after
    writing a 64 MB buffer (what the I/O thread meets: the agent has run ~--turns turns since it built
    the events) and once again at once (the same work in cache). The gap is the floor of touching the
    events cold, wherever that is done."""
    import engine.probe.queues as queues
    from engine.probe.elide import kept

    rt = Path(tempfile.mkdtemp(prefix="cpb-", dir="/tmp")) / "contextpipe"
    server, step, pipe = fresh_pipeline(args, rt, 0)
    for name in ("append", "append_deferred"):  # (the journal's lane would not call publish with nobody attached)
        vars(pipe.journal).pop(name, None)
    seen: list[dict[str, Any]] = []
    server.publish = lambda ev, frame=None: seen.append(ev)  # type: ignore[method-assign,assignment,misc]
    run_block(step, 0, args.warmup)
    seen.clear()
    run_block(step, args.warmup, 8 * args.turns)
    pipe.close()
    junk = bytearray(64 * 1024 * 1024)
    clock = time.thread_time_ns
    n = len(seen) // 8
    names = ("which events go (kept)", "summaries", "batch encoding")
    res: dict[tuple[str, str], list[float]] = {}

    def one_pass(evs: list[dict[str, Any]]) -> list[int]:
        t = [clock()]
        idx = kept(evs) or []
        out: list[Any] = [evs[i] for i in idx]
        t.append(clock())
        turns = [j for j, ev in enumerate(out) if ev.get("k") == "turn"]
        for j in turns[:-1]:
            out[j] = queues.summary_event(out[j])
        t.append(clock())
        queues.pack_payload_fast({"k": "batch", "events": out, "at": idx, "end": len(evs)})
        t.append(clock())
        return [b - a for a, b in zip(t[:-1], t[1:], strict=True)]

    for _ in range(args.rounds):
        for k in range(8):
            evs = seen[k * n : (k + 1) * n]
            junk[::64] = bytes(len(junk) // 64)  # evict the caches
            for state in ("cold", "hot"):
                for name, ns in zip(names, one_pass(evs), strict=True):
                    res.setdefault((name, state), []).append(ns / args.turns / 1e3)
    med = statistics.median
    print(f"the elided fill's per-turn work, us a turn (median of {8 * args.rounds} passes of {args.turns} turns):")
    for name in names:
        print(f"  {name:24s} cold {med(res[(name, 'cold')]):5.2f}  hot {med(res[(name, 'hot')]):5.2f}")
    cold = sum(med(res[(x, "cold")]) for x in names)
    hot = sum(med(res[(x, "hot")]) for x in names)
    print(f"  {'sum':24s} cold {cold:5.2f}  hot {hot:5.2f}")
    shutil.rmtree(rt.parent, ignore_errors=True)


def ship_floor(args: argparse.Namespace) -> None:
    """The least a paced Python turn can pay to ship its trace to another process (issue 15 item 4):
    the benchmark's paced Pipeline turn (the probe serving, no client, so the trace is built as when
    observed), each turn followed by --ship-floor seconds of sleep (a model call). Right after the
    turn's record_usage (where the real probe sends: the `turn` event is journaled there), one of these
    runs, on this thread's clock, in turn (each mode the same number of turns, over the same history):
    `empty` (the two clock reads alone: subtracted from the others), `flag` (one call that only tests
    an attribute), `encode` (msgpack of the journal's `turn` event: the trace), `copy` (those bytes,
    encoded just before and so in cache, copied into a sealed, populated memfd mapping with
    `mmap.write`, as the ring does), `whole` (the whole minimal path in one function: test a flag,
    encode the batch holding the turn, crc32 and header, write both into the mapping, publish the
    total). The turn (agent thread, no probe client) is the share's base. No probe code runs here
    beyond the Pipeline's hooks with no client: this is the floor below any probe design in Python."""
    import mmap as mmap_mod
    import struct
    import types
    import zlib

    from engine.probe.ring import RING_HEADER, WRITTEN_AT, RingWriter
    from engine.recording.frames import HEADER, pack_payload_fast

    ring_u64 = struct.Struct("<Q")

    rt = Path(tempfile.mkdtemp(prefix="cpb-", dir="/tmp")) / "contextpipe"
    modes = ("empty", "flag", "encode", "copy", "whole")
    res: dict[str, list[float]] = {m: [] for m in modes}
    turns: list[float] = []
    clock = time.thread_time
    for rnd in range(args.rounds):
        server, step, pipe = fresh_pipeline(args, rt, rnd)
        run_block(step, 0, args.warmup)
        ring = RingWriter()
        mm = ring._mm  # the same sealed, populated mapping the probe writes
        journal = pipe.journal
        holder = types.SimpleNamespace(on=False)

        def flag(holder: Any = holder) -> bool:
            return bool(holder.on)

        def whole(
            ev: dict[str, Any], pos: int, mm: mmap_mod.mmap = mm, ring: RingWriter = ring, holder: Any = holder
        ) -> None:
            if holder.on:
                return
            payload = pack_payload_fast({"k": "batch", "events": [ev], "at": [pos], "end": pos + 1})
            assert payload is not None
            header = HEADER.pack(len(payload), zlib.crc32(payload))
            if len(header) + len(payload) >= ring._room:  # a wrap: start the data again (rare)
                mm.seek(RING_HEADER)
                ring._room = ring.size
            mm.write(header)
            mm.write(payload)
            ring._room -= len(header) + len(payload)
            ring._written += len(header) + len(payload)
            ring_u64.pack_into(mm, WRITTEN_AT, ring._written)

        turn = args.warmup
        order = list(modes) if rnd % 2 == 0 else list(reversed(modes))
        for k in range(args.turns * len(modes)):
            mode = order[k % len(modes)]
            time.sleep(args.pace)
            a0 = clock()
            req = pipe.next_request()
            pipe.record_usage({"input_tokens": int(req.trace["final_tokens"]), "output_tokens": 80})
            ev = journal.events[-1]
            data = b""
            if mode == "copy":
                data = pack_payload_fast(ev) or b""
                if len(data) >= ring._room:
                    mm.seek(RING_HEADER)
                    ring._room = ring.size
            t0 = clock()
            if mode == "flag":
                flag()
            elif mode == "encode":
                pack_payload_fast(ev)
            elif mode == "copy":
                mm.write(data)
            elif mode == "whole":
                whole(ev, len(journal.events) - 1)
            t1 = clock()
            if mode == "copy":
                ring._room -= len(data)
            path = str(REPO / "engine" / "pipeline.py")
            calls = pipe.assistant("Reading.", [{"id": f"c{turn}", "name": "read_file", "arguments": json.dumps({"path": path})}])
            pipe.tool_result(calls[0].id, f"turn {turn}\n" + "x" * (args.result_kb * 1024))
            a1 = clock()
            res[mode].append(t1 - t0)
            if mode == "empty":
                turns.append(a1 - a0)
            turn += 1
        assert ev.get("k") == "turn", ev.get("k")
        size = len(pack_payload_fast(ev) or b"")
        ring.close()
        pipe.close()
    med = statistics.median
    empty = med(res["empty"])
    base = med(turns)
    print(
        f"the floor of shipping a paced turn's trace from Python ({args.rounds} rounds x {args.turns} turns a mode, "
        f"each after {args.pace:g} s of sleep; turn {base * 1e6:.0f} us on the agent's thread, no client; "
        f"trace event {size} bytes of msgpack):"
    )
    for mode in modes:
        xs = res[mode]
        m = med(xs)
        net = m - empty if mode != "empty" else m
        q = sorted(xs)
        print(
            f"  {mode:6s}: {m * 1e6:6.1f} us measured (p25 {q[len(q) // 4] * 1e6:5.1f}, p75 {q[3 * len(q) // 4] * 1e6:5.1f}), "
            f"{net * 1e6:6.1f} us{' less the clock reads' if mode != 'empty' else ' (the clock reads)'} "
            f"= {net / base * 100:5.2f}% of the turn"
        )
    shutil.rmtree(rt.parent, ignore_errors=True)
