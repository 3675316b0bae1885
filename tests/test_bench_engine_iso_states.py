"""bench_engine.py --iso (benchmarks/engine_iso.py) asks each subject's processes for every repeat warm and cold (issue 12's like-for-like
figure as an agent's user meets it: a model call between turns leaves the caches cold). `alternate` must
route each ask to the children and keep each ask's figures apart, per turn the minimum over repeats, with
the asks' order reversed every other round; with one ask it keys by name as --ab reads it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import engine_iso as be  # noqa: E402  (bench_engine's --ab and --iso)

# A child as --iso-child answers: one JSON line per line read. It reports the ask it got as a figure
# (warm 1.0, cold 5.0, go 9.0) plus its place in the order of asks it has been given (0, 1, 2, ...), and
# that place negated (its minimum: the last place an ask had), so the per-turn minimum and the order can
# both be checked.
CHILD = """
import json, sys
seen = 0
for line in sys.stdin:
    base = {"warm": 1.0, "cold": 5.0, "go": 9.0}[line.strip()]
    print(json.dumps({"t": [base + seen, base], "order": [seen], "last": [-seen]}), flush=True)
    seen += 1
"""


def kids(names: list[str]) -> list[tuple[str, Any]]:
    return [
        (
            n,
            subprocess.Popen(
                [sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
            ),
        )
        for n in names
    ]


def test_each_ask_is_kept_apart_with_its_minimum_per_turn() -> None:
    best = be.alternate(kids(["engine", "memo"]), 3, ("warm", "cold"))
    assert set(best) == {"engine warm", "engine cold", "memo warm", "memo cold"}
    for name in ("engine", "memo"):
        # Round 0 asks warm then cold (places 0, 1); round 1 cold then warm (2, 3); round 2 warm, cold.
        assert best[f"{name} warm"] == {"t": [1.0, 1.0], "order": [0.0], "last": [-4.0]}
        assert best[f"{name} cold"] == {"t": [5.0 + 1, 5.0], "order": [1.0], "last": [-5.0]}


def test_the_asks_order_is_reversed_every_other_round() -> None:
    # Two rounds: warm is asked first in round 0 (place 0) and second in round 1 (place 3), cold second
    # then first (1, 2). Not reversed, warm's last place would be 2 and cold's 3.
    best = be.alternate(kids(["engine"]), 2, ("warm", "cold"))
    assert {k: (v["order"], v["last"]) for k, v in best.items()} == {
        "engine warm": ([0.0], [-3.0]),
        "engine cold": ([1.0], [-2.0]),
    }
    best = be.alternate(kids(["engine"]), 1, ("cold", "warm"))
    assert {k: v["order"] for k, v in best.items()} == {"engine cold": [0.0], "engine warm": [1.0]}


def test_one_ask_keys_by_name_as_ab_reads_it() -> None:
    best = be.alternate(kids(["base", "new", "base"]), 2)
    assert set(best) == {"base", "new"}
    assert best["new"]["t"] == [9.0, 9.0]
    assert json.loads(json.dumps(best))  # plain lists of floats
