"""`cp-inspect simulate FILE` imports only what reading, folding, building and simulating use: the
modules that write (spill files, loggers for a disk that refuses a spill, the fast frame encoder) and
the peer policies of `--policies` come when something uses them, and still work then."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "demo_sessions" / "scout-openai.cpsession"
# What a plain simulate has no use for (each costs ~1.5-5 ms of CPU to import): tempfile (spill files),
# logging (warnings about a disk that refuses a spill), pickle (spilled events and messages), ormsgpack
# (the probe's and the recorder's encoder), the peer policies, request_diff (the serializer and the
# cache simulator need only its common_prefix_len, now engine/common_prefix.py), and the shadow rollout
# with engine.whatif (a pipeline with a shadow candidate imports them; a replay never plans one), and
# decimal (token_arg reads a typed count of tokens with it: a line that types none does not need it).
DEFERRED = [
    "decimal",
    "tempfile",
    "logging",
    "pickle",
    "ormsgpack",
    "engine.sim.policies",
    "engine.request_diff",
    "engine.shadow",
    "engine.whatif",
]


def _loaded_after_simulate(*args: str) -> list[str]:
    code = (
        "import json, sys\n"
        "from inspector.entry import run_plain_command\n"
        f"try:\n    run_plain_command(['simulate', {str(DEMO)!r}, *{list(args)!r}])\n"
        "except SystemExit as exc:\n    assert exc.code == 0, exc.code\n"
        f"print(json.dumps([m for m in {DEFERRED!r} if m in sys.modules]))\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    return list(json.loads(out.stdout.strip().splitlines()[-1]))


def test_plain_simulate_defers_what_it_does_not_use() -> None:
    assert _loaded_after_simulate() == []


def test_policies_are_imported_when_asked_for() -> None:
    assert _loaded_after_simulate("--policies", "sliding_window") == ["engine.sim.policies"]


def test_deferred_writers_work_when_used(tmp_path: Path) -> None:
    """The first spill, warning and fast encode import what they need."""
    from engine.recording.event_log import EventLog
    from engine.recording.frames import ormsgpack, pack_payload, pack_payload_fast
    from engine.recording.history_log import HistoryLog
    from engine.spill import FileSpill

    log = EventLog(keep=2, chunk=2)
    evs = [{"k": "ev", "i": i} for i in range(9)]
    for ev in evs:
        log.append(ev)
    assert list(log) == evs  # the older ones spilled (pickled to a scratch file) and read back
    assert HistoryLog is not None
    assert FileSpill(tmp_path).put("k" * 64, "text").startswith("spill://")
    assert (tmp_path / ("k" * 64 + ".txt")).read_text() == "text"
    fast = pack_payload_fast({"k": "ev", "a": [1, 2]})
    assert ormsgpack is None or fast == pack_payload({"k": "ev", "a": [1, 2]})


def test_recorded_events_come_in_memory_form_whatever_the_version() -> None:
    """simulate reads a recording's events as RecordingReader hands them out, without unpacking them
    again: version 1 (compressed blobs and traces inside events) and version 2 alike."""
    from engine.recording.cpsession import RecordingReader
    from engine.recording.journal import unpack_event
    from engine.sim.simulate_read import load_recording_events

    for path in (ROOT / "tests" / "fixtures" / "v1_recordings" / "scout-openai.cpsession", DEMO):
        events, _ = load_recording_events(path)
        assert [e["k"] for e in events if "z" in e or "tz" in e] == []
        assert events == [unpack_event(e) for e in RecordingReader.open(path).events()]


def test_common_prefix_len_has_one_home() -> None:
    """request_diff, the serializer and the cache simulator use the one common_prefix_len."""
    from engine.common_prefix import common_prefix_len
    from engine.request_diff import common_prefix_len as from_diff

    assert from_diff is common_prefix_len
    assert common_prefix_len([1, 2, 3], [1, 2, 4]) == 2
    assert common_prefix_len((), (1,)) == 0


def test_shadow_candidate_loads_the_shadow_module() -> None:
    code = (
        "import sys\n"
        "from engine.pipeline import Pipeline\n"
        "from engine.whatif import Overrides\n"
        "assert 'engine.shadow' not in sys.modules\n"
        "p = Pipeline('deepseek-chat', 'deepseek', 32000, serve=False, shadow=Overrides(window=16000))\n"
        "assert p._shadow is not None and 'engine.shadow' in sys.modules\n"
        "p.user('hi'); p.next_request(); print('ok')\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().endswith("ok")
