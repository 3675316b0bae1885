"""RecordingReader's public frame API (event_frames, turn_frame, turns_before, data_start/data_end), and
that no code outside engine/recording reaches into the reader's private attributes: the CLI and the
TUI's file source did (`r._frames(r._start, r._end)`), so any change of the reader's internals broke
them silently."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from engine.recording.cpsession import RecordingError, RecordingReader

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "demo_sessions" / "scout-anthropic.cpsession"


def _private_names() -> set[str]:
    with RecordingReader.open(DEMO) as r:
        # (the class and its bases: the chunks' and the index's methods live in cpsession_chunks.py and
        # cpsession_index.py)
        names = set(vars(r)).union(*(vars(k) for k in RecordingReader.__mro__ if k is not object))
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


def test_no_caller_outside_engine_recording_touches_the_readers_privates() -> None:
    names = _private_names()
    privates = {"_frames", "_start", "_end", "_turn_nums", "_turn_offs", "_pread", "_scan", "_inflate_chunk"}
    assert privates <= names
    hits = []
    for top in ("engine", "inspector", "panels", "themes", "benchmarks"):
        for f in sorted((ROOT / top).rglob("*.py")):
            if f.is_relative_to(ROOT / "engine" / "recording"):
                continue
            for node in ast.walk(ast.parse(f.read_text(), str(f))):
                # `self._x` / `cls._x` are a class's own attributes; any other object's `._x` named like
                # one of the reader's privates is a reach into it (no other class there shares the names).
                if (
                    isinstance(node, ast.Attribute)
                    and node.attr in names
                    and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
                ):
                    hits.append(f"{f.relative_to(ROOT)}:{node.lineno}: .{node.attr}")
    assert not hits, "RecordingReader privates used outside engine/recording:\n" + "\n".join(hits)


def test_event_frames_reads_the_whole_body_or_a_range() -> None:
    with RecordingReader.open(DEMO) as r:
        frames = list(r.event_frames())
        assert [ev for _, ev in frames] == list(r.events())
        assert all(r.data_start <= pos < r.data_end for pos, _ in frames)
        assert [pos for pos, _ in frames] == sorted(pos for pos, _ in frames)
        nums = r.turn_numbers()
        mid = nums[len(nums) // 2]
        pos, end = r.turn_frame(mid)
        head = list(r.event_frames(stop=end))
        assert head == frames[: len(head)]
        assert any(ev.get("k") == "turn" and ev.get("turn") == mid for _, ev in head)
        upto = list(r.events(upto_turn=mid))  # stops right after the turn event, inside its chunk
        assert upto == [ev for _, ev in head][: len(upto)]
        tail = list(r.event_frames(end))
        assert head + tail == frames
        before = r.turns_before(pos)
        assert before == nums[: len(before)] and mid not in before and before  # a chunk may hold a few turns
        assert r.turns_before(r.data_end) == nums
        assert r.turns_before(r.data_start) == []
        assert r.turn_frame(-1) == r.turn_frame(nums[-1])
        with pytest.raises(IndexError):
            r.turn_frame(nums[-1] + 1)


def test_event_frames_says_damage_with_its_offset(tmp_path: Path) -> None:
    data = bytearray(DEMO.read_bytes())
    with RecordingReader.open(DEMO) as r:
        at = r.turn_frame(r.turn_numbers()[3])[0]
    data[at + 20] ^= 0xFF
    bad = tmp_path / "bad.cpsession"
    bad.write_bytes(bytes(data))
    with RecordingReader.open(bad) as r, pytest.raises(RecordingError) as exc:
        for _ in r.event_frames():
            pass
    assert exc.value.offset is not None and exc.value.offset <= at
