"""The console script's direct path for a plain `replay` command line (inspector/replay_argv.py) reads
exactly what typer would, and the program behaves as under typer's dispatch (exit codes, messages)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import inspector.cli as cli
import inspector.replay_command as replay_command
from inspector.option_check import check_theme
from inspector.replay_argv import plain_replay
from tests.support.console_script import program, run_program

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "demo_sessions" / "scout-anthropic.cpsession"

# Tokens a command line is made of: plain ones, and the ones typer reads its own way (signs, spaces,
# underscores, "--", help, unknown or repeated options, an empty value, an undecodable byte).
TOKENS = ["a.cpsession", "dir/b c.cpsession", "é.cpsession", "replay", "5", "0", "007", "-3", " 5", "5_0",
          "99999999999999999999", "x", "", "-", "--", "--turn", "--turn=12", "--turn=-1", "--turn=", "--follow",
          "--no-follow", "--follow=1", "--theme", "--theme=light", "dark", "--help", "-h", "--bogus",
          "surrogate\udcff.cpsession"]


class _Terminal:
    """A stdin that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def _typer_reads(command: Any, argv: list[str], monkeypatch: pytest.MonkeyPatch) -> dict[str, Any] | None:
    """What typer's dispatch hands `replay`, or None when it refuses the command line."""
    seen: dict[str, Any] = {}

    class Opened:
        return_code = None  # as an app that ended cleanly

        def run(self) -> None:
            pass

    def recording(file: Path, turn: int | None = None, follow: bool = False, theme: str | None = None) -> Opened:
        seen.update(file=file, turn=turn, follow=follow, theme=theme)
        return Opened()

    monkeypatch.setattr(replay_command, "replay_app", recording)
    monkeypatch.setattr(sys, "stdin", _Terminal())  # replay refuses a stdin that is no terminal; no key is read
    try:
        command.main(args=argv, prog_name="cp-inspect", standalone_mode=False)
    except (Exception, SystemExit):  # a usage error, help (its exit), a refused value
        return None
    return seen or None


@pytest.fixture(scope="module")
def command() -> Any:
    return typer.main.get_command(cli.app)


PLAIN = ["a.cpsession", "dir/b c.cpsession", "é.cpsession"]
OPTIONS = [["--turn", "5"], ["--turn=12"], ["--turn", "007"], ["--follow"], ["--no-follow"], ["--theme", "dark"],
           ["--theme=light"]]


@st.composite
def command_lines(draw: st.DrawFn) -> list[str]:
    """Mostly lines people type (a file and a few options in any order), now and then with odd tokens."""
    parts = [[draw(st.sampled_from(PLAIN))], *draw(st.lists(st.sampled_from(OPTIONS), max_size=3))]
    parts += [[t] for t in draw(st.lists(st.sampled_from(TOKENS), max_size=2))]
    order = draw(st.permutations(parts))
    return ["replay", *(token for part in order for token in part)]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(command_lines())
def test_a_plain_command_line_reads_as_typer_reads_it(command: Any, monkeypatch: pytest.MonkeyPatch,
                                                      argv: list[str]) -> None:
    plain = plain_replay(argv, {})
    if plain is not None:  # read directly only if typer reads the same values (and types)
        typer_read = _typer_reads(command, argv, monkeypatch)
        if typer_read is None and plain["theme"] is not None:
            # typer's --theme callback refused the name (e.g. `--theme a.cpsession`); the plain path hands
            # it to replay_app, whose first step is the same check (option_check.check_theme): exit 2 with
            # the same message either way.
            with pytest.raises(typer.Exit) as refused:
                check_theme(plain["theme"])
            assert refused.value.exit_code == 2
            return
        assert typer_read == plain
        assert {k: type(v) for k, v in typer_read.items()} == {k: type(v) for k, v in plain.items()}


@pytest.mark.parametrize("argv", [
    ["replay", "a.cpsession"],
    ["replay", "--turn", "12", "a.cpsession", "--follow"],
    ["replay", "a.cpsession", "--turn=0", "--theme", "light", "--no-follow"],
])
def test_the_lines_people_type_are_read_directly(command: Any, monkeypatch: pytest.MonkeyPatch,
                                                 argv: list[str]) -> None:
    plain = plain_replay(argv, {})
    assert plain is not None and plain == _typer_reads(command, argv, monkeypatch)


@pytest.mark.parametrize("argv", [
    ["replay"], ["replay", "--help"], ["replay", "a", "b"], ["replay", "a", "--turn", "-2"],
    ["replay", "a", "--turn", "1", "--turn", "2"], ["replay", "--", "a"], ["explain", "a"], [],
])
def test_anything_else_is_left_to_typer(argv: list[str]) -> None:
    assert plain_replay(argv, {}) is None


def test_shell_completion_is_left_to_typer() -> None:
    assert plain_replay(["replay", "a"], {"_CP_INSPECT_COMPLETE": "bash_complete"}) is None


# ---- the program as the console script runs it, against typer's dispatch of the same line ---------

RUN = program(r'''
import inspector.replay_command as replay_command
if "--open" in sys.argv:  # a recording that opens: the app is not run, its arguments are printed
    sys.argv.remove("--open")
    sys.stdin.isatty = lambda: True  # replay refuses a stdin that is no terminal; this run reads no keys
    class Opened:
        return_code = None  # as an app that ended cleanly
        def run(self):
            mods = [m for m in ("pydantic", "typer", "textual.app") if m in sys.modules]
            print(json.dumps({"args": [str(a) for a in self.args], "modules": mods}))
    def replay_app(*args):
        o = Opened(); o.args = args; return o
    replay_command.replay_app = replay_app
''')


def _run(argv: list[str], typer_dispatch: bool) -> subprocess.CompletedProcess[str]:
    return run_program(RUN, argv, typer_dispatch=typer_dispatch, timeout=120)


@pytest.mark.parametrize("argv", [
    ["replay", "/no/such/file.cpsession"],
    ["replay", str(DEMO), "--turn", "999999"],
    ["replay", str(DEMO), "--turn", "3", "--open"],
])
def test_the_console_script_answers_as_typer_does(argv: list[str]) -> None:
    direct, typed = _run(argv, typer_dispatch=False), _run(argv, typer_dispatch=True)
    assert (direct.returncode, direct.stderr) == (typed.returncode, typed.stderr)
    if argv[-1] == "--open":
        shown, typer_shown = json.loads(direct.stdout), json.loads(typed.stdout)
        assert shown["args"] == typer_shown["args"] == [str(DEMO), "3", "False", "None"]
        # The direct path imports neither typer nor pydantic (typer's dispatch coerces the arguments
        # through pydantic).
        assert "typer" not in shown["modules"] and "pydantic" not in shown["modules"]
        assert "pydantic" in typer_shown["modules"]
    else:
        assert direct.returncode != 0 and direct.stderr.startswith("cp-inspect: ")
