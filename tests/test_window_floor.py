"""A window or budget too small for what the engine never evicts (the instructions, the goal, the newest
round) is said, with the least window that holds it: `simulate --window 10` and `explain --budget 10`
printed their figures with no word of it. Exit 0 (the command did what was asked); --json carries the
number as a field. Each window the commands name is checked by running the command again at it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from tests.support.console_script import run_cp_inspect

ROOT = Path(__file__).resolve().parent.parent
DEMO = str(ROOT / "demo_sessions" / "scout-anthropic.cpsession")


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    """The console script as a user runs it (explain's and simulate's plain lines skip typer: entry.py),
    on a terminal wide enough that no table is split."""
    return run_cp_inspect(*args, env={"COLUMNS": "400"})


def _json(*args: str) -> dict[str, Any]:
    out = _cli(*args, "--json")
    assert out.returncode == 0, out.stderr
    doc: dict[str, Any] = json.loads(out.stdout)
    return doc


def test_explain_says_the_floor_and_the_least_budget_that_holds_it() -> None:
    text = _cli("explain", DEMO, "--turn", "3", "--budget", "10")
    assert text.returncode == 0, text.stderr
    line = next(x for x in text.stdout.splitlines() if "over the ceiling" in x)
    doc = _json("explain", DEMO, "--turn", "3", "--budget", "10")
    floor = doc["over_ceiling"]
    assert floor["needs"] == doc["final_tokens"] > floor["ceiling"]
    # Instructions and the goal are what is kept; every kept section's tokens are in the request.
    assert {"identity", "goal"} <= set(floor["never_evicted"])
    assert sum(floor["never_evicted"].values()) <= floor["needs"]
    least = floor["least_window"]
    assert f"at least {least} (--budget {least})" in line
    # The window it names holds the request; one token less does not.
    assert "over_ceiling" not in _json("explain", DEMO, "--turn", "3", "--budget", str(least))
    below = _json("explain", DEMO, "--turn", "3", "--budget", str(least - 1))
    assert below["over_ceiling"]["least_window"] == least


def test_explain_within_the_window_says_nothing_of_it() -> None:
    doc = _json("explain", DEMO, "--turn", "3")
    assert "over_ceiling" not in doc
    assert "over the ceiling" not in _cli("explain", DEMO, "--turn", "3").stdout


def test_simulate_says_the_least_window_that_holds_every_engine_request() -> None:
    text = _cli("simulate", DEMO, "--window", "10")
    assert text.returncode == 0, text.stderr
    doc = _json("simulate", DEMO, "--window", "10")
    least = doc["least_window"]
    assert least > 10
    assert f"give --window {least:,} or more" in text.stdout
    assert any(f"still need up to {least:,} tokens" in n for n in doc["notes"])
    # At that window no request of the engine's columns is larger than it; one less, some are.
    at = _json("simulate", DEMO, "--window", str(least), "--per-turn")
    assert "least_window" not in at
    for col in ("pipeline", "gates_closed"):
        assert max(t["prompt_tokens"] for t in at["policies"][col]["per_turn"]) <= least
    assert _json("simulate", DEMO, "--window", str(least - 1))["least_window"] == least
