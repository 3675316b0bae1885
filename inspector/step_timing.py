"""Opt-in timing of key presses in the running app, as the person meets them (CONTEXTPIPE_STEP_TIMING=FILE).

For each key press the app appends one JSON line to FILE: the UI thread's CPU (`time.thread_time`) and the
wall time from the moment the app starts handling the key event until the frame that shows its result has
been written to the driver, and, when the step's content comes from the content worker, until the frame
after that content has been handled. Measuring inside the app leaves out whatever drives it: a test
harness (Pilot) costs more UI CPU per key than the step itself, and subtracting an estimate of it was the
largest source of noise in the earlier figures; in a terminal (tmux) it is the real program's figure.

Fields of a line (times in ms):
  key, index, turn, section: the key, and the turn position/number and section shown after it (index -1:
      the key did not step);
  prepared: the step showed a document the content worker had prepared (no content message to wait for);
  frame_cpu, frame_wall: from the key to the end of the first frame written after the step was handled;
  cpu, wall: from the key to the end of the frame showing the step's content (= frame_* if prepared or
      no content is expected); `ended` says which: "frame", "content", or "next key"/"exit" (the key did
      not step, or the next key came first: then up to the end of the last frame written before it);
  render_cpu, frames: CPU inside the frames written meanwhile (compositor update and terminal output),
      and how many;
  gc: garbage collections (any generation) on the way; queued: wall from the key event's creation (the
      driver's input thread) to the app starting to handle it.

Off (no variable), the app pays one attribute test per event."""

from __future__ import annotations

import gc
import json
import os
import time
from collections.abc import Callable
from typing import IO, Any

from textual._time import get_time  # the clock Textual stamps events with (Message.time)

ENV = "CONTEXTPIPE_STEP_TIMING"


def _collections() -> int:
    return sum(s["collections"] for s in gc.get_stats())


class StepRecord:
    __slots__ = ("key", "cpu0", "wall0", "gc0", "queued", "index", "turn", "section", "prepared",
                 "expects_content", "content_came", "frame_cpu", "frame_wall", "render_cpu", "frames", "stepped",
                 "last_cpu", "last_wall")

    def __init__(self, key: str, queued: float) -> None:
        self.key, self.queued = key, queued
        self.gc0 = _collections()
        self.index = -1
        self.turn: int | None = None
        self.section: str | None = None
        self.prepared, self.expects_content, self.stepped = False, False, False
        self.content_came = False  # the worker's content was shown (maybe before the step's first frame)
        self.frame_cpu: float | None = None
        self.frame_wall: float | None = None
        self.render_cpu, self.frames = 0.0, 0
        # Taken last, so that the bookkeeping above is not in the figure.
        self.cpu0, self.wall0 = time.thread_time(), time.perf_counter()
        self.last_cpu, self.last_wall = self.cpu0, self.wall0  # the end of the last frame written


class StepTiming:
    """Collects one StepRecord per key press on the UI thread and appends it to a file as a JSON line.

    The app calls `key` when it starts handling a key event, `frame` around each frame written (from the
    main screen), `stepped` when a step has set up the new turn, and `content_shown` when the content
    worker's text for it has been shown; the record closes after the frame that follows the last of
    these (a callback after the refresh), or when the next key arrives."""

    def __init__(self, out: IO[str], size: Callable[[], tuple[int, int]],
                 after_refresh: Callable[[Callable[[], None]], object]) -> None:
        self.out = out
        self.size = size
        self.after_refresh = after_refresh
        self.current: StepRecord | None = None
        self.listeners: list[Callable[[dict[str, Any]], None]] = []  # benchmarks wait on records

    @classmethod
    def from_env(cls, size: Callable[[], tuple[int, int]],
                 after_refresh: Callable[[Callable[[], None]], object]) -> StepTiming | None:
        path = os.environ.get(ENV)
        if not path:
            return None
        return cls(open(path, "a", encoding="utf-8"), size, after_refresh)  # noqa: SIM115 (open for the app's life)

    def key(self, key: str, created: float) -> None:
        if self.current is not None:
            self._close(ended="next key")
        # A key that does not step is closed by the next key (or by the app's exit): the key event is
        # handled in the focused widget's own task, so no point before that says "this key stepped nothing".
        self.current = StepRecord(key, get_time() - created)

    def frame(self, cpu: float) -> None:
        record = self.current
        if record is not None:
            record.render_cpu += cpu
            record.frames += 1
            record.last_cpu, record.last_wall = time.thread_time(), time.perf_counter()

    def stepped(self, index: int, turn: int, section: str | None, prepared: bool, expects_content: bool) -> None:
        record = self.current
        if record is None or record.stepped:  # a step without a key (play, live) or a second one: not timed
            return
        record.stepped = True
        record.index, record.turn, record.section = index, turn, section
        record.prepared, record.expects_content = prepared, expects_content
        self.after_refresh(self._framed)

    def content_shown(self) -> None:
        record = self.current
        if record is not None and record.expects_content:
            record.expects_content, record.content_came = False, True
            self.after_refresh(self._settled)

    def _framed(self) -> None:
        record = self.current
        if record is None or record.frame_cpu is not None:
            return
        self._mark_frame(record)
        if not record.expects_content:
            # On a busy machine the worker's content can be handled before the step's first frame is
            # written: then that frame is the one showing the content.
            self._close(ended="content" if record.content_came else "frame")

    def _settled(self) -> None:
        record = self.current
        if record is not None and not record.expects_content:
            if record.frame_cpu is None:
                self._mark_frame(record)
            self._close(ended="content")

    @staticmethod
    def _mark_frame(record: StepRecord) -> None:
        record.frame_cpu = time.thread_time() - record.cpu0
        record.frame_wall = time.perf_counter() - record.wall0

    def _close(self, ended: str) -> None:
        record = self.current
        assert record is not None
        self.current = None
        if ended in ("next key", "exit"):  # up to the end of the last frame written before it
            cpu, wall = record.last_cpu - record.cpu0, record.last_wall - record.wall0
        else:
            cpu, wall = time.thread_time() - record.cpu0, time.perf_counter() - record.wall0
        w, h = self.size()
        line: dict[str, Any] = {
            "key": record.key, "w": w, "h": h, "index": record.index, "turn": record.turn,
            "section": record.section, "prepared": record.prepared,
            "frame_cpu": None if record.frame_cpu is None else round(record.frame_cpu * 1e3, 3),
            "frame_wall": None if record.frame_wall is None else round(record.frame_wall * 1e3, 3),
            "cpu": round(cpu * 1e3, 3), "wall": round(wall * 1e3, 3),
            "render_cpu": round(record.render_cpu * 1e3, 3), "frames": record.frames,
            "gc": _collections() - record.gc0, "queued": round(record.queued * 1e3, 3),
            "ended": ended,
        }
        self.out.write(json.dumps(line) + "\n")
        self.out.flush()
        for listener in self.listeners:
            listener(line)

    def close(self) -> None:
        if self.current is not None:
            self._close(ended="exit")
        self.out.close()
