"""benchmarks/bench_cold_touch.py prices a cold turn's distinct code by running the same bytecodes over
one copy of the code or two. Its figures mean that only if the copies are what it says: distinct code
objects (and, for the engine, distinct modules and classes) that run the very same bytecodes and give
the very same answers, with the process's engine left as it was."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import bench_cold_touch as bct  # noqa: E402


def test_the_generated_functions_are_distinct_code_with_the_same_bytecode() -> None:
    fns = [bct.make(k, 4) for k in range(3)]
    codes = [f.__code__ for f in fns]
    assert len({id(c) for c in codes}) == 3
    assert len({c.co_code for c in codes}) == 1 and codes[0].co_filename != codes[1].co_filename
    s = bct.State(3)
    assert len({f(s) for f in fns}) == 1
    assert bct.run(fns, [s] * 3) == 3 * fns[0](s)


# Run in a child: importing the engine a second time in the test process could leave something of the
# second copy (a module a later test imports lazily) where the rest of the suite would meet it.
CHILD = """
import sys
sys.path.insert(0, "benchmarks")
import bench_cold_touch as bct
import bench_engine as be1
import engine.pipeline as pipeline1
from engine.tokens import CharTokenizer, TokenCounter
from tests.turn_session import coding_task, tool_round

def requests(cls):
    pipe = coding_task(cls("claude-sonnet-4-5", "anthropic", 6000, counter=TokenCounter(CharTokenizer()),
                           serve=False, clock=lambda: 0.0))
    out = []
    for t in range(12):
        out.append(pipe.next_request().bytes)
        pipe.record_usage({"input_tokens": 900 + t, "output_tokens": 40})
        tool_round(pipe, t, f"output of step {t}\\n" * (5 + t % 7))
    pipe.close()
    return out


be2 = bct.second_engine()
two = be2.Pipeline
assert two is not be1.Pipeline and two.__module__ == "engine.pipeline"
assert two.next_request.__code__ is not be1.Pipeline.next_request.__code__
# The process's engine is the first copy still: the second was imported aside and put away.
assert sys.modules["engine.pipeline"] is pipeline1 and sys.modules["bench_engine"] is be1
got = requests(two)
assert got == requests(pipeline1.Pipeline) and len(set(got)) == 12
print("same requests")
"""


def test_the_second_engine_is_another_copy_that_sends_the_same_requests() -> None:
    import os
    import subprocess

    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=str(root))
    out = subprocess.run(
        [sys.executable, "-c", CHILD], cwd=root, env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "same requests"
