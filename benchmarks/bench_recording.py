"""Benchmark for `.cpsession` recordings (engine/recording/cpsession.py).

Builds a 10,000-turn synthetic recording in a temp dir and measures, in this process:
  * open + jump to the last turn (with the index footer, and without it as after a SIGKILL),
  * one step (reading one turn by number),
  * the same against a naive JSONL of the same events (json.loads of every line, as a log reader would).

    .venv/bin/python benchmarks/bench_recording.py [--turns 10000] [--repeats 30]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.hashing import sha256_hex  # noqa: E402
from engine.recording.cpsession import TRAILER_SIZE, RecordingReader, RecordingWriter  # noqa: E402

SECTIONS = ["identity", "constraints", "goal", "tools", "memory", "history", "scratch", "task"]


def synthetic_events(turns: int) -> list[dict[str, Any]]:
    """What an engine emits per turn: repeated system/tool blobs (dedup'd), two new messages, usage, trace."""
    rng = random.Random(7)
    system = "You are a careful coding agent. " * 60
    tools = json.dumps(
        [{"name": f"tool_{i}", "schema": {"type": "object", "p": "x" * 200}} for i in range(12)]
    )
    out: list[dict[str, Any]] = []
    for t in range(turns):
        user = f"turn {t}: " + "".join(rng.choice("abcdefgh ") for _ in range(400))
        reply = f"reply {t}: " + "".join(rng.choice("ijklmnop ") for _ in range(600))
        for text in (system, tools, user, reply):
            out.append({"k": "blob", "h": sha256_hex(text), "data": text})
        out.append({"k": "message", "role": "user", "h": sha256_hex(user)})
        out.append({"k": "message", "role": "assistant", "h": sha256_hex(reply)})
        sections = [
            {"id": s, "name": s.title(), "kind": s, "scope": "session", "priority": "normal", "budget": 4000,
             "planned": 900 + i, "tokens": 900 + i, "form": "full", "omitted": 0, "sha256": sha256_hex(f"{s}{t}"),
             "changed": i == 5, "items": 3}
            for i, s in enumerate(SECTIONS)
        ]  # fmt: skip
        trace = {
            "turn": t, "model": "claude-sonnet-4", "provider": "anthropic", "limit": 200000, "usable": 190000,
            "pressure": {"raw": 0.41, "predictive": 0.47}, "tier": "Normal", "sections": sections,
            "actions": [], "skipped": [{"step": "spill", "reason": "gate spill is off", "tokens_saved": 0}],
            "markers": [{"index": 2, "section": "tools", "scope": "global", "offset_tokens": 3100}],
            "request_sha256": sha256_hex(f"req{t}"), "prefix_sha256": sha256_hex("prefix"),
            "usage": {"input_tokens": 9000, "output_tokens": 300, "cache_read_tokens": 8000, "cache_write_tokens": 0},
            "alerts": [], "latch_flips": [], "error": None,
        }  # fmt: skip
        out.append({"k": "usage", "turn": t, "input_tokens": 9000, "output_tokens": 300})
        out.append({"k": "turn", "turn": t, "trace": trace})
    return out


def timed(fn: Callable[[], object], repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1000)
    return out


def p95(xs: list[float]) -> float:
    return sorted(xs)[max(0, round(0.95 * len(xs)) - 1)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=10_000)
    ap.add_argument("--repeats", type=int, default=30)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-recording-"))
    try:
        events = synthetic_events(args.turns)
        rec, cut, jsonl = tmp / "s.cpsession", tmp / "killed.cpsession", tmp / "s.jsonl"

        t0 = time.perf_counter()
        with RecordingWriter(rec, {"model": "claude-sonnet-4", "provider": "anthropic"}) as w:
            for e in events:
                w.append(e)
        write_us = (time.perf_counter() - t0) * 1e6 / len(events)
        with open(jsonl, "w") as f:  # the baseline: every event as the engine emitted it, one JSON line each
            for e in events:
                f.write(json.dumps(e) + "\n")
        shutil.copy(rec, cut)
        with open(cut, "r+b") as fb:  # as after SIGKILL: no footer, so the index is rebuilt by scanning
            fb.truncate(rec.stat().st_size - TRAILER_SIZE)

        def open_last(path: Path) -> int:
            with RecordingReader.open(path) as r:
                assert r.turn(-1)["turn"] == args.turns - 1
                return r.bytes_read

        def jsonl_last() -> None:
            last = None
            with open(jsonl) as f:
                for line in f:
                    e = json.loads(line)
                    if e["k"] == "turn":
                        last = e
            assert last is not None and last["turn"] == args.turns - 1

        open_ms = timed(lambda: open_last(rec), args.repeats)
        scan_ms = timed(lambda: open_last(cut), max(3, args.repeats // 5))
        base_ms = timed(jsonl_last, max(3, args.repeats // 5))
        bytes_read = open_last(rec)

        # One step: the next turn, from a random place, as the inspector's timeline does.
        rng = random.Random(1)
        r = RecordingReader.open(rec)
        starts = [rng.randrange(args.turns - 1) for _ in range(1000)]
        step_ms = []
        for n in starts:
            t0 = time.perf_counter()
            r.turn(n + 1)
            step_ms.append((time.perf_counter() - t0) * 1000)
        r.close()
        # Best case for JSONL: line offsets already known (a full scan done), seek + json.loads one line.
        offsets, pos = [], 0
        with open(jsonl, "rb") as fr:
            for line in fr:
                if b'"k": "turn"' in line[:12]:
                    offsets.append(pos)
                pos += len(line)
        assert len(offsets) == args.turns
        base_step_ms = []
        with open(jsonl, "rb") as fr:
            for n in starts:
                t0 = time.perf_counter()
                fr.seek(offsets[n + 1])
                json.loads(fr.readline())
                base_step_ms.append((time.perf_counter() - t0) * 1000)

        size, jsize = rec.stat().st_size, jsonl.stat().st_size
        med = statistics.median
        print(f"recording: {args.turns} turns, {len(events)} events, {size / 1e6:.1f} MB "
              f"(naive JSONL of the same events {jsize / 1e6:.1f} MB, {jsize / size:.1f}x larger); "
              f"write {write_us:.1f} us/event")  # fmt: skip
        print(f"{'measure':<38}{'median ms':>11}{'p95 ms':>10}{'target':>10}")
        rows = [
            ("open + jump to last turn (footer)", open_ms, "< 1000"),
            ("open + jump, no footer (killed)", scan_ms, "< 1000"),
            ("step one turn", step_ms, "< 16"),
            ("baseline: JSONL loads to last turn", base_ms, ""),
            ("baseline: JSONL step (known offsets)", base_step_ms, ""),
        ]
        for name, xs, target in rows:
            print(f"{name:<38}{med(xs):>11.3f}{p95(xs):>10.3f}{target:>10}")
        print(f"open + jump reads {bytes_read / 1e3:.0f} kB of {size / 1e6:.1f} MB; "
              f"JSONL/cpsession ratio (median): open+jump {med(base_ms) / med(open_ms):.0f}x faster, "
              f"killed-file open {med(base_ms) / med(scan_ms):.1f}x faster, "
              f"step {med(step_ms) / med(base_step_ms):.2f}x the JSONL best case")  # fmt: skip
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
