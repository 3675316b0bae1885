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
