"""The program as the `cp-inspect` console script runs it, and typer's own dispatch of the same command
line, each in a fresh process: what the tests of the console script's typer-free paths compare
(test_replay_argv.py, test_attach_argv.py, test_simulate_argv.py, test_cli_argv.py).

The child is `python -c PROGRAM ARGV_JSON ENTRY`: it sets sys.argv, runs the test's `prelude` (patches:
an app that is not run, a stdin that says it is a terminal), then, with "--typer" among the arguments
(removed), typer's dispatch (`inspector.cli.app(argv)`, which takes no shortcut), else the entry point
ENTRY (MODULE:FUNCTION) as the console script calls it."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parents[2]

# The console script's entry point as pyproject.toml names it (what `cp-inspect` runs), and the typer app
# itself (`python -m inspector.cli`, a console script installed before entry.py existed).
SCRIPT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]["cp-inspect"]
ENTRIES = sorted({SCRIPT, "inspector.cli:app"})
T = TypeVar("T")

_PROGRAM = r"""
import atexit, importlib, json, sys
module, _, name = sys.argv[2].partition(":")
sys.argv = ["cp-inspect", *json.loads(sys.argv[1])]
%s
if "--typer" in sys.argv:  # typer's own dispatch of the same line
    sys.argv.remove("--typer")
    import inspector.cli as cli
    cli.app(sys.argv[1:], prog_name="cp-inspect")
getattr(importlib.import_module(module), name)()  # the console script
"""


def program(prelude: str = "", modules: tuple[str, ...] = ()) -> str:
    """The child's program: `prelude` (Python, at the top level, after sys.argv is set) and, with
    `modules`, an atexit callback that prints as stderr's last line a JSON list of those of `modules`
    imported by then (after the command's own output; a `finally` would not run where a command leaves
    without teardown)."""
    report = ""
    if modules:
        report = (
            f"atexit.register(lambda: print(json.dumps(sorted(m for m in {modules!r} if m in sys.modules)), "
            "file=sys.stderr))\n"
        )
    return _PROGRAM % (report + prelude)


def run_program(
    code: str, argv: list[str], *, typer_dispatch: bool, entry: str = SCRIPT, **kwargs: Any
) -> subprocess.CompletedProcess[str]:
    """Run `code` (from program()) on `argv`, through typer's dispatch or the entry point; `kwargs` go to
    subprocess.run (cwd, input, stdin, timeout), `env` merged into this environment with the project
    first on the path."""
    return start_program(code, argv, typer_dispatch=typer_dispatch, entry=entry, **kwargs)()


def start_program(
    code: str, argv: list[str], *, typer_dispatch: bool, entry: str = SCRIPT, **kwargs: Any
) -> Callable[[], subprocess.CompletedProcess[str]]:
    """run_program's child started now, and a function that waits for it (its `input` written then) and
    gives what run_program gives. A test comparing two children runs them side by side: on an idle second
    core the pair takes the longer one's time, not the sum (the suite itself runs on one)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), **kwargs.pop("env", {}))
    args = [*argv, "--typer"] if typer_dispatch else argv
    timeout = kwargs.pop("timeout", 300)
    text_in = kwargs.pop("input", None)
    if text_in is not None:
        kwargs["stdin"] = subprocess.PIPE
    cmd = [sys.executable, "-c", code, json.dumps(args), entry]
    child = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, **kwargs
    )

    def finish() -> subprocess.CompletedProcess[str]:
        with child:  # as subprocess.run: killed and reaped if the wait times out
            try:
                out, err = child.communicate(text_in, timeout=timeout)
            except subprocess.TimeoutExpired:
                child.kill()
                child.communicate()
                raise
        return subprocess.CompletedProcess(cmd, child.returncode, out, err)

    return finish


# typer's own dispatch (`--typer`) never reaches the entry point (the child runs cli.app, which exits),
# so its answer to a command line is the same under each of ENTRIES. The tests that compare each entry's
# direct answer with it make it once a line (in the first test that asks, in that test's directory), not
# again for the second entry (a quarter of test_cli_argv's ~560 child processes).
_TYPER_ANSWERS: dict[tuple[Any, ...], Any] = {}


def typer_answer_once(key: tuple[Any, ...], make: Callable[[], T]) -> T:
    """typer's answer to the command line `key` names (the line and whatever else its run reads), made
    by `make()` the first time it is asked for."""
    if key not in _TYPER_ANSWERS:
        _TYPER_ANSWERS[key] = make()
    return _TYPER_ANSWERS[key]  # type: ignore[no-any-return]


def run_cp_inspect(*argv: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """`cp-inspect ARGV` as a user runs it: the console script's entry point in a fresh process, with no
    stdin unless `input` is given (a command that would read a terminal reads none). `kwargs` go to
    run_program (`env` merged into this environment, e.g. COLUMNS; `timeout`, 300 s by default)."""
    if "input" not in kwargs:
        kwargs.setdefault("stdin", subprocess.DEVNULL)
    return run_program(program(), list(argv), typer_dispatch=False, **kwargs)


def typer_in_process(
    argv: list[str], *, cwd: Path, env: dict[str, str] | None = None, input: str | None = None
) -> subprocess.CompletedProcess[str]:
    """typer's dispatch of `argv` run in this process, as run_program's child with `--typer` runs it
    (`inspector.cli.app(argv, prog_name="cp-inspect")`, sys.argv set), in `cwd` with `env` added, `input`
    on its stdin (an empty one without), and what it wrote to stdout and stderr read back as
    subprocess.run(text=True) reads a child's (UTF-8, universal newlines), with its exit status as the
    interpreter would make it of the SystemExit.

    For the reference side of a comparison: typer's answer to a line. A child process for it cost the
    import of typer, pydantic and every command (~0.1-0.2 s of CPU a line, ~1/3 of test_cli_argv's CPU)
    and tells nothing more (typer's path is not what those tests check the imports of); the side under
    test, the console script's direct path, stays a child process of its own. Everything a command
    reads of the process (the streams, sys.argv, the directory, the environment) is put back after."""
    import inspector.cli as cli

    saved = (sys.stdin, sys.stdout, sys.stderr, sys.argv, os.getcwd(), os.environ.copy())
    out, err = io.BytesIO(), io.BytesIO()
    streams = (  # (held here: a wrapper let go closes its buffer)
        io.TextIOWrapper(io.BytesIO((input or "").encode()), encoding="utf-8"),
        io.TextIOWrapper(out, encoding="utf-8", write_through=True),
        io.TextIOWrapper(err, encoding="utf-8", write_through=True),
    )
    sys.stdin, sys.stdout, sys.stderr = streams
    sys.argv = ["cp-inspect", *argv]
    os.chdir(cwd)
    os.environ.update(env or {})
    try:
        cli.app(argv, prog_name="cp-inspect")
        code = 0  # (typer's app always exits; a return is a success)
    except SystemExit as exc:  # as the interpreter makes an exit status of it
        if exc.code is None or isinstance(exc.code, int):
            code = exc.code or 0
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    finally:
        streams[1].flush()
        streams[2].flush()
        sys.stdin, sys.stdout, sys.stderr, sys.argv = saved[:4]
        os.chdir(saved[4])
        os.environ.clear()
        os.environ.update(saved[5])

    def text(data: bytes) -> str:  # as subprocess.run(text=True) decodes a child's output
        return data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")

    return subprocess.CompletedProcess(["cp-inspect", *argv], code, text(out.getvalue()), text(err.getvalue()))
