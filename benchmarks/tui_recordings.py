"""The recordings bench_tui reads: the synthetic 10,000-turn one (made once through the real engine, resumed
where a killed run left it) and pydicom-1413 imported from the shared trajectories."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# The same place the tests read trajectories from (tests/conftest.py).
TRAJECTORIES = Path(os.environ.get("CONTEXTPIPE_TRAJECTORIES") or ROOT.parent / "shared" / "trajectories")
PYDICOM = TRAJECTORIES / "mini-swe-agent-pr816" / "deepseek_chat_dev__pydicom__pydicom-1413.traj.json"

GEN_VERSION = 2  # 2: the engine plans against calibrated estimates (7c45c7c): v1 files no longer verify


def _agent_turn(pipe: Any, sim: Any, fake: list[float], t: int) -> None:
    """One turn of the synthetic coding agent: request, priced usage, one tool call and its output."""
    from engine.sim.cachesim import Block, Call

    ser = pipe.next_request().serialized
    blocks = tuple(Block(b.sha, b.tokens, b.marker, "5m", b.segment) for b in ser.blocks)
    cc = sim.step(Call(blocks, fake[0], "claude-sonnet-4", output_tokens=50))
    pipe.record_usage({"input_tokens": cc.input_tokens, "output_tokens": 50,
                       "cache_read_tokens": cc.cache_read, "cache_write_tokens": cc.cache_write})
    calls = pipe.assistant(f"step {t}", [{"id": f"c{t}", "name": "read",
                                          "arguments": json.dumps({"path": f"f{t % 50}.py"})}])
    body = f"contents of f{t % 50}.py at turn {t}\n" + (f"line {t}\n" * (20 + t % 30))
    pipe.tool_result(calls[0].id, body)
    fake[0] += 5


def _resume_pipeline(tmp: Path, fake: list[float]) -> tuple[Any, Any, int]:
    """A Pipeline whose state is the fold of the partial recording `tmp`, appending to it from here on.

    The killed generator's file ends between turns (after a tool result) or mid-frame (cut off by
    RecordingWriter.resume). Folding it is the Replayer's fold (no re-planning); the previous request is
    rebuilt once so the next turn's cache-break attribution compares against it, and the cache
    simulator is warmed with it, as if the process had never stopped."""
    from engine.recording.cpsession import RecordingReader, RecordingWriter
    from engine.recording.journal import pack_event, unpack_event
    from engine.recording.replay import Replayer
    from engine.sim.cachesim import Block, CacheSimulator, Call

    with RecordingReader.open(tmp) as reader:
        events = [unpack_event(e) for e in reader.events()]
    requests = [i for i, e in enumerate(events) if e.get("k") == "request"]
    if not requests or not any(e.get("k") == "turn" and e["turn"] == events[requests[-1]]["turn"]
                               for e in events[requests[-1]:]):
        raise RuntimeError(f"{tmp}: cannot resume (no complete turn at the end)")
    replayer = Replayer(events)
    pipe = replayer.new_pipeline()
    last = requests[-1]
    for ev in events[:last]:
        pipe.fold(ev)
    pipe.begin_request(events[last]["turn"])
    built = pipe.build(events[last].get("bound", {}))
    for ev in events[last:]:
        pipe.fold(ev)
    for ev in events:
        if ev.get("k") == "blob":
            pipe.journal.blobs[ev["h"]] = ev["data"]
    pipe.go_live(built)
    fake[0] = float(events[last]["time"]) + 5
    pipe.clock = lambda: fake[0]
    sim = CacheSimulator("anthropic", "claude-sonnet-4")
    blocks = tuple(Block(b.sha, b.tokens, b.marker, "5m", b.segment) for b in built.serialized.blocks)
    sim.step(Call(blocks, fake[0] - 5, "claude-sonnet-4", output_tokens=50))
    rec = RecordingWriter.resume(tmp)
    pipe.recorder = rec

    def append(ev: dict[str, Any]) -> None:
        rec.append(pack_event(ev))

    pipe.journal.subscribe(append)
    return pipe, sim, pipe.turn


def make_long_recording(path: Path, turns: int, seed: Path | None = None) -> None:
    """A synthetic coding-agent loop through the real engine, recorded: one tool call per turn, tool
    outputs of varying size, usage from the provider cache simulator.

    The engine keeps the whole history; 10,000 turns took 21 s of CPU on 2026-12-01 (about an hour
    before the engine's turn cost stopped growing with the history). The work is never thrown away:
    the file is written as `<path>.partial`, and a partial left by a killed run (or `seed`, a shorter recording of this
    generator, copied) is resumed with RecordingWriter.resume from its last complete turn."""
    import shutil

    from engine.pipeline import Pipeline
    from engine.sim.cachesim import CacheSimulator

    fake = [1_767_225_600.0]
    tmp = path.with_suffix(".partial")
    if seed is not None and not tmp.exists():
        shutil.copyfile(seed, tmp)
    if tmp.exists():
        pipe, sim, start = _resume_pipeline(tmp, fake)
        print(f"  resuming {tmp} at turn {start}", file=sys.stderr, flush=True)
    else:
        pipe = Pipeline("claude-sonnet-4", "anthropic", 16000, record=tmp, clock=lambda: fake[0])
        pipe.identity("You are a synthetic benchmark agent.")
        pipe.goal("Walk a long session.")
        pipe.add_tool("read", "read a file", {"type": "object", "properties": {"path": {"type": "string"}}})
        pipe.user("Start.")
        sim, start = CacheSimulator("anthropic", "claude-sonnet-4"), 0
    for t in range(start, turns):
        _agent_turn(pipe, sim, fake, t)
        if t % 500 == 0:
            print(f"  generating: turn {t}/{turns}", file=sys.stderr, flush=True)
    pipe.close()
    tmp.rename(path)


def long_recording(turns: int, given: str | None, seed: str | None = None) -> Path:
    if given:
        return Path(given)
    path = Path(tempfile.gettempdir()) / f"cp-bench-tui-{turns}-v{GEN_VERSION}.cpsession"
    if not path.exists():
        print(f"making {path} ({turns} turns, once)…", file=sys.stderr)
        make_long_recording(path, turns, Path(seed) if seed else None)
    return path


def pydicom_recording() -> Path:
    """pydicom-1413 (93 model calls) imported from the shared trajectories, as a person would."""
    if not PYDICOM.exists():
        raise SystemExit(f"trajectory not found: {PYDICOM} (set CONTEXTPIPE_TRAJECTORIES)")
    rec = Path(tempfile.gettempdir()) / "cp-bench-tui-pydicom-1413.cpsession"
    # Imported afresh each time (the importer may have changed), into a private name then renamed:
    # `import` refuses an existing -o, and another benchmark process may be reading `rec` right now.
    part = rec.with_name(f"{rec.stem}.{os.getpid()}.partial")
    subprocess.run([sys.executable, "-m", "inspector.cli", "import", "auto", str(PYDICOM), "-o", str(part)],
                   check=True, capture_output=True, cwd=ROOT)
    os.replace(part, rec)
    return rec
