"""A prefix built over many calls is found run by run, each run compared for what it can share.

The cache simulator's prefix keys (engine/sim/cachesim.py, _extend_keys) are handed out in runs: a
call's new prefixes are one run, and an appending session's prefix is then one short run per call (its
new blocks; the reply's key is handed out between two calls' runs). Walking such a prefix again (a
clear_tool_uses call past its window sends it from an earlier point on) compared each run's rest with
the whole rest of the call: copying ~n hashes per run, ~n^2/2 for the call (~80 ms at 3,000 turns).
Each run is now compared over the stretch both can share."""

from __future__ import annotations

from engine.sim.cachesim import KeyTable, _chain, _extend_keys
from tests.support.counted_shas import walk_counted


def _appending_session(calls: int) -> tuple[KeyTable, list[str], list[int]]:
    """An appending session's table: each call sends the last one's blocks and two more, and a reply."""
    table = KeyTable()
    shas: list[str] = [f"system {i}" for i in range(8)]
    keys: list[int] = []
    for c in range(calls):
        shas += [f"assistant {c}", f"tool {c}"]
        keys = _extend_keys([0], list(shas), table)
        _chain(keys[-1], f"reply {c}", table)
    return table, shas, keys


def test_walking_many_short_runs_copies_each_hash_about_once() -> None:
    n_calls = 600
    table, shas, keys = _appending_session(n_calls)
    assert len(table.runs) >= n_calls  # one run a call: the reply's key lies between two calls' runs
    got, copied = walk_counted(shas, table)
    assert got == keys  # the same prefixes found again, no key handed out
    assert copied <= 4 * len(shas), copied  # old: ~n^2/4 = ~360,000
