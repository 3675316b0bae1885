"""bench_tui (h) (benchmarks/tui_steps.py) reads the app's step records while the app may be writing one: only complete lines count."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _bench_tui():
    spec = importlib.util.spec_from_file_location("bench_tui_steps_for_test", ROOT / "benchmarks" / "tui_steps.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_half_written_record_is_left_for_the_next_read(tmp_path: Path) -> None:
    bench = _bench_tui()
    log = tmp_path / "steps.jsonl"
    first, second = {"key": "right", "cpu": 12.5}, {"key": "right", "cpu": 14.0, "section": "history ·"}
    whole = (json.dumps(first) + "\n" + json.dumps(second) + "\n").encode()
    log.write_bytes(whole[:-9])  # the app is part way through the second line
    assert bench.complete_records(log) == [first]
    log.write_bytes(whole)
    assert bench.complete_records(log) == [first, second]
    assert bench.complete_records(tmp_path / "not-yet.jsonl") == []
