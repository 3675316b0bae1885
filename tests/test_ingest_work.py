"""An import's work grows with what each call adds, not with its whole history: ingest hashed every
message of every call again (a 3,000-call session took 23 ms a call, 69 s), where each call repeats the
last one's messages. The recording written is the same byte for byte whether the importer shares one
message object between the calls that repeat it or gives each call its own copies."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import engine.importers.ingest as ingest_module
from engine.importers.ingest import ingest
from engine.importers.model import CallRec, ImportedSession, MessageRec, ToolCallRec
from engine.recording.cpsession import RecordingReader


def _session(n: int, *, shared: bool) -> ImportedSession:
    msgs = [MessageRec("system", "You are a coding agent."), MessageRec("user", "Fix the bug in foo.py")]
    calls = []
    for k in range(n):
        reply = MessageRec("assistant", f"step {k}", (ToolCallRec(f"c{k}", "bash", f'{{"cmd": "ls {k}"}}'),))
        if k == n // 2:
            # the agent rewrites an old message in place, from this call on (its prefix no longer repeats)
            msgs[1] = MessageRec("user", "Fix the bug in bar.py")
        history = tuple(msgs) if shared else tuple(dataclasses.replace(m) for m in msgs)
        calls.append(CallRec(history, reply, (), None, None, "gpt-4o"))
        msgs += [reply, MessageRec("tool", f"output {k}", tool_call_id=f"c{k}")]
    return ImportedSession("synthetic", "synthetic", "gpt-4o", "openai", calls)


def test_each_repeated_message_is_hashed_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[int] = []
    real = ingest_module.message_dict

    def counted(m: MessageRec, blob: object = None) -> dict[str, object]:
        if blob is not None:
            made.append(1)
        return real(m, blob)

    monkeypatch.setattr(ingest_module, "message_dict", counted)
    n = 60
    pipe, _ = ingest(_session(n, shared=True), str(tmp_path / "s.cpsession"))
    pipe.close()
    # The 2 opening messages, then the reply and result each later call adds: each once; and the whole
    # history once more at the call whose history the agent rewrote (2 + 2k messages at call k).
    k = n // 2
    assert len(made) == 2 + 2 * (n - 1) + 2 * k, len(made)


def test_shared_and_copied_messages_write_the_same_recording(tmp_path: Path) -> None:
    files = []
    for shared in (True, False):
        path = tmp_path / f"{shared}.cpsession"
        pipe, _ = ingest(_session(40, shared=shared), str(path))
        pipe.close()
        files.append(path.read_bytes())
    assert files[0] == files[1]
    with RecordingReader.open(tmp_path / "True.cpsession") as reader:
        assert reader.turn_count == 40
