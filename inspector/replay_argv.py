"""A plain `cp-inspect replay FILE [--turn N] [--follow] [--theme NAME]` read without typer's dispatch.

Typer builds every command of the program (~20) and imports pydantic to coerce the arguments of the
one it runs: a quarter of the CPU `replay` spent before its first frame (BENCHMARKS.md, Start-up). For
the command lines people type to open a recording, the values are plain (a path, a decimal turn, a
flag, a theme name) and come out of typer exactly as read here, so the console script hands them to
`replay` itself. Anything else (help, an unknown or repeated option, a negative or unusual number, a
second argument, `--`, shell completion) returns None and goes through typer as before, so its
answers (help, usage errors, their exit codes) stay typer's own. tests/test_replay_argv.py checks the
two agree on generated command lines.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

DECIMAL = re.compile(r"[0-9]{1,18}")  # what int() and pydantic read alike (no sign, space or "_")
SIGNED = re.compile(r"-[0-9]+")  # a value click hands an option that takes one, though it starts with "-"
_VALUED = ("--turn", "--theme")
_FLAGS = {"--follow": True, "--no-follow": False}


def plain_token(text: str) -> bool:
    """A value typer would pass on unchanged: not empty, no NUL, encodable (no lone surrogates from
    undecodable bytes, which pydantic's str validation treats its own way)."""
    if not text or "\0" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def shell_completing(environ: Mapping[str, str]) -> bool:
    """A shell is asking for completions (typer answers those)."""
    return any(name.startswith("_") and name.endswith("_COMPLETE") for name in environ)


def option_value(eq: str, value: str, rest: list[str], signed: bool = False) -> str | None:
    """The value of an option read as `--name=value` (eq set) or `--name value` (taken from rest), or
    None when typer must read it: missing, or not plain, or looking like an option (with `signed`, a
    signed whole number such as -1 is a value: click hands it to an option that takes one)."""
    if not eq:
        if not rest:
            return None  # a missing value: typer's usage error
        value = rest.pop(0)
    if not plain_token(value) or (value.startswith("-") and not (signed and SIGNED.fullmatch(value))):
        return None
    return value


def scan_plain(
    rest: Sequence[str],
    flags: Collection[str],
    valued: Collection[str],
    repeated: Collection[str] = (),
    signed: Collection[str] = (),
    dash: bool = False,
) -> tuple[list[str], list[tuple[str, str]]] | None:
    """A plain command line's arguments (what follows the command's name), as every typer-free path
    (replay, simulate, attach, cli_argv's commands) reads them: the positional arguments in order and
    each option as (name, value) in order (a flag's value ""), or None when typer must read it: a token
    that is not plain, an unknown option, a flag given a value, an option without a plain value (those
    in `signed` also take a value like -1), an option given twice (other than those in `repeated`), a
    lone "-" (unless `dash`: then it is a positional argument, as click reads it, e.g. stdin)."""
    args: list[str] = []
    options: list[tuple[str, str]] = []
    seen: set[str] = set()
    left = list(rest)
    while left:
        token = left.pop(0)
        if not plain_token(token):
            return None
        if not token.startswith("-") or (dash and token == "-"):
            args.append(token)
            continue
        name, eq, value = token.partition("=")
        if name in seen and name not in repeated:
            return None  # click keeps the last (or lets a repeat pass): left to typer
        if name in flags and not eq:
            options.append((name, ""))
        elif name in valued or name in repeated:
            read = option_value(eq, value, left, name in signed)
            if read is None:
                return None
            options.append((name, read))
        else:
            return None  # --help, an unknown option, a flag given a value, `--`
        seen.add(name)
    return args, options


def plain_replay(argv: Sequence[str], environ: Mapping[str, str]) -> dict[str, Any] | None:
    """`replay`'s keyword arguments for a plain replay command line, as typer would pass them, or None
    when typer must read it (see the module's docstring)."""
    if not argv or argv[0] != "replay":
        return None
    if shell_completing(environ):
        return None
    scanned = scan_plain(argv[1:], _FLAGS, _VALUED)
    if scanned is None:
        return None
    args, options = scanned
    seen = dict(options)
    if len(args) != 1 or ("--follow" in seen and "--no-follow" in seen):
        return None  # no FILE or a second argument: typer's usage error
    follow = "--follow" in seen
    turn = seen.get("--turn")
    if turn is not None and not DECIMAL.fullmatch(turn):
        return None
    file = args[0]
    return {
        "file": Path(file),
        "turn": None if turn is None else int(turn),
        "follow": follow,
        "theme": seen.get("--theme"),
    }
