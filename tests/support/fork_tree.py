"""A parent agent's recorded run that forks two recorded sub-agents (engine.Pipeline.fork with record=PATH),
for the tests of what reads forked runs: the simulator's pricing (test_fork.py, test_sim_cli_audit.py) and
the `forks` command's two paths (test_cli_argv.py). Needs no provider SDK: the engine builds the requests and
the usage is made up, so nothing is sent."""

from __future__ import annotations

from pathlib import Path

from engine import Pipeline

PARAMS = {"type": "object", "properties": {"cmd": {"type": "string"}}}


def parent_pipeline(provider: str, record: Path | None = None) -> Pipeline:
    clock = iter(range(0, 1_000_000, 3))
    model = "claude-sonnet-4" if provider == "anthropic" else "gpt-4o"
    p = Pipeline(model, provider=provider, window=200_000, record=record, clock=lambda: next(clock))
    p.identity("You are a careful coding agent. Read before you edit; run the tests after. " * 60)
    p.constraints("Never push to main.")
    p.add_tool("bash", "Run a shell command", PARAMS)
    p.add_tool("read_file", "Read a file", PARAMS)
    p.latch("permissions", "read-only")
    p.goal("Make tests/test_io.py pass.")
    p.user("The test fails with a KeyError.")
    return p


def run_tree(tmp_path: Path, provider: str) -> tuple[Path, list[Path]]:
    """The parent's recording in `tmp_path` and its children's (forked at turns 1 and 3, three turns each)."""
    p = parent_pipeline(provider, tmp_path / "parent.cpsession")
    kids = []
    for t in range(5):
        req = p.next_request()
        p.record_usage({"input_tokens": req.trace["final_tokens"], "output_tokens": 20})
        calls = p.assistant(f"step {t}", tool_calls=[{"id": f"c{t}", "name": "bash", "arguments": "{}"}])
        p.tool_result(calls[0].id, "output\n" * 40)
        if t in (1, 3):
            path = tmp_path / f"child{t}.cpsession"
            child = p.fork(f"subtask {t}", record=path)
            for k in range(3):
                cr = child.next_request()
                child.record_usage({"input_tokens": cr.trace["final_tokens"], "output_tokens": 20})
                cc = child.assistant(f"k{k}", tool_calls=[{"id": f"d{k}", "name": "bash", "arguments": "{}"}])
                child.tool_result(cc[0].id, "o\n" * 10)
            child.close()
            kids.append(path)
    p.close()
    return tmp_path / "parent.cpsession", kids
