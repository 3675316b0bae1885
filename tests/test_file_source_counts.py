"""A recording's own token counts (its @counts table) in the app's replay and session-wide what-if.

The first content shown of a long recording folds the session up to that turn, and the fold tokenized
every text the agent had already counted: ~24 s of the ~33 s a 218 MB recording took to show its last
turn. The replay now counts with the recording's table, checked on the first turn built against the
recording's own figures (a table that disagrees is dropped and the turn folded again); the session-wide
what-if takes the table as `cp-inspect simulate` does.
"""

from __future__ import annotations

import json
import random
from dataclasses import replace
from pathlib import Path

from engine.pipeline import Pipeline
from engine.recording.counts import CountTable
from engine.recording.replay import Replayer
from engine.sim.simulate import SimSettings, simulate_events
from engine.sim.simulate_read import load_recording_events
from engine.tokens import TokenCounter
from engine.whatif import Overrides
from inspector.sources.file import FileSource
from inspector.sources.replaying import CHARTED, charted, section_text, shared_counter

PARAMS = {"type": "object", "properties": {"path": {"type": "string"}}}


def record(path: Path, turns: int = 30) -> None:
    rnd = random.Random(str(path))  # texts no other test counted (the shared counter is process-wide)
    clock = iter(range(10_000))
    p = Pipeline("claude-sonnet-4", window=8000, record=path, clock=lambda: float(next(clock)))
    p.identity("You are a careful coding agent.")
    p.add_tool("read", "read a file", PARAMS)
    p.user("Read every file.")
    for t in range(turns):
        req = p.next_request()
        p.record_usage({"input_tokens": req.trace["final_tokens"], "output_tokens": 20})
        calls = p.assistant(f"step {t}", tool_calls=[{"id": f"c{t}", "name": "read", "arguments": "{}"}])
        words = " ".join(f"w{rnd.randrange(10**9)}" for _ in range(300))
        p.tool_result(calls[0].id, f"f{t}.py: {words}")
    p.close()


def contents(src: FileSource, turn: int) -> list[str]:
    return [src.section_content(turn, s.id) for s in src._built(turn).asm]


def test_the_replay_counts_with_the_recordings_table(tmp_path: Path) -> None:
    path = tmp_path / "r.cpsession"
    record(path)
    src = FileSource(path)
    last = src.reader.turn_numbers()[-1]
    counted = len(shared_counter())
    got = contents(src, last)
    assert len(shared_counter()) == counted  # nothing of the session tokenized again
    carried = src._carried
    assert carried is not None and carried.carried > 30 and carried.misses == 0
    # The same turn as a replay that counts every text afresh.
    events, _ = load_recording_events(path)
    fresh = Replayer(events, TokenCounter()).replan(last)
    assert got == [section_text(s) for s in fresh.asm]
    assert src._built(last).trace["final_tokens"] == fresh.trace["final_tokens"]


def test_a_table_that_disagrees_with_the_recording_is_dropped(tmp_path: Path) -> None:
    path = tmp_path / "r.cpsession"
    record(path)
    good = FileSource(path)
    last = good.reader.turn_numbers()[-1]
    want = contents(good, last)
    src = FileSource(path)
    table = src._table()
    assert table is not None
    src._counts = replace(table, counts={k: n * 3 for k, n in table.counts.items()})  # not what was counted
    built = src._built(last)
    assert src._carried is None and src._counts_checked  # folded again with a fresh count
    assert built.trace["final_tokens"] == src.full_trace(last)["final_tokens"]
    assert contents(src, last) == want


def test_the_session_what_if_gives_the_same_figures_with_the_table(tmp_path: Path) -> None:
    path = tmp_path / "r.cpsession"
    record(path)
    src = FileSource(path)
    assert isinstance(src._table(), CountTable)
    got = src.simulate(Overrides())
    events, _ = load_recording_events(path)
    report = simulate_events(events, SimSettings(policies=["all"]), source=str(path), counter=TokenCounter())
    want = charted(report)
    for r in (got, want):
        r.pop("elapsed_s", None)
    assert got == want


def test_the_charted_report_is_the_whole_report_with_only_the_charted_costs_per_turn(tmp_path: Path) -> None:
    """charted() makes the panel's report from the figures: the same JSON as the whole report's with
    every other per-turn row dropped and the charted ones cut to their cost (keys in the same order)."""
    path = tmp_path / "r.cpsession"
    record(path)
    events, _ = load_recording_events(path)
    report = simulate_events(events, SimSettings(policies=["all"]), source=str(path), counter=TokenCounter())
    whole = report.to_json(per_turn=True)
    for name, pol in whole["policies"].items():
        if pol is None:
            continue
        if name in CHARTED:
            pol["per_turn"] = [{"cost_usd": row["cost_usd"]} for row in pol["per_turn"]]
        else:
            del pol["per_turn"]
    got = charted(report)
    assert set(CHARTED) <= {k for k, v in got["policies"].items() if v is not None}
    assert all(len(got["policies"][k]["per_turn"]) == report.simulated_turns for k in CHARTED)
    assert json.dumps(got) == json.dumps(whole)
