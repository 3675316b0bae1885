"""A replay's checkpoints park their conversation's live window on disk (HistoryLog.park); the next
checkpoint's window is mostly the same messages, and each park wrote all of them again: a replay of a
218 MB recording wrote 544 MB of scratch by turn 3,500 (the scratch file grows with the session, on a
disk the user does not see it on: it is unlinked). A park now indexes the records the previous park of
the same log (or a copy of it) wrote for the same message objects, and writes only the rest. What the
tests hold: the scratch grows by the new messages only, and every parked copy, restored or not, reads
back the messages it was given, while the original goes on releasing into the same file."""

from __future__ import annotations

import copy
import errno
import pickle
from typing import Any

from engine.artifacts import Message, Text
from engine.recording import spill_file
from engine.recording.history_log import HistoryLog


def _msgs(n: int) -> list[Message]:
    return [
        Message("user" if i % 2 else "assistant", (Text(f"message {i} " + "x" * (200 + i)),))
        for i in range(n)
    ]


def _size(msgs: list[Message]) -> int:
    return sum(len(pickle.dumps(m, protocol=pickle.HIGHEST_PROTOCOL)) for m in msgs)


def test_a_later_checkpoint_writes_only_the_messages_the_last_one_did_not() -> None:
    model = _msgs(80)
    log = HistoryLog(4, keep_calls=True)
    for m in model[:30]:
        log.append(m)
    assert log.release(2, 10)
    first = copy.deepcopy(log)
    assert first.park()
    written = first.spilled_bytes()
    for m in model[30:50]:
        log.append(m)
    second = copy.deepcopy(log)
    assert second.park()
    # the second window is messages 10..50: 10..30 were written by the first park
    assert second.spilled_bytes() - written == _size(model[30:50])
    assert list(first) == model[:30] and list(second) == model[:50]
    assert second.calls(0, 50) == [() for _ in range(50)]
    # the original releases into its file; a third park after that reuses what the second wrote
    for m in model[50:70]:
        log.append(m)
    assert log.release(2, 40)
    third = copy.deepcopy(log)
    before = third.spilled_bytes()
    assert third.park()
    assert third.spilled_bytes() - before == _size(model[50:70])
    assert list(third) == model[:70] and third[45] == model[45] and third[:12] == model[:12]
    # restored copies read back what they were given, and fold on
    for snap, n in ((first, 30), (second, 50), (third, 70)):
        restored = copy.deepcopy(snap)
        restored.unpark(5)
        assert list(restored) == model[:n]
        for m in model[n:]:
            restored.append(m)
        restored.release(2, 60)
        assert list(restored) == model and restored.since(3) == model[3:]
    for m in model[70:]:
        log.append(m)
    assert list(log) == model


def test_a_release_after_a_park_indexes_the_parked_records_instead_of_writing_them_again() -> None:
    # A replay's cursor releases (behind the compaction cut) messages its last checkpoint parked: each
    # was written twice, ~240 of the 766 MB of scratch a replay of a 218 MB recording wrote.
    model = _msgs(60)
    log = HistoryLog(4, keep_calls=True)
    for m in model[:30]:
        log.append(m)
    assert log.release(2, 10)
    snap = copy.deepcopy(log)
    assert snap.park()  # messages 10..30
    written = log.spilled_bytes()
    for m in model[30:40]:
        log.append(m)
    assert log.release(2, 26) == model[10:26]
    assert log.spilled_bytes() == written  # nothing written: all of 10..26 were parked
    assert log.release(2, 36) == model[26:36]
    assert log.spilled_bytes() - written == _size(model[30:36])  # 26..30 parked, 30..36 new
    assert list(log) == model[:40] and log[27] == model[27] and log[:12] == model[:12]
    assert log.calls(0, 40) == [() for _ in range(40)]
    restored = copy.deepcopy(snap)
    restored.unpark(5)
    assert list(restored) == model[:30]
    for m in model[40:]:
        log.append(m)
    assert log.release(2, 50) and list(log) == model


def test_a_refused_write_after_reusing_parked_records_leaves_the_release_undone(monkeypatch: Any) -> None:
    model = _msgs(40)
    log = HistoryLog(4)
    for m in model[:30]:
        log.append(m)
    assert log.release(2, 10)
    assert copy.deepcopy(log).park()  # messages 10..30
    for m in model[30:]:
        log.append(m)
    real = spill_file.SpillFile.append

    def full(self: spill_file.SpillFile, data: bytes) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(spill_file.SpillFile, "append", full)
    assert log.release(2, 36) == [] and log.spill_error is not None  # 10..30 reusable, 30..36 refused
    assert log.on_disk() == 8 and log.in_memory() == 32 and list(log) == model
    monkeypatch.setattr(spill_file.SpillFile, "append", real)
    assert log.release(2, 40) == model[10:40]
    assert log.on_disk() == 38 and list(log) == model and log[11] == model[11]
