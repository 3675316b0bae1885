"""simulate holds the cyclic collector off while it runs, and leaves it as it found it.

simulate allocates what it keeps (each column's requests, keys and figures) and next to no cyclic
garbage; with the collector on, that growth alone set off collections that rescan all of it, more and
longer ones as the session grows (a 3,000-turn session-wide what-if: 1.67 s of collections, 0.35 s at
1,500 turns). The TUI's what-if reaches simulate_stream without the CLI's own pause.
"""

from __future__ import annotations

import gc
import sys
from pathlib import Path
from typing import Any

from engine.recording.cpsession import RecordingReader
from engine.sim.simulate import SimSettings, simulate_file, simulate_stream
from engine.sim.simulate_read import recording_events

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from bench_simulate import make_synthetic  # noqa: E402


def _collections_during(path: Path, settings: SimSettings) -> tuple[int, Any]:
    """How many collections start while simulate_stream runs on `path` (its events read as simulate_file
    reads them), and its report."""
    seen = 0

    def cb(phase: str, info: dict[str, Any]) -> None:
        nonlocal seen
        if phase == "start":
            seen += 1

    with RecordingReader.open(path) as r:
        read = recording_events(r)
        gc.callbacks.append(cb)
        try:
            report = simulate_stream(read, settings)
        finally:
            gc.callbacks.remove(cb)
    return seen, report


def test_no_collection_while_simulating_and_the_collector_back_on(tmp_path: Path) -> None:
    rec = tmp_path / "s.cpsession"
    make_synthetic(rec, 60)
    gc.collect()
    assert gc.isenabled()
    n, report = _collections_during(rec, SimSettings(window=32000, policies=["all"]))
    assert report.turns == 60
    # At most the one the collector may run when it is turned back on (what was allocated meanwhile is
    # counted); the old code: 14 on this session (one every ~700 net container allocations).
    assert n <= 1, n
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off(tmp_path: Path) -> None:
    rec = tmp_path / "s.cpsession"
    make_synthetic(rec, 10)
    gc.disable()
    try:
        simulate_file(rec, SimSettings(window=32000))
        assert not gc.isenabled()
    finally:
        gc.enable()
