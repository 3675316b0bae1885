"""A simulate's peer columns (engine.sim.simulate_column._simulate,
engine.sim.simulate_requests._peer_requests): each peer's requests are
made as the cache simulator takes them and let go after their step. Held in a list until the column was
simulated, a 3,000-turn what-if's clear_tool_uses column held ~8.6 million Block references (each turn
the conversation so far), quadratic in the session."""

from __future__ import annotations

import json
import weakref
from pathlib import Path
from typing import Any

import pytest

import engine.sim.cachesim as cachesim
import engine.sim.simulate as sim
import engine.sim.simulate_requests as requests_mod
from engine.pipeline import Pipeline
from engine.sim.simulate import SimSettings, simulate_events
from engine.sim.simulate_read import load_recording_events


def _record(path: Path, turns: int) -> None:
    now = [1_000.0]
    pipe = Pipeline("deepseek-chat", "deepseek", 16_000, record=path, serve=False, clock=lambda: now[0])
    pipe.identity("You are a careful coding agent.")
    pipe.user("Fix the failing test.")
    for t in range(turns):
        req = pipe.next_request()
        pipe.record_usage({"prompt_tokens": req.trace["final_tokens"], "completion_tokens": 40})
        now[0] += 5
        calls = pipe.assistant(
            f"Step {t}.", [{"id": f"c{t}", "name": "bash", "arguments": json.dumps({"t": t})}]
        )
        pipe.tool_result(calls[0].id, f"output of step {t}: " + "x " * (t % 7) * 40)
    pipe.close()


def test_a_peer_columns_requests_are_let_go_as_they_are_simulated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """120 turns, every peer column: at each step of a peer column, the requests made for that column
    (since the column before it was done) that are still alive are the one stepped, the next one (it
    tells the reply) and the one before (its cache break is named against it), not every turn's."""
    path = tmp_path / "s.cpsession"
    _record(path, 120)
    alive: dict[int, Any] = {}  # id -> weak reference (a _Req compares by value: no WeakSet)
    epoch = [0]
    column = [""]
    most: dict[str, int] = {}

    class CountedReq(requests_mod._Req):
        def __init__(self, *a: Any, **kw: Any) -> None:
            super().__init__(*a, **kw)
            self.epoch = epoch[0]
            key = id(self)
            alive[key] = weakref.ref(self, lambda _: alive.pop(key, None))

    simulate_column = sim._simulate

    def column_counted(name: str, reqs: Any, **kw: Any) -> Any:
        column[0] = name
        try:
            return simulate_column(name, reqs, **kw)
        finally:
            epoch[0] += 1  # requests made from here on are the next column's

    step = cachesim.CacheSimulator.step

    def step_counted(self: Any, call: Any) -> Any:
        mine = sum(1 for ref in list(alive.values()) if (r := ref()) is not None and r.epoch == epoch[0])
        most[column[0]] = max(most.get(column[0], 0), mine)
        return step(self, call)

    monkeypatch.setattr(requests_mod, "_Req", CountedReq)  # where _peer_requests makes them
    monkeypatch.setattr(sim, "_simulate", column_counted)
    monkeypatch.setattr(cachesim.CacheSimulator, "step", step_counted)
    report = simulate_events(load_recording_events(path)[0], SimSettings(policies=["all"]))
    assert report.simulated_turns == 120
    peers = [
        n
        for n in ("sliding_window", "clear_tool_uses", "server_compaction", "threshold_compaction")
        if n in most
    ]
    assert peers, most
    for name in peers:
        assert most[name] <= 3, most  # every turn's request (120, and side calls) held: 120+
