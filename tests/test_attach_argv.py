"""`cp-inspect attach PID [--theme NAME]` as the console script runs it: read without typer's dispatch.

Typer builds every command and imports pydantic to coerce the arguments of the one it runs: ~140 ms of
the ~0.95 s CPU an attach to a 30,000-turn agent spent before its first frame, and importing the
command modules ~50 ms more. The console script runs a plain attach command line itself
(inspector/attach_command.py); these tests hold that it reads what typer reads, leaves everything else
to typer, and answers as typer's dispatch does (exit codes and messages), on a real agent's probe.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from inspector.attach_command import plain_attach
from tests.support.console_script import program, run_program
from tests.support.probe_agent import run_turns, serving_pipeline


@pytest.mark.parametrize(
    ("argv", "want"),
    [
        (["attach", "4242"], ("4242", None)),
        (["attach", "4242.3"], ("4242.3", None)),
        (["attach", "4242", "--theme", "light"], ("4242", "light")),
        (["attach", "--theme=dark", "4242"], ("4242", "dark")),
        (["attach", "abc"], ("abc", None)),  # attach itself says it is no pid
    ],
)
def test_the_lines_people_type_are_read_directly(argv: list[str], want: tuple[str, str | None]) -> None:
    assert plain_attach(argv, {}) == want


@pytest.mark.parametrize(
    "argv",
    [
        ["attach"],
        ["attach", "--help"],
        ["attach", "4242", "--record", "x.cpsession"],
        ["attach", "4242", "4243"],
        ["attach", "4242", "--theme"],
        ["attach", "4242", "--theme", "a", "--theme", "b"],
        ["attach", "-5"],
        ["attach", "--", "4242"],
        ["attach", "42\0"],
        ["replay", "4242"],
        [],
    ],
)
def test_anything_else_is_left_to_typer(argv: list[str]) -> None:
    assert plain_attach(argv, {}) is None


def test_shell_completion_is_left_to_typer() -> None:
    assert plain_attach(["attach", "4242"], {"_CP_INSPECT_COMPLETE": "bash_complete"}) is None


RUN = program(r"""
import inspector.app_exit as app_exit
if "--open" in sys.argv:  # an agent that answers: the app is built, not run; what it holds is printed
    sys.argv.remove("--open")
    sys.stdin.isatty = lambda: True  # attach refuses a stdin that is no terminal; this run reads no keys
    def run_app(app):
        mods = [m for m in ("pydantic", "typer", "textual.app") if m in sys.modules]
        turns = app.source.load_initial()
        print(json.dumps({"turns": [t["turn"] for t in turns], "theme": app.theme, "modules": mods}))
        app.source.close()
    app_exit.run_app = run_app
""")


def _run(argv: list[str], typer_dispatch: bool) -> subprocess.CompletedProcess[str]:
    return run_program(RUN, argv, typer_dispatch=typer_dispatch, timeout=120, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize(
    "argv",
    [
        ["attach", "abc"],  # not a pid: exit 2
        ["attach", "999999999"],  # no such agent: exit 1
        ["attach", "{pid}"],  # an agent that serves, but stdin is no terminal: exit 2
        ["attach", "{pid}", "--open"],  # an agent that serves: the newest turn and the rest's stand-ins
        ["attach", "{pid}", "--theme", "light", "--open"],
    ],
)
def test_the_console_script_answers_as_typer_does(
    argv: list[str], monkeypatch: pytest.MonkeyPatch, rtdir: Path
) -> None:
    pipe = serving_pipeline(monkeypatch, rtdir)  # a real agent serving its probe over a Unix socket
    try:
        run_turns(pipe, range(6))
        argv = [a.format(pid=os.getpid()) for a in argv]
        direct, typed = _run(argv, typer_dispatch=False), _run(argv, typer_dispatch=True)
        assert (direct.returncode, direct.stderr) == (typed.returncode, typed.stderr), (direct, typed)
        if argv[-1] == "--open":
            shown, typer_shown = json.loads(direct.stdout), json.loads(typed.stdout)
            assert shown["turns"] == typer_shown["turns"] == list(range(6))
            assert shown["theme"] == typer_shown["theme"]
            assert ("light" in shown["theme"]) == ("light" in argv), shown["theme"]
            # The direct path imports neither typer nor pydantic.
            assert "typer" not in shown["modules"] and "pydantic" not in shown["modules"], shown
            assert "typer" in typer_shown["modules"]
        else:
            assert direct.returncode in (1, 2) and direct.stderr.startswith("cp-inspect: "), direct.stderr
    finally:
        pipe.close()
