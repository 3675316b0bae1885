"""A command run without a required argument or option, or with an option that is not given its value:
one `cp-inspect:` line naming what is missing and what to write, exit 2 (the code typer gives), never
typer's usage block ("Usage: ... Try '... --help' for help. Error: Missing argument 'target'.")."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import typer.main
from typer.core import TyperGroup
from typer.testing import CliRunner

from inspector.cli import app

runner = CliRunner()


def _is_option(param: Any) -> bool:
    return getattr(param, "param_type_name", "") == "option"


def _commands() -> Iterator[tuple[list[str], Any]]:
    """(words, command) of every command, subcommands of `ctx` included."""
    root = typer.main.get_command(app)

    def walk(group: Any, words: list[str]) -> Iterator[tuple[list[str], Any]]:
        for name, cmd in group.commands.items():
            if isinstance(cmd, TyperGroup):
                yield from walk(cmd, [*words, name])
            else:
                yield [*words, name], cmd

    yield from walk(root, [])


def _cases() -> Iterator[tuple[list[str], str]]:
    """For each required parameter of each command: the command line giving every other required one
    (arguments only up to the missing one: they are positional), and how the line names it."""
    for words, cmd in _commands():
        required = [p for p in cmd.params if p.required]
        for missing in required:
            argv = list(words)
            for p in required:
                if _is_option(p) and p is not missing:
                    argv += [max(p.opts, key=len), "1k"]
            for p in [p for p in required if not _is_option(p)]:
                if p is missing:
                    break
                argv.append("1")  # a file name, an id: any word parses
            # An argument by its metavar (ctx expand's ID) or its name in capitals.
            name = (missing.metavar or missing.name).strip("<>").upper()
            shown = max(missing.opts, key=len) if _is_option(missing) else name
            yield argv, shown


CASES = list(_cases())


def test_the_walk_finds_every_command_that_requires_something() -> None:
    commands = {" ".join(argv[: 2 if argv[0] == "ctx" else 1]) for argv, _ in CASES}
    assert {
        "explain",
        "verify",
        "salvage",
        "import",
        "replay",
        "attach",
        "simulate",
        "diff",
        "forks",
        "export",
        "report",
        "ctx add",
        "ctx get",
        "ctx expand",
        "ctx import",
        "ctx reindex",
    } <= commands
    assert len(CASES) >= 22


@pytest.mark.parametrize(("argv", "shown"), CASES, ids=[f"{' '.join(a)} -{s}" for a, s in CASES])
def test_a_missing_parameter_is_one_line(argv: list[str], shown: str) -> None:
    result = runner.invoke(app, argv)
    command = argv[0] if argv[0] != "ctx" else f"ctx {argv[1]}"
    assert result.exit_code == 2, result.output
    assert "Usage:" not in result.output and "Try '" not in result.output, result.output
    assert result.output.count("\n") == 1, result.output
    assert result.output.startswith(f"cp-inspect: {command}: missing {shown}"), result.output
    assert f"write `cp-inspect {command} " in result.output
    assert f"`cp-inspect {command} --help` lists its options" in result.output


def test_the_line_says_what_the_parameter_is_and_the_whole_command() -> None:
    explain = runner.invoke(app, ["explain"])
    assert explain.output == (
        "cp-inspect: explain: missing TARGET, a .cpsession recording or the pid of a live agent: "
        "write `cp-inspect explain TARGET` (`cp-inspect explain --help` lists its options)\n"
    )
    get = runner.invoke(app, ["ctx", "get", "--budget", "12k"])
    assert get.exit_code == 2
    assert get.output == (
        "cp-inspect: ctx get: missing --db, the store's SQLite file (ctx add or ctx import makes one): "
        "write `cp-inspect ctx get --db DB --budget TOKENS` (`cp-inspect ctx get --help` lists its options)\n"
    )


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (
            ["ctx", "get", "--budget", "12k", "--db"],
            "cp-inspect: ctx get: --db needs a value, the store's SQLite file (ctx add or ctx import makes "
            "one): write `cp-inspect ctx get --db DB --budget TOKENS` (`cp-inspect ctx get --help` lists "
            "its options)\n",
        ),
        (
            ["explain", "run.cpsession", "--turn"],
            "cp-inspect: explain: --turn needs a value, turn to explain (default: the last; -1 is the last, "
            "-2 the one before): write `cp-inspect explain --turn INT TARGET` (`cp-inspect explain --help` "
            "lists its options)\n",
        ),
        (
            ["ps", "--json=yes"],
            "cp-inspect: ps: option '--json' does not take a value (`cp-inspect ps --help` lists its options)\n",
        ),
    ],
)
def test_an_option_without_its_value_is_one_line(argv: list[str], line: str) -> None:
    result = runner.invoke(app, argv)
    assert result.exit_code == 2
    assert result.output == line
