"""The console script's direct path for a plain `simulate` command line (inspector/simulate_argv.py)
reads exactly what typer would, and the program answers as under typer's dispatch (output, exit codes,
messages)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import typer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import inspector.cli as cli
import inspector.simulate_command as simulate_command
from inspector.simulate_argv import plain_simulate
from tests.support.console_script import ENTRIES, SCRIPT, program, run_program, typer_answer_once

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "demo_sessions" / "scout-anthropic.cpsession"
NAMES = (
    "files",
    "provider",
    "model",
    "window",
    "gate",
    "threshold",
    "prices",
    "policies",
    "policy",
    "no_calibrate",
    "as_json",
    "per_turn",
)

# Tokens typer reads its own way, or that a plain line never holds: signs, spaces and underscores in a
# number, "--", help, unknown options, flags given a value, an empty value, an undecodable byte.
ODD = [
    "-3",
    " 5",
    "5_0",
    "99999999999999999999",
    "",
    "-",
    "--",
    "--window",
    "--window=-1",
    "--window=",
    "--json=1",
    "--per-turn=yes",
    "--calibrate",
    "--help",
    "-h",
    "--bogus",
    "--gate",
    "--provider",
    "--prices=",
    "simulate",
    "surrogate\udcff.cpsession",
    "--threshold=-x",
]
FILES = ["a.cpsession", "dir/b c.cpsession", "é.cpsession", "5", "0"]
OPTIONS = [
    ["--window", "32000"],
    ["--window=007"],
    ["--window", "0"],
    ["--provider", "anthropic"],
    ["--provider=deepseek"],
    ["--model", "claude-sonnet-4"],
    ["--model=x y"],
    ["--gate", "reorder=off"],
    ["--gate=spill=on"],
    ["--threshold", "trim=0.5"],
    ["--threshold=compact=0.7"],
    ["--prices", "p.json"],
    ["--prices=dir/p q.json"],
    ["--policies", "all"],
    ["--policies=paper,wave1"],
    ["--policy", "wave1"],
    ["--policy=cost_aware:target=0.25"],
    ["--no-calibrate"],
    ["--json"],
    ["--per-turn"],
]


def _typer_reads(command: Any, argv: list[str], monkeypatch: pytest.MonkeyPatch) -> dict[str, Any] | None:
    """What typer's dispatch hands `simulate`, or None when it refuses the command line."""
    seen: dict[str, Any] = {}

    def run(*args: Any) -> None:
        seen.update(zip(NAMES, args, strict=True))

    monkeypatch.setattr(simulate_command, "run", run)
    try:
        command.main(args=argv, prog_name="cp-inspect", standalone_mode=False)
    except (Exception, SystemExit):  # a usage error, help (its exit), a refused value
        return None
    return seen or None


@pytest.fixture(scope="module")
def command() -> Any:
    return typer.main.get_command(cli.app)


@st.composite
def command_lines(draw: st.DrawFn) -> list[str]:
    """Mostly lines people type (files and options in any order, options now and then repeated), now
    and then with odd tokens."""
    parts = [[f] for f in draw(st.lists(st.sampled_from(FILES), min_size=1, max_size=3))]
    parts += draw(st.lists(st.sampled_from(OPTIONS), max_size=5))
    parts += [[t] for t in draw(st.lists(st.sampled_from(ODD), max_size=2))]
    order = draw(st.permutations(parts))
    return ["simulate", *(token for part in order for token in part)]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(command_lines())
def test_a_plain_command_line_reads_as_typer_reads_it(
    command: Any, monkeypatch: pytest.MonkeyPatch, argv: list[str]
) -> None:
    plain = plain_simulate(argv, {})
    if plain is not None:  # read directly only if typer reads the same values (and types)
        typer_read = _typer_reads(command, argv, monkeypatch)
        assert typer_read == plain
        assert {k: type(v) for k, v in typer_read.items()} == {k: type(v) for k, v in plain.items()}
        for key in ("files", "gate", "threshold"):
            assert [type(v) for v in typer_read[key] or ()] == [type(v) for v in plain[key] or ()]


@pytest.mark.parametrize(
    "argv",
    [
        ["simulate", "a.cpsession"],
        ["simulate", "a.cpsession", "b.cpsession", "--json", "--per-turn"],
        [
            "simulate",
            "--window",
            "32000",
            "a.cpsession",
            "--provider",
            "anthropic",
            "--model",
            "claude-sonnet-4",
        ],
        ["simulate", "a.cpsession", "--gate", "reorder=off", "--gate=spill=on", "--threshold", "trim=0.5"],
        ["simulate", "a.cpsession", "--policies", "all", "--prices", "p.json", "--no-calibrate"],
    ],
)
def test_the_lines_people_type_are_read_directly(
    command: Any, monkeypatch: pytest.MonkeyPatch, argv: list[str]
) -> None:
    plain = plain_simulate(argv, {})
    assert plain is not None and plain == _typer_reads(command, argv, monkeypatch)


@pytest.mark.parametrize(
    "argv",
    [
        ["simulate"],
        ["simulate", "--help"],
        ["simulate", "a", "--window", "-2"],
        ["simulate", "a", "--window", "1e3"],
        ["simulate", "a", "--model", "x", "--model", "y"],
        ["simulate", "a", "--json", "--json"],
        ["simulate", "--", "a"],
        ["simulate", "a", "--json=1"],
        ["simulate", "a", "--provider"],
        ["simulate", "a", "--provider", "--json"],
        ["replay", "a"],
        [],
    ],
)
def test_anything_else_is_left_to_typer(argv: list[str]) -> None:
    assert plain_simulate(argv, {}) is None


def test_shell_completion_is_left_to_typer() -> None:
    assert plain_simulate(["simulate", "a"], {"_CP_INSPECT_COMPLETE": "bash_complete"}) is None


# ---- the program as the console script runs it, against typer's dispatch of the same line ---------

# The modules are reported by an atexit callback (a `finally` would not run: a plain simulate that
# succeeded leaves without teardown unless something is registered to run at exit, entry.py).
RUN = program(modules=("pydantic", "inspector.cli", "typer", "asyncio"))


def _run(argv: list[str], entry: str, typer_dispatch: bool) -> subprocess.CompletedProcess[str]:
    return run_program(RUN, argv, entry=entry, typer_dispatch=typer_dispatch, cwd=ROOT)


@pytest.mark.parametrize("entry", ENTRIES)
@pytest.mark.parametrize(
    "argv",
    [
        ["simulate", "/no/such/file.cpsession"],
        ["simulate", str(DEMO), "--prices", "/no/such/prices.json"],
        ["simulate", str(DEMO), "--gate", "nosuchgate=off"],
        ["simulate", str(DEMO), "--window", "20000", "--json", "--per-turn"],
        [
            "simulate",
            str(DEMO),
            str(DEMO.with_name("scout-openai.cpsession")),
            "--policies",
            "paper,wave1",
            "--provider",
            "anthropic",
        ],
    ],
)
def test_the_console_script_answers_as_typer_does(argv: list[str], entry: str) -> None:
    direct = _run(argv, entry, typer_dispatch=False)
    typed = typer_answer_once(("simulate", *argv), lambda: _run(argv, entry, typer_dispatch=True))
    # The direct path never imports pydantic (typer's does, to coerce the arguments); the console script
    # does not import the typer app and its other commands either.
    *direct_err, direct_mods = direct.stderr.splitlines()
    *typed_err, typed_mods = typed.stderr.splitlines()
    assert "pydantic" not in json.loads(direct_mods) and "pydantic" in json.loads(typed_mods)
    if entry == SCRIPT != "inspector.cli:app":
        # Nor typer, unless the command fails (fail() prints and exits through it) or reads --gate; nor
        # asyncio (the engine imports it only for a pipeline with sources to bind).
        expected = [] if direct.returncode == 0 and "--gate" not in argv else ["typer"]
        assert json.loads(direct_mods) == expected
    assert (direct.returncode, direct_err) == (typed.returncode, typed_err)
    if "--json" in argv:
        # Equal apart from the measured elapsed time.
        a, b = json.loads(direct.stdout), json.loads(typed.stdout)
        a.pop("elapsed_s", None), b.pop("elapsed_s", None)
        assert a == b and direct.returncode == 0
    elif direct.returncode == 0:
        assert [ln for ln in direct.stdout.splitlines() if not ln.startswith("(")] == [
            ln for ln in typed.stdout.splitlines() if not ln.startswith("(")
        ]
    else:
        assert direct_err and direct.stdout == typed.stdout
