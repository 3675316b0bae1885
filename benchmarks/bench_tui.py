"""Inspector (TUI) benchmarks, on real recordings through the real FileSource path.

  (a) what-if re-plan of one turn of pydicom-1413 (FileSource.replan with a budget override), p50/p95
      over ~50 budgets, beside json.dumps of the same request as a baseline;
  (b) the app's first frame for a 10,000-turn recording, with app.run_test() at 120x40: read as the
      first complete screen (the current turn, the footer's keys laid out: startup_child.complete) is
      written (App._display), as bench_startup.py --only replay reads it. Wall from App start (after the
      imports) and from process start (the parent's spawn), CPU since process start (time.process_time:
      start-up, every import, the reader thread). Not quite bench_startup's replay figure: this child
      builds the app itself (no console script, no `replay` command line) but imports this script's
      own modules (subprocess, tracemalloc, argparse, statistics ...): CPU p50 945 ms here against 884
      for startup_child.py, 5 runs alternating, load 3.4 (2026-12-05). The project is
      byte-compiled first, as bench_startup does (compile_tree: under PYTHONDONTWRITEBYTECODE every child
      compiled every module from source, ~150 ms of CPU). Until session 36 it read the CPU a frame after
      the first complete one (an after-refresh callback, polled for at 1 ms), by when the reader thread
      was decoding the next chunk: 1.19 s against bench_startup's ~0.93 s (1.01 s compiled);
  (c) peak RSS and tracemalloc peak of the inspector process for that recording;
  (d) per-step UI time: main-thread CPU of one Right key press until the screen is idle, minus the
      same for an unbound key (Pilot's own cost), at 120x40;
  (e) (b) for a recording whose writer was killed (no index footer: opening rebuilds the index by
      scanning frame headers), /tmp/tui/g10k.cpsession by default;
  (f) one step as a person meets it on pydicom-1413 (Right until the frame showing the new turn's
      content has been written), UI-thread CPU as the app records it itself (CONTEXTPIPE_STEP_TIMING,
      inspector/step_timing.py), at 120x40 and 200x60, with the Tools section shown and with History
      shown; a step that does not show its content within STEP_DEADLINE_S, or whose content worker
      fails, stops the run saying what was on screen;
  (g) the first what-if re-plan after opening a turn in the app, and the later ones;
      `--recording FILE` steps through that recording instead, from `--start` (a fraction of it);
      (g) takes `--recording` too, and `--provider` for what-ifs at another provider than the session's;
  (h) (f) from the real program: `cp-inspect replay` in a detached tmux session of each size, driven by
      `tmux send-keys Right`, read from the same records (not part of the default run: needs tmux).

The 10,000-turn recording is made once by driving engine.Pipeline with a synthetic agent loop
(record=...) and cached in the temp dir. From scratch that took 21 s of CPU on 2026-12-01 (engine at
8965843; about an hour before the engine's turn stopped growing with the history); a killed run, or
`--seed` (a shorter recording of the same generator), is resumed from its last turn, and the result is
identical to an uninterrupted run. Each part runs in a fresh process: `--only` picks one.

    .venv/bin/python benchmarks/bench_tui.py [--turns 10000] [--recording PATH] [--seed PATH]
                                             [--footerless PATH] [--only a|b|c|d|e|f|g|h]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

STARTED = time.time()  # (b) run by hand: wall from here (a parent passes its spawn time instead)
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

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
    pipe.journal.subscribe(lambda ev: rec.append(pack_event(ev)))
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


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


# ------------------------------------------------------------------------------------------ (a)


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


def bench_replan(n: int = 50) -> dict[str, float]:
    from engine.whatif import Overrides
    from inspector.sources.file import FileSource

    src = FileSource(pydicom_recording())
    traces = src.load_initial()
    turn = traces[-1]["turn"]
    src.replan(turn, Overrides(window=64000))  # warm: events loaded, tokenizer cache filled
    replan, dumps, replan_cpu, dumps_cpu = [], [], [], []
    for i in range(n):  # interleaved: each re-plan is followed by the baseline on the same request
        budget = 16000 + i * 2000
        c0, t0 = time.process_time(), time.perf_counter()
        src.replan(turn, Overrides(window=budget))
        replan.append(time.perf_counter() - t0)
        replan_cpu.append(time.process_time() - c0)
        body = src._built(turn).serialized.json()
        c0, t0 = time.process_time(), time.perf_counter()
        json.dumps(body)
        dumps.append(time.perf_counter() - t0)
        dumps_cpu.append(time.process_time() - c0)
    return {"turns": len(traces), "turn": turn, "replan_p50_ms": pct(replan, 50) * 1e3,
            "replan_p95_ms": pct(replan, 95) * 1e3, "dumps_p95_ms": pct(dumps, 95) * 1e3,
            "replan_cpu_p95_ms": pct(replan_cpu, 95) * 1e3, "dumps_cpu_p95_ms": pct(dumps_cpu, 95) * 1e3,
            "ratio": pct(replan, 95) / max(1e-9, pct(dumps, 95))}


# ------------------------------------------------------------------------------------------ (b)-(d)


async def _app_run(path: Path, steps: int, spawned_at: float) -> dict[str, float]:
    from startup_child import complete  # the first complete screen, as bench_startup's replay child reads it

    from inspector.app import InspectorApp
    from inspector.messages import TurnsReceived
    from inspector.sources.file import FileSource

    t0 = time.perf_counter()
    src = FileSource(path)  # a footer-less file (killed writer) rebuilds its index here
    opened = time.perf_counter() - t0
    app = InspectorApp(src)
    first: dict[str, float] = {}

    def hook(message: object) -> None:
        if isinstance(message, TurnsReceived) and "received" not in first:
            first["received"] = time.perf_counter() - t0

    # The first turns in hand: a recording's first chunk is read as the app mounts (SourceReader.start,
    # since session 37) and only the rest comes as TurnsReceived messages; an older tree's comes as one.
    start_reader = app.reader.start

    def started() -> Any:
        chunk = start_reader()
        if chunk is not None and "received" not in first:
            first["received"] = time.perf_counter() - t0
        return chunk

    app.reader.start = started  # type: ignore[method-assign]

    out: dict[str, float] = {"open_s": opened, "footer": float(src.reader.finished)}
    drawn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    display = app._display  # where a screen update goes to the terminal (headless: nowhere)

    def displayed(screen: Any, update: Any) -> None:
        display(screen, update)
        # Read in the same call as the first complete screen is written (as startup_child.py does): the
        # reader thread goes on to the next chunk once this frame is drawn, and a later read counted it.
        if update is not None and not drawn.done() and complete(app):
            out["first_frame_cpu_s"] = time.process_time()  # since process start (imports included)
            out["first_frame_s"] = time.perf_counter() - t0
            out["first_frame_from_spawn_s"] = time.time() - spawned_at
            drawn.set_result(None)

    app._display = displayed  # type: ignore[method-assign]
    async with app.run_test(size=(120, 40), message_hook=hook) as pilot:
        await drawn
        out["first_message_s"] = first.get("received", float("nan"))
        while len(app.timeline) < src.reader.turn_count:
            await pilot.pause(0.05)
        out["all_turns_s"] = time.perf_counter() - t0
        out["turns"] = len(app.timeline)
        if steps:
            await pilot.pause(0.5)
            await app.workers.wait_for_complete()
            app.action_first()
            await pilot.pause(0.3)
            cpu: dict[str, list[float]] = {"x": [], "right": []}
            for key in ("x", "right"):
                for _ in range(steps):
                    c = time.thread_time()
                    await pilot.press(key)
                    await pilot.pause()
                    cpu[key].append(time.thread_time() - c)
                    await pilot.pause(0.05)  # let the content worker finish outside the measurement
            base = statistics.median(cpu["x"])
            out["step_p50_ms"] = (statistics.median(cpu["right"]) - base) * 1e3
            out["step_p95_ms"] = (pct(cpu["right"], 95) - base) * 1e3
            out["pilot_ms"] = base * 1e3
        # what a person does next: look at the content of a late turn (the replayer folds the journal)
        t1 = time.perf_counter()
        await asyncio.to_thread(src.section_content, src.reader.turn_numbers()[-1], "history")
        out["content_last_turn_s"] = time.perf_counter() - t1
    return out


STEP_DEADLINE_S = 60.0  # wall time a step may take to show its content before the run fails (a loaded machine: ~1 s)


class ContentNotShown(RuntimeError):
    """The content view did not show what a step or an opened turn should show, by the deadline, or
    its worker failed: the benchmark stops and says what was on screen instead of waiting forever."""


class ContentWatch:
    """What the Content tab shows, against what it should show after a step: the selected section
    of the current turn under its title, with the text of that turn (the viewer's key is the section's
    content hash, set when the worker's document is shown), and no content worker still to come."""

    def __init__(self, app: Any) -> None:
        from panels.content_viewer import ContentViewer

        self.app = app
        self.viewer = app.query_one("#content", ContentViewer)
        self.errors: list[str] = []  # content workers that failed (they end silently otherwise)
        # Set when a content worker changes state or its content arrives: (f) waits on this instead of
        # polling (each Pilot poll costs UI CPU, and under load their number and cost varied so much
        # that subtracting them was the largest source of noise).
        self.changed = asyncio.Event()

    def hook(self, message: object) -> None:
        """A message_hook: records failed content workers (a failed worker leaves app.workers)."""
        from textual.worker import Worker, WorkerState

        from inspector.messages import ContentLoaded

        if isinstance(message, Worker.StateChanged) and message.worker.group == "content":
            self.changed.set()
            if message.state == WorkerState.ERROR:
                self.errors.append(f"{type(message.worker.error).__name__}: {message.worker.error}")
        elif isinstance(message, ContentLoaded):
            self.changed.set()

    def expected(self) -> tuple[str, tuple[str, str]]:
        from panels.manifest import ManifestPanel

        trace = self.app.full_trace(self.app.index)
        section = self.app.query_one("#manifest", ManifestPanel).selected_section()
        return self.app.content.section_title(trace, section)  # type: ignore[no-any-return]

    def shown(self, want: tuple[str, tuple[str, str]]) -> bool:
        from textual.worker import WorkerState

        if self.errors:
            raise ContentNotShown(f"the content worker failed: {self.errors[-1]}")
        return (self.viewer.title, self.viewer.key) == want and not any(
            w.group == "content" and w.state in (WorkerState.PENDING, WorkerState.RUNNING) for w in self.app.workers)

    def on_screen(self, want: tuple[str, tuple[str, str]]) -> bool:
        """The view shows it (the worker may still be preparing the next turn)."""
        if self.errors:
            raise ContentNotShown(f"the content worker failed: {self.errors[-1]}")
        return (self.viewer.title, self.viewer.key) == want

    def timeout(self, want: tuple[str, tuple[str, str]], waited: float) -> ContentNotShown:
        workers = [(w.group, w.state.name) for w in self.app.workers]
        return ContentNotShown(f"after {waited:.1f} s the content view shows {self.viewer.title!r} "
                               f"(key {self.viewer.key}), not {want[0]!r} (key {want[1]}); workers {workers}")


def _step_summary(records: list[dict[str, Any]]) -> dict[str, float]:
    """p50/p95 of the app's own per-step records (inspector/step_timing.py): UI-thread CPU and wall from
    the key to the frame showing the step's content, the step's first frame alone, and the frames' share."""
    steps = [r for r in records if r["key"] == "right" and r["index"] >= 0]
    settled = [r for r in steps if r["ended"] in ("frame", "content")]
    out: dict[str, float] = {"steps": float(len(steps)), "settled": float(len(settled)),
                             "prepared": float(sum(r["prepared"] for r in settled))}
    for name in ("cpu", "wall", "frame_cpu", "frame_wall", "render_cpu"):
        xs = [float(r[name]) for r in settled]
        out[f"{name}_p50_ms"], out[f"{name}_p95_ms"] = pct(xs, 50), pct(xs, 95)
    out["gc_per_step"] = statistics.mean(r["gc"] for r in settled) if settled else float("nan")
    return out


async def _step_run(
    path: Path, size: tuple[int, int], steps: int, section: int = 0, start: float = 0.0
) -> dict[str, float]:
    """(f) A step as a person meets it, on a real recording, timed by the app itself
    (CONTEXTPIPE_STEP_TIMING, inspector/step_timing.py): the UI thread's CPU from the moment the app
    starts handling the Right key until the frame showing the new turn's content has been written (the
    selected section of that turn: if the content worker had prepared it, the step's own frame; else the
    frame after the worker's message). The key is handed to the driver as a terminal's input thread does
    and the harness then waits idle on the app's record (no Pilot polling inside the span, so nothing of
    the harness is in the figure and nothing is subtracted). Between steps it waits until the content
    worker is done and 0.1 s more (a person's pace). A step that does not show its content within
    STEP_DEADLINE_S, or whose content worker fails, stops the run with what was shown. `start` is where
    the steps begin, as a fraction of the recording (a long one's fold costs more further in)."""
    from textual import events
    from textual.worker import WorkerState

    from inspector.app import InspectorApp
    from inspector.sources.file import FileSource
    from panels.manifest import ManifestPanel

    log = Path(tempfile.gettempdir()) / f"cp-bench-step-{os.getpid()}.jsonl"
    log.unlink(missing_ok=True)
    os.environ["CONTEXTPIPE_STEP_TIMING"] = str(log)
    try:
        app = InspectorApp(FileSource(path))
    finally:
        del os.environ["CONTEXTPIPE_STEP_TIMING"]
    assert app.step_timing is not None
    hooks: list[Any] = []

    def hook(message: object) -> None:
        for h in hooks:
            h(message)

    records: list[dict[str, Any]] = []
    recorded = asyncio.Event()

    def listen(line: dict[str, Any]) -> None:
        records.append(line)
        recorded.set()

    app.step_timing.listeners.append(listen)

    async with app.run_test(size=size, message_hook=hook) as pilot:
        while app.index < 0 or app.view.loading:
            await pilot.pause(0.05)
        await pilot.pause(0.5)
        first_index = min(app.timeline.last, int(start * (app.timeline.last + 1)))

        def rewind() -> None:
            app.go(app.timeline.go(first_index))

        rewind()
        await pilot.pause(0.3)
        watch = ContentWatch(app)
        hooks.append(watch.hook)
        # The section shown: row 0 is the first the app selects (tools: the same text every turn);
        # the history's text changes on every step, so its content is re-highlighted and re-laid out.
        manifest = app.query_one("#manifest", ManifestPanel)
        manifest.move_cursor(row=section if section >= 0 else manifest.row_count + section)
        await pilot.pause(0.5)
        shown_section = manifest.selected_section()

        async def content_idle() -> None:
            while any(w.group == "content" and w.state in (WorkerState.PENDING, WorkerState.RUNNING)
                      for w in app.workers):
                await asyncio.sleep(0.01)

        timed: list[dict[str, Any]] = []
        for _ in range(steps):
            if app.index >= app.timeline.last:
                rewind()
                await pilot.pause(0.3)
            await content_idle()
            await asyncio.sleep(0.1)
            recorded.clear()
            first = len(records)
            key = events.Key("right", None)
            key.set_sender(app)
            w = time.perf_counter()
            app._driver.send_message(key)  # type: ignore[union-attr]  # as the driver's input thread does
            while not any(r["key"] == "right" for r in records[first:]):
                left = STEP_DEADLINE_S - (time.perf_counter() - w)
                if left <= 0:
                    raise watch.timeout(watch.expected(), time.perf_counter() - w)
                try:
                    await asyncio.wait_for(recorded.wait(), left)
                except TimeoutError:
                    pass
                recorded.clear()
            record = next(r for r in records[first:] if r["key"] == "right")
            want = watch.expected()
            if record["ended"] not in ("frame", "content") or not watch.on_screen(want):
                await content_idle()
                if not watch.shown(want):
                    raise watch.timeout(want, time.perf_counter() - w)
                raise ContentNotShown(f"the step's record ended by {record['ended']!r}, not its content: {record}")
            timed.append(record)
        print(f"  (f) {size[0]}x{size[1]} {shown_section}: {len(timed)} steps", file=sys.stderr, flush=True)
        out = {"turns": float(len(app.timeline)), "w": float(size[0]), "h": float(size[1]), **_step_summary(timed)}
    log.unlink(missing_ok=True)
    return out


def complete_records(log: Path) -> list[dict[str, Any]]:
    """The records the app has finished writing to `log`: the app appends one JSON line per key and may
    be part way through one when this reads the file, so text after the last newline is left for the
    next read (parsing it failed a run now and then)."""
    try:
        data = log.read_bytes()  # bytes: a cut could fall inside a character too
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in data[: data.rfind(b"\n") + 1].splitlines() if line]


def _tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], check=True, capture_output=True, text=True).stdout


def tmux_step_run(rec: Path, size: tuple[int, int], steps: int, history: bool, pace: float = 0.25) -> dict[str, float]:
    """(h) The same figure from the real program: `cp-inspect replay` (python -m inspector.cli) in a
    detached tmux session of the given size with CONTEXTPIPE_STEP_TIMING set, driven by `tmux send-keys
    Right` at a person's pace, reading the app's own records. Unlike (f) this includes turning each frame
    into terminal output (the headless driver writes nothing) and the real input path."""
    log = Path(tempfile.gettempdir()) / f"cp-bench-step-tmux-{os.getpid()}.jsonl"
    log.unlink(missing_ok=True)
    name = f"cpstep{os.getpid()}"
    command = (f"cd {ROOT} && env CONTEXTPIPE_STEP_TIMING={log} PYTHONPATH={ROOT} "
               f"{sys.executable} -m inspector.cli replay --turn 0 {rec}")
    _tmux("new-session", "-d", "-s", name, "-x", str(size[0]), "-y", str(size[1]), command)
    try:
        deadline = time.perf_counter() + STEP_DEADLINE_S
        last, stable = "", 0
        while stable < 4:  # opened and quiet: the same screen four times 0.25 s apart
            if time.perf_counter() > deadline:
                raise ContentNotShown(f"the app did not settle in tmux: {last[-400:]!r}")
            time.sleep(0.25)
            screen = _tmux("capture-pane", "-p", "-t", name)
            stable = stable + 1 if screen == last and "REPLAY" in screen else 0
            last = screen
        if history:  # the last row of the manifest (PageDown: one page down, past its few rows)
            _tmux("send-keys", "-t", name, "PageDown")
            time.sleep(1.0)

        def lines() -> list[dict[str, Any]]:
            return complete_records(log)

        first = len(lines())
        for _ in range(steps):
            seen = len(lines())
            _tmux("send-keys", "-t", name, "Right")
            until = time.perf_counter() + STEP_DEADLINE_S
            while len(lines()) == seen and time.perf_counter() < until:  # the record is written at the key's end
                time.sleep(0.02)
            time.sleep(pace)
        _tmux("send-keys", "-t", name, "x")  # closes the last step's record if it is still open
        time.sleep(0.5)
        screen = _tmux("capture-pane", "-p", "-t", name)
        records = [r for r in lines()[first:] if r["key"] == "right"]
        _tmux("send-keys", "-t", name, "q")
        time.sleep(0.5)
    finally:
        subprocess.run(["tmux", "kill-session", "-t", name], capture_output=True)
    sections = sorted({str(r["section"]) for r in records})
    print(f"  (h) tmux {size[0]}x{size[1]} sections {sections}: {len(records)} steps; last screen's status: "
          f"{screen.splitlines()[0].strip() if screen else ''!r}", file=sys.stderr, flush=True)
    log.unlink(missing_ok=True)
    return {"w": float(size[0]), "h": float(size[1]), **_step_summary(records)}


def bench_steps_tmux(steps: int) -> dict[str, float]:
    rec = pydicom_recording()
    out: dict[str, float] = {}
    for size in ((120, 40), (200, 60)):
        for name, history in (("", False), ("history_", True)):
            for k, v in tmux_step_run(rec, size, steps, history).items():
                out[f"{name}{size[0]}x{size[1]}_{k}"] = v
    return out


async def _whatif_run(path: Path, turns: int, repeats: int, provider: str | None = None) -> dict[str, float]:
    """(g) What-if as a person meets it: step to a turn, wait until its content is shown (the app
    prepares that turn's fold state in the content worker while the person looks), then re-plan it
    under a new budget through the app's what-if runner, as the slider does. The first re-plan of each
    opened turn is timed apart from the later ones. Time = process CPU (the worker does the work) and
    wall, from the request to the ReplanFinished message being handled on the UI thread. The What-if tab
    is shown (`w`) first, as it is when the person moves its slider. `provider`: the
    re-plans at that provider (each opened turn's first one is the first at it there)."""
    from engine.whatif import Overrides
    from inspector.app import InspectorApp
    from inspector.messages import ReplanFinished
    from inspector.sources.file import FileSource

    done: list[float] = []
    finished = asyncio.Event()

    watch: ContentWatch | None = None

    def hook(message: object) -> None:
        if isinstance(message, ReplanFinished):
            done.append(time.perf_counter())
            finished.set()
        if watch is not None:
            watch.hook(message)

    app = InspectorApp(FileSource(path))
    first_cpu: list[float] = []
    first_wall: list[float] = []
    later_cpu: list[float] = []
    later_wall: list[float] = []
    async with app.run_test(size=(120, 40), message_hook=hook) as pilot:
        while app.index < 0 or app.view.loading:
            await pilot.pause(0.05)
        await pilot.pause(0.5)
        # The slider is on the What-if tab: the person shows it (`w`) before the first move, and the app
        # loads the tokenizer then (WhatIfRunner.warm), as it would for them.
        await pilot.press("w")
        watch = ContentWatch(app)
        stride = max(1, len(app.timeline) // (turns + 1))
        for k in range(turns):
            app.timeline.go(min(app.timeline.last, 1 + k * stride))
            app.index = app.timeline.current
            turn = app.timeline.traces[app.index]["turn"]
            # The title alone does not say the content worker is done (a section whose text did not
            # change is retitled at once): wait for the turn's text and the worker too, or its fold of
            # the turn runs into the re-plans timed below (process CPU) instead of before them.
            want, opened = watch.expected(), time.perf_counter()
            while not watch.shown(want):
                if time.perf_counter() - opened > STEP_DEADLINE_S:
                    raise watch.timeout(want, time.perf_counter() - opened)
                await pilot.pause(0.01)
            await pilot.pause(0.2)
            for r in range(repeats + 1):
                finished.clear()
                c, w = time.process_time(), time.perf_counter()
                app.whatif.replan(app.index, turn, Overrides(window=12_000 + 1_000 * (r + k), provider=provider))
                # Wait on the message, not by polling: Pilot's 1 ms polls cost UI CPU in proportion
                # to the wall time, so under load they inflated the process CPU timed here.
                await asyncio.wait_for(finished.wait(), 60)
                cpu, wall = time.process_time() - c, done[-1] - w
                (first_cpu if r == 0 else later_cpu).append(cpu)
                (first_wall if r == 0 else later_wall).append(wall)
    return {"turns": float(turns), "first_cpu_p50_ms": pct(first_cpu, 50) * 1e3,
            "first_cpu_max_ms": max(first_cpu) * 1e3, "first_wall_p50_ms": pct(first_wall, 50) * 1e3,
            "first_wall_max_ms": max(first_wall) * 1e3, "later_cpu_p95_ms": pct(later_cpu, 95) * 1e3,
            "later_wall_p95_ms": pct(later_wall, 95) * 1e3}


def bench_whatif(
    turns: int = 8, repeats: int = 10, recording: str | None = None, provider: str | None = None
) -> dict[str, float]:
    """(g) on pydicom-1413, or on `recording`; at the session's provider, or at `provider`."""
    rec = Path(recording) if recording else pydicom_recording()
    return asyncio.run(_whatif_run(rec, turns, repeats, provider))


def bench_steps(steps: int, recording: str | None = None, start: float = 0.0) -> dict[str, float]:
    """(f) on pydicom-1413, or on `recording` (a long one: `--recording FILE --start 0.5`)."""
    rec = Path(recording) if recording else pydicom_recording()
    out: dict[str, float] = {}
    for size in ((120, 40), (200, 60)):
        for name, row in (("", 0), ("history_", -1)):  # history is the last section in these turns
            r = asyncio.run(_step_run(rec, size, steps, row, start))
            for k, v in r.items():
                out[f"{name}{size[0]}x{size[1]}_{k}"] = v
    return out


def bench_app(path: Path, steps: int, trace_memory: bool, spawned_at: float) -> dict[str, float]:
    """RSS is only meaningful without tracemalloc (it adds its own bookkeeping): part (b) reports it."""
    if trace_memory:
        tracemalloc.start()
    out = asyncio.run(_app_run(path, steps, spawned_at))
    if trace_memory:
        current, peak = tracemalloc.get_traced_memory()
        out["tracemalloc_peak_mb"], out["tracemalloc_end_mb"] = peak / 1e6, current / 1e6
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def run_child(part: str, args: argparse.Namespace, recording: str | None = None) -> dict[str, float]:
    cmd = [sys.executable, __file__, "--only", part, "--turns", str(args.turns), "--json",
           "--steps", str(args.steps), "--spawned-at", repr(time.time())]
    if recording or args.recording:
        cmd += ["--recording", recording or args.recording]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    sys.stderr.write(done.stderr)  # progress, and why a part failed
    if done.returncode:
        raise SystemExit(f"part ({part}) failed (exit {done.returncode})")
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=10_000)
    ap.add_argument("--recording", default=None, help="use this recording instead of the generated one")
    ap.add_argument("--only", choices=["a", "b", "c", "d", "e", "f", "g", "h"], default=None)
    ap.add_argument("--seed", default=None,
                    help="a shorter (or killed) recording of this generator to resume from when making the long one")
    ap.add_argument("--footerless", default="/tmp/tui/g10k.cpsession",
                    help="(e): a recording whose writer was killed (no index footer); skipped if missing")
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--start", type=float, default=0.0,
                    help="(f): where the steps begin, a fraction of the recording (0 = its first turn)")
    ap.add_argument(
        "--provider", default=None, help="(g): re-plan at this provider (openai, bedrock, prefix, anthropic)"
    )
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--spawned-at", type=float, default=None,
                    help="(b): the parent's time.time() at spawn, for wall time from process start")
    args = ap.parse_args()
    if args.spawned_at is None and args.only in (None, "b", "c", "d", "e"):
        # As installed (and as bench_startup times it): the children import byte-compiled modules. Done
        # once, by the parent (or by a child run by hand), so no timed child imports bench_startup.
        from bench_startup import compile_tree

        compiling = time.time()
        compile_tree(ROOT)
        global STARTED
        STARTED += time.time() - compiling  # run by hand: the compile is not the app's start-up
    if args.only:
        if args.only == "a":
            res = bench_replan()
        elif args.only == "f":
            res = bench_steps(args.steps, args.recording, args.start)
        elif args.only == "g":
            res = bench_whatif(recording=args.recording, provider=args.provider)
        elif args.only == "h":
            res = bench_steps_tmux(args.steps)
        else:
            path = long_recording(args.turns, args.recording, args.seed)
            # Run by hand (no parent): wall from this script's start, not the process's (~30 ms later).
            spawned_at = args.spawned_at if args.spawned_at is not None else STARTED
            res = bench_app(path, args.steps if args.only == "d" else 0, args.only == "c", spawned_at)
        print(json.dumps(res))
        return
    path = long_recording(args.turns, args.recording, args.seed)  # made here, so no child pays for it
    args.recording = str(path)
    a, b, c, d, f, g = (run_child(p, args) for p in "abcdfg")
    e = run_child("b", args, args.footerless) if Path(args.footerless).exists() else None
    rows = [
        ("(a) what-if re-plan, pydicom-1413 last turn, p95", f"{a['replan_p95_ms']:.2f} ms", "< 50 ms",
         f"p50 {a['replan_p50_ms']:.2f} ms; CPU p95 {a['replan_cpu_p95_ms']:.2f} ms; json.dumps of the request "
         f"p95 {a['dumps_p95_ms']:.2f} ms (CPU {a['dumps_cpu_p95_ms']:.2f}; ratio {a['ratio']:.1f}x)"),
        (f"(b) first frame, {b['turns']:,}-turn recording", f"{b['first_frame_s']:.3f} s", "< 1 s",
         f"from App start; from process start: CPU {b['first_frame_cpu_s']:.3f} s, wall "
         f"{b['first_frame_from_spawn_s']:.3f} s (cf. bench_startup --only replay); first turns in hand {b['first_message_s']:.3f} s; all turns in {b['all_turns_s']:.3f} s"),
        ("(c) inspector memory, same recording", f"{b['peak_rss_mb']:.0f} MB RSS", "< 300 MB",
         f"peak RSS incl. opening the last turn's content; tracemalloc peak {c['tracemalloc_peak_mb']:.0f} MB"),
        ("(d) one step (Right), UI-thread CPU, 120x40", f"{d['step_p50_ms']:.1f} ms p50",
         "well < 50 ms", f"p95 {d['step_p95_ms']:.1f} ms; Pilot's own {d['pilot_ms']:.1f} ms subtracted"),
        ("(f) one step as a person meets it, UI CPU, 120x40 (app's own record, Pilot)", f"{f['120x40_cpu_p50_ms']:.1f} ms p50",
         "<= 16 ms p50, <= 33 ms p95", f"p95 {f['120x40_cpu_p95_ms']:.1f} ms; Right until the new turn's content is "
         f"shown; wall p50 {f['120x40_wall_p50_ms']:.0f} ms"),
        ("(f) the same at 200x60", f"{f['200x60_cpu_p50_ms']:.1f} ms p50", "<= 16 ms p50, <= 33 ms p95",
         f"p95 {f['200x60_cpu_p95_ms']:.1f} ms"),
        ("(f) with History shown (new text every step), 120x40", f"{f['history_120x40_cpu_p50_ms']:.1f} ms p50",
         "<= 16 ms p50, <= 33 ms p95", f"p95 {f['history_120x40_cpu_p95_ms']:.1f} ms"),
        ("(f) with History shown, 200x60", f"{f['history_200x60_cpu_p50_ms']:.1f} ms p50",
         "<= 16 ms p50, <= 33 ms p95", f"p95 {f['history_200x60_cpu_p95_ms']:.1f} ms"),
        ("(g) first what-if after opening a turn", f"{g['first_wall_p50_ms']:.0f} ms wall p50", "<= 50 ms",
         f"CPU p50 {g['first_cpu_p50_ms']:.1f} ms (max {g['first_cpu_max_ms']:.1f}); later re-plans CPU p95 "
         f"{g['later_cpu_p95_ms']:.1f} ms (< 10 ms), wall p95 {g['later_wall_p95_ms']:.0f} ms"),
        ("    content of the last turn (worker)", f"{b['content_last_turn_s'] * 1e3:.0f} ms", "",
         "first open: read the journal, fold it, build the turn"),
    ]
    if e is not None:
        rows.append((f"(e) open a footer-less {e['turns']:,}-turn recording", f"{e['first_frame_s']:.3f} s",
                     "< 1 s", f"index rebuilt by scanning in {e['open_s'] * 1e3:.0f} ms; all turns in "
                     f"{e['all_turns_s']:.3f} s; peak RSS {e['peak_rss_mb']:.0f} MB"))
    w = [max(len(r[i]) for r in rows) for i in range(4)]
    print(f"{'benchmark':<{w[0]}}  {'result':>{w[1]}}  {'target':<{w[2]}}  notes")
    for r in rows:
        print(f"{r[0]:<{w[0]}}  {r[1]:>{w[1]}}  {r[2]:<{w[2]}}  {r[3]}")


if __name__ == "__main__":
    main()
