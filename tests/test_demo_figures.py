"""`cp-inspect demo` prints the same figures on every clone and every day: its tools answer from the
corpus the project ships (the outputs recorded in demo_sessions/scout-anthropic.cpsession), not from
the working tree, whose growth (a grep of every `def`, files read whole) moved every figure of the demo
from one commit to the next and made a clone's demo differ from the README's and the recordings'."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from engine.recording.cpsession import RecordingReader
from inspector.demo_agent import CORPUS, HUGE_TURN, SCRIPT, load_corpus, run_tool

ROOT = Path(__file__).resolve().parent.parent
TURNS = 40


def _demo(cwd: Path, record: Path) -> list[str]:
    """`cp-inspect demo --no-tui` as a user runs it, from `cwd`: its per-turn lines."""
    code = "import sys; sys.argv[0] = 'cp-inspect'; from inspector.entry import main; main()"
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            code,
            "demo",
            "--no-tui",
            "--turns",
            str(TURNS),
            "--delay",
            "0",
            "--record",
            str(record),
        ],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdin=subprocess.DEVNULL,
        timeout=180,
    )
    assert out.returncode == 0, out.stderr
    return [line for line in out.stdout.splitlines() if line.startswith("turn ")]


def _figures(path: Path) -> list[tuple[object, ...]]:
    """Each turn's request hash, tokens and tier, and the usage the cache simulator gave it."""
    got: list[tuple[object, ...]] = []
    with RecordingReader.open(path) as r:
        for ev in r.events():
            if ev.get("k") == "request":
                got.append(("request", ev["turn"], ev["sha"]))
            elif ev.get("k") == "usage":
                got.append(("usage", ev["turn"], sorted(ev["usage"].items())))
            elif ev.get("k") == "turn":
                got.append(("turn", ev["turn"], ev["trace"]["final_tokens"], ev["trace"]["tier"]))
    return got


def test_two_runs_print_the_same_figures_as_the_shipped_recording(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    first = _demo(ROOT, tmp_path / "a.cpsession")
    second = _demo(tmp_path / "elsewhere", tmp_path / "b.cpsession")
    assert len(first) == TURNS and first == second
    # And the figures are the shipped recording's, request by request: the tree they came from is gone
    # from today's repository (its grep of every `def` alone has grown several times over).
    shipped = _figures(ROOT / "demo_sessions" / "scout-anthropic.cpsession")
    assert _figures(tmp_path / "a.cpsession") == shipped
    assert "tier=AggressivePrune" in "\n".join(first) and "compact_history" in "\n".join(first)


def test_every_scripted_call_is_answered_from_the_corpus() -> None:
    corpus = load_corpus(CORPUS)
    for t, (_, tool, args) in enumerate(SCRIPT):
        out = run_tool(tool, args, writable=t > 15, corpus=corpus)
        assert not out.startswith("error:") or tool == "edit_file", (t, tool, args, out)
    # The doubled output of HUGE_TURN is doubled by the agent, not twice by the corpus.
    _, tool, args = SCRIPT[HUGE_TURN]
    assert run_tool(tool, args, False, corpus).startswith('"""Shared serialization machinery')
    assert len(run_tool(tool, args, False, corpus)) == 23_036
