"""The session-wide what-if of a recording (FileSource.simulate, the TUI's `w` over the whole session)
reads the journal pass by pass from the file, as `cp-inspect simulate` does: each of engine.sim's passes
reads the paged journal afresh, a page at a time. A list of every event, held for the whole what-if, was
the journal in memory again (~4.3 KB a turn). shadow_summary reads what it needs in one pass.

Counted: the request events alive while the what-if folds the session (gc), which a list held all of."""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

import pytest

import engine.sim.simulate as sim
from engine.shadow import shadow_summary
from engine.sim.simulate import SimSettings, simulate_events
from engine.sim.simulate_read import load_recording_events
from engine.whatif import Overrides
from inspector.sources.file import FileSource
from tests.support.recordings import record_coding_session

TURNS = 300


def _record(path: Path, turns: int) -> None:
    record_coding_session(
        path,
        turns,
        arguments=lambda t: {"cmd": f"cat src/m{t % 7}.py"},
        output=lambda t: "\n".join(f"line {i} of step {t}" for i in range(5 + t % 40)),
    )


class _Small(FileSource):
    READ_AHEAD = 8  # pages kept: READ_AHEAD + 96


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("stream") / "s.cpsession"
    _record(path, TURNS)
    return path


def _requests_alive() -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if type(o) is dict and o.get("k") == "request")


def _calls_alive(kind: type) -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if type(o) is kind)


def test_the_what_if_holds_a_window_of_the_journal_not_all_of_it(
    recording: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[int] = []
    build_pass = sim._build_pass

    def counted(*args: Any, **kw: Any) -> Any:
        seen.append(_requests_alive() - before)
        return build_pass(*args, **kw)

    monkeypatch.setattr(sim, "_build_pass", counted)
    src = _Small(recording)
    # Request events earlier tests of the process left alive are not this what-if's: counted from here.
    before = _requests_alive()
    got = src.simulate(Overrides(window=8000))
    assert got["simulated_turns"] == TURNS
    # A page is a turn: at most the pages kept (104) and the build pass's own. A held list: all 300.
    assert seen and seen[0] <= _Small.READ_AHEAD + 96 + 8, seen


def test_a_streamed_what_if_and_shadow_summary_give_what_the_whole_journal_gives(recording: Path) -> None:
    src = FileSource(recording)
    events = load_recording_events(recording)[0]
    got = src.simulate(Overrides(window=8000))
    want = simulate_events(events, SimSettings(window=8000, policies=["all"])).to_json(per_turn=True)
    for name in got["policies"]:
        pol, ref = got["policies"][name], want["policies"][name]
        if pol is None:
            assert ref is None
            continue
        assert {k: v for k, v in pol.items() if k != "per_turn"} == {
            k: v for k, v in ref.items() if k != "per_turn"
        }
    assert src.shadow_summary() is None is shadow_summary(events)


def test_each_call_is_let_go_after_its_simulator_step(
    recording: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A column's calls go to the cache simulator one at a time: at its last step no earlier call of the
    column is alive (a list of them held every request's Blocks a second time; 300 alive before)."""
    from engine.sim.cachesim import CacheSimulator, Call

    alive: list[int] = []
    step = CacheSimulator.step

    def counted(self: CacheSimulator, call: Call) -> Any:
        counted.n += 1  # type: ignore[attr-defined]
        if counted.n == TURNS:  # the pipeline column's last call
            alive.append(_calls_alive(Call) - before)
        return step(self, call)

    counted.n = 0  # type: ignore[attr-defined]
    monkeypatch.setattr(CacheSimulator, "step", counted)
    monkeypatch.setattr(CacheSimulator, "simulate", lambda self, calls: [self.step(c) for c in calls])
    events = load_recording_events(recording)[0]
    before = _calls_alive(Call)  # what earlier tests of the process left alive is not this simulate's
    got = simulate_events(events, SimSettings(window=8000))
    assert alive and alive[0] <= 2, alive
    assert got.simulated_turns == TURNS
