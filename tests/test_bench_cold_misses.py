"""benchmarks/bench_cold_misses.py reads callgrind's output: the totals of the collected region, and each
library's own share of them. Checked on a real callgrind run (valgrind installed) of a region that
encodes JSON and hashes: the shares add up to the totals (a call's inclusive cost, which callgrind writes
after each `calls=` line, is not counted again in its caller's library), and the region's work lands in
the libraries that do it."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_cold_misses as bcm  # noqa: E402

REGION = (
    "import functools, hashlib, json\n"
    "functools.reduce(lambda a, g: g(), [lambda: (json.dumps({'a': list(range(3000))}),"
    " hashlib.sha256(b'x' * 50000).hexdigest())], None)\n"
    "json.dumps(list(range(200000)))\n"  # outside the region: not collected
)


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
def test_by_object_splits_the_collected_totals_among_libraries(tmp_path: Path) -> None:
    out = tmp_path / "run.callgrind"
    subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            "--cache-sim=yes",
            "--I1=65536,8,64",
            "--D1=49152,12,64",
            "--LL=2097152,16,64",
            "--collect-atstart=no",
            "--toggle-collect=functools_reduce",
            f"--callgrind-out-file={out}",
            sys.executable,
            "-S",
            "-c",
            REGION,
        ],  # fmt: skip
        check=True,
        capture_output=True,
    )
    text = out.read_text()
    totals = bcm.totals(text)
    assert set(totals) == set(bcm.EVENTS)
    assert totals["Ir"] > 0 and totals["ILmr"] + totals["DLmr"] > 0
    objects = bcm.by_object(text)
    for ev in bcm.EVENTS:
        assert sum(o[ev] for o in objects.values()) == totals[ev], ev
    libs = {name.split(".")[0] for name in objects}
    assert {"_json", "libcrypto"} <= libs, libs  # the encoder's and the hash's own code
    # The 50 kB hashed costs far more instructions than the region's setup in libpython's own code.
    crypto = sum(o["Ir"] for name, o in objects.items() if name.startswith("libcrypto"))
    assert crypto > totals["Ir"] / 10
    # Outside the region nothing was collected: the 200,000-number encoding after it would dwarf it.
    enc = sum(o["Ir"] for name, o in objects.items() if name.startswith("_json"))
    assert enc < crypto


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_steps_wraps_the_lane_steps_and_leaves_the_requests_as_they_were(
    provider: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--steps replaces each express-lane step it names (STEPS) by a wrapper that runs it inside the
    collected region while a steady turn's next_request runs: every step still exists where STEPS says
    (a rename would leave the benchmark counting nothing), a steady lane turn passes through the main
    ones in the lane's order, none is counted twice inside another, and the requests are byte for byte
    those of the same session without the wrappers."""
    from tests.test_express import _round, _steady_pipe

    def bodies(steps: bcm._StepRegions | None) -> tuple[list[bytes], list[list[str]]]:
        pipe = _steady_pipe(provider)
        got: list[bytes] = []
        seen: list[list[str]] = []
        real = pipe.next_request

        def next_request(explain_only: bool = False) -> Any:
            if steps is None:
                req = real(explain_only)
            else:
                steps.labels = []
                steps.on = True
                try:
                    req = real(explain_only)
                finally:
                    steps.on = False
                seen.append(steps.labels)
            got.append(req.serialized.body)  # (the wire bytes)
            return req

        pipe.next_request = next_request  # type: ignore[method-assign]  # (this pipeline's only)
        try:
            for t in range(14):
                _round(pipe, t)
        finally:
            pipe.close()
        return got, seen

    import importlib

    for mod_name, owner, attr, _label in bcm.STEPS:
        holder = importlib.import_module(mod_name)
        if owner:
            holder = getattr(holder, owner)
        assert hasattr(holder, attr), (mod_name, owner, attr)
    plain, _ = bodies(None)
    steps = bcm._StepRegions(monkeypatch.setattr)
    wrapped, seen = bodies(steps)
    assert wrapped == plain
    last = seen[-1]  # a steady lane turn
    main = ["appended since", "count new (history)", "request spliced", "record made", "request event"]
    assert [x for x in last if x in main] == main, last
    assert "turn closed" in last and len(set(last)) == len(last), last
