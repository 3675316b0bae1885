"""Counts, ports, offsets and seconds given a value that is not a number: one `cp-inspect:` line naming the
option and what to write (exit 2), as token options give (token_arg.py), never typer's usage block
("Usage: ... Try '... --help' ... Error: Invalid value for '--port': Input should be a valid integer")."""

from __future__ import annotations

import typing
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from inspector.cli import app
from inspector.token_arg import parse_real, parse_whole

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "demo_sessions" / "scout-anthropic.cpsession"
runner = CliRunner()

# Every number-typed option or argument of every command: (command line before the value, the value's
# name in the message, what the message tells the user to write). The bad value is appended after the
# command line; `--` keeps "-x" values from reading as options where the command takes CMD after it.
CASES: list[tuple[list[str], str, str]] = [
    (["proxy", "--port"], "--port", "give a port number from 0 to 65535 (0 picks a free one)"),
    (["run", "--port"], "--port", "give a port number from 0 to 65535 (0 picks a free one)"),
    (["proxy", "--run-pid"], "--run-pid", "give the pid of the `cp-inspect run` that started the proxy"),
    (["demo", "--no-tui", "--turns"], "--turns", "give a number of turns, e.g. 30"),
    (["import", "auto", "unused.jsonl", "--conversation"], "--conversation", "give a conversation number, e.g. 2"),
    (["demo", "--no-tui", "--delay"], "--delay", "give seconds, e.g. 0.5"),
    (["export", str(DEMO), "--timeout"], "--timeout", "give seconds per batch, e.g. 10"),
    (
        ["ctx", "add", "--db", "unused.sqlite", "--importance"],
        "--importance",
        "give a number from 0 to 1, e.g. 0.8",
    ),
    (
        ["ctx", "expand", "--db", "unused.sqlite", "5", "--offset"],
        "--offset",
        "give a character offset, e.g. 100000",
    ),
    (
        ["ctx", "expand", "--db", "unused.sqlite", "5", "--limit"],
        "--limit",
        "give a number of characters, e.g. 100000",
    ),
    (
        ["ctx", "expand", "--db", "unused.sqlite"],
        "ID",
        "give the number after # in a stub, e.g. `ctx expand --db DB 5`",
    ),
]


@pytest.mark.parametrize(
    ("argv", "name", "takes"), CASES, ids=[" ".join(c[0][:2]) + " " + c[1] for c in CASES]
)
@pytest.mark.parametrize("bad", ["x", "1.5x", "abc"])
def test_a_value_that_is_not_a_number_is_one_line(argv: list[str], name: str, takes: str, bad: str) -> None:
    result = runner.invoke(app, [*argv, bad, *(["--", "true"] if argv[0] == "run" else [])])
    assert result.exit_code == 2, result.output
    assert result.output == f"cp-inspect: {name}: cannot read {bad!r}: {takes}\n"


def test_an_integer_option_refuses_a_fraction_in_one_line() -> None:
    result = runner.invoke(app, ["proxy", "--port", "80.5"])
    assert result.exit_code == 2
    assert result.output == (
        "cp-inspect: --port: cannot read '80.5': give a port number from 0 to 65535 (0 picks a free one)\n"
    )


def test_a_number_out_of_range_still_gets_the_commands_own_line() -> None:
    """The converter only reads; each command's range check words its own limits."""
    port = runner.invoke(app, ["proxy", "--port", "99999"])
    assert port.exit_code == 2
    assert port.output == "cp-inspect: --port must be between 0 and 65535 (0 picks a free one), got 99999\n"
    offset = runner.invoke(app, ["ctx", "expand", "--db", "unused.sqlite", "5", "--offset", "-5"])
    assert offset.exit_code == 2
    assert offset.output == "cp-inspect: --offset must be 0 or more characters, got -5\n"
    turns = runner.invoke(app, ["demo", "--no-tui", "--turns", "-5"])
    assert turns.exit_code == 2
    assert turns.output == "cp-inspect: --turns must be at least 1 (got -5)\n"
    item = runner.invoke(app, ["ctx", "expand", "--db", "unused.sqlite", "--", "-5"])
    assert item.exit_code == 2
    assert item.output.startswith("cp-inspect: item ids start at 1, got -5")


@pytest.mark.parametrize(
    ("text", "value"), [("8080", 8080), (" 8080 ", 8080), ("+3", 3), ("-5", -5), ("100,000", 100_000)]
)
def test_whole_numbers_read_as_typed(text: str, value: int) -> None:
    assert parse_whole(text) == value


@pytest.mark.parametrize("text", ["1.5", "1e3", "", "abc", "1_000", "10,00", "0x10"])
def test_anything_else_is_not_a_whole_number(text: str) -> None:
    with pytest.raises(ValueError):
        parse_whole(text)


@pytest.mark.parametrize(("text", "value"), [("0.5", 0.5), (".5", 0.5), ("2", 2.0), ("1e-3", 0.001)])
def test_seconds_read_as_typed(text: str, value: float) -> None:
    assert parse_real(text) == value


@pytest.mark.parametrize("text", ["x", "", "1_0", "1.5s"])
def test_anything_else_is_not_a_number(text: str) -> None:
    with pytest.raises(ValueError):
        parse_real(text)


def _number_params() -> Iterator[tuple[str, str]]:
    """(command, parameter) of every int or float parameter of every command, subcommands included."""

    def commands(t: Any, prefix: str) -> Iterator[tuple[str, Callable[..., Any]]]:
        for c in t.registered_commands:
            yield prefix + (c.name or c.callback.__name__), c.callback
        for g in t.registered_groups:
            yield from commands(g.typer_instance, f"{prefix}{g.name} ")

    for name, callback in commands(app, ""):
        for param, hint in typing.get_type_hints(callback, include_extras=True).items():
            base = typing.get_args(hint)[0] if typing.get_origin(hint) is typing.Annotated else hint
            if {int, float} & {base, *typing.get_args(base)}:
                yield name, param


def test_every_number_option_is_read_by_the_shared_converter() -> None:
    """A number option added later without `parser=number_option(...)` printed typer's usage block again:
    every int or float parameter of every command is one of CASES."""
    covered = {
        "proxy port",
        "proxy run_pid",
        "run port",
        "demo turns",
        "demo delay",
        "export timeout",
        "ctx add importance",
        "ctx expand offset",
        "ctx expand limit",
        "ctx expand item_id",
        "import conversation",
    }
    found = {f"{command} {param}" for command, param in _number_params()}
    assert found == covered, f"add these to CASES, with parser=number_option(...): {sorted(found - covered)}"
