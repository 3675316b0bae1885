"""bench_tui (f) and (h): one step as a person meets it (Right until the new turn's content is written), the
UI thread's CPU from the app's own step records, in Pilot (f) or in the real program under tmux (h)."""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


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


def bench_steps_tmux(steps: int, rec: Path) -> dict[str, float]:
    """(h) on `rec` (bench_tui: pydicom-1413)."""
    out: dict[str, float] = {}
    for size in ((120, 40), (200, 60)):
        for name, history in (("", False), ("history_", True)):
            for k, v in tmux_step_run(rec, size, steps, history).items():
                out[f"{name}{size[0]}x{size[1]}_{k}"] = v
    return out


def bench_steps(steps: int, rec: Path, start: float = 0.0) -> dict[str, float]:
    """(f) on `rec` (bench_tui: pydicom-1413, or `--recording FILE`, a long one with `--start 0.5`)."""
    out: dict[str, float] = {}
    for size in ((120, 40), (200, 60)):
        for name, row in (("", 0), ("history_", -1)):  # history is the last section in these turns
            r = asyncio.run(_step_run(rec, size, steps, row, start))
            for k, v in r.items():
                out[f"{name}{size[0]}x{size[1]}_{k}"] = v
    return out
