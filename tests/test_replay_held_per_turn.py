"""What a replay holds per turn it has passed, stepping turn by turn through a long recording.

The replay's fold parks a checkpoint every CHECKPOINT_EVERY turns, kept for random access. Each took a
copy of the fold's recent traces: stepping turn by turn, those are the traces of the ~30 turns just
stepped through (each decoded, ~13 KB in a busy session), so the checkpoints held ~3 MB per 1,000 turns
that grew with the session. A checkpoint now keeps what a build from it reads (the previous trace and
the alert rules' look-back). Measured here by the decoded traces the checkpoints keep, on a recording
generated through the real engine; every request rebuilt is the recorded one."""

from __future__ import annotations

import sys
from collections import deque
from pathlib import Path

import pytest

from engine.alerts import LOOKBACK
from engine.recording.replay import CHECKPOINT_EVERY
from inspector.sources.file import FileSource
from tests.support.recordings import record_reading_session

TURNS = 4 * CHECKPOINT_EVERY + 40


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return record_reading_session(
        tmp_path_factory.mktemp("held_per_turn") / "long.cpsession",
        TURNS,
        body=lambda t: f"file f{t}: " + f"line {t}\n" * (20 + t % 30),
        model="claude-sonnet-4",
        provider="anthropic",
        window=8_000,
    )


class SmallWindow(FileSource):
    TEXT_BUDGET = 32 << 10
    HISTORY_CHUNK = 8
    READ_AHEAD = 16


def _deep_size(obj: object, seen: set[int]) -> int:
    if id(obj) in seen:
        return 0
    seen.add(id(obj))
    size = sys.getsizeof(obj)
    if isinstance(obj, dict):
        size += sum(_deep_size(k, seen) + _deep_size(v, seen) for k, v in obj.items())
    elif isinstance(obj, list | tuple):
        size += sum(_deep_size(v, seen) for v in obj)
    return size


def test_stepping_turn_by_turn_holds_no_more_traces_per_checkpoint_than_a_build_reads(
    recording: Path,
) -> None:
    src = SmallWindow(recording)
    nums = src.reader.turn_numbers()
    recorded = {t: src.full_trace(t)["request_sha256"] for t in nums}
    for t in nums:
        assert src._built(t).serialized.request_sha256 == recorded[t]
    rp = src._replayer
    assert rp is not None and len(rp._checkpoints) >= 4
    pinned: dict[int, object] = {}
    for cp in rp._checkpoints.values():
        for trace in deque.__iter__(cp.traces):  # as kept, not rebuilt
            pinned[id(trace)] = trace
    # Each checkpoint held the ~30 traces of the turns just stepped through (MBs per 1,000 turns in
    # this session, ~13 KB a trace in a busy one); now at most the LOOKBACK a build reads.
    held = _deep_size(list(pinned.values()), set())
    per_turn = held / len(nums)
    assert per_turn < 1_000, f"checkpoints hold {held:,} bytes of traces ({per_turn:.0f} a turn)"
    assert all(len(cp.traces) <= LOOKBACK for cp in rp._checkpoints.values())
    assert len(pinned) <= LOOKBACK * len(rp._checkpoints), len(pinned)
    # random access back through the checkpoints builds the recorded requests still
    for t in (nums[3], nums[CHECKPOINT_EVERY * 2 + 5], nums[-1], nums[CHECKPOINT_EVERY]):
        assert src._built(t).serialized.request_sha256 == recorded[t]
    src.close()
