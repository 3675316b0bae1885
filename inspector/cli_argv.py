"""Plain `explain`, `verify`, `salvage` and `ps` command lines, read without typer's dispatch.

These are the headless commands people run in scripts and loops (`for f in *.cpsession; do cp-inspect
explain "$f" --format json; done`, a CI step's `verify`, a poll of `ps --json`). Under typer each run
imported typer, built every command of the program (~20) and pydantic's argument adapters: 40-80% of
the CPU of a run on a demo recording (BENCHMARKS.md, Start-up). Their values are plain (a path or a
pid, texts, repeatable NAME=VALUE texts, flags) and come out of typer exactly as read here, and the
commands' work is in typer-free modules (cli_explain.py, cli_verify.py, cli_salvage.py, cli_ps.py) that
the typer commands call too, so the console script (entry.py) runs them directly.

Anything else returns None and goes through typer as before, so its answers stay typer's own: help, an
unknown or repeated option (other than --gate/--threshold), a value that looks like an option (except
a signed whole number for --turn and --budget, which click takes as the value too), an option without
its value, a missing or second argument, `--`, a token that is empty, holds NUL or cannot be encoded,
shell completion. tests/test_cli_argv.py checks the two agree: what each hands the command, and the
program's output and exit status on the same command lines.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path

from .replay_argv import plain_token, shell_completing

# A value click hands an option that takes one even though it starts with "-": a signed whole number.
_SIGNED = re.compile(r"-[0-9]+")


def scan(
    rest: Sequence[str],
    flags: Collection[str],
    valued: Collection[str],
    repeated: Collection[str] = (),
    signed: Collection[str] = (),
) -> tuple[list[str], dict[str, list[str]]] | None:
    """A plain command line's positional arguments in order and each option's values in order (a flag's
    value ""), or None when typer must read it (see the module's docstring). Options in `signed` also
    take a value like -1."""
    args: list[str] = []
    options: dict[str, list[str]] = {}
    left = list(rest)
    while left:
        token = left.pop(0)
        if not plain_token(token):
            return None
        if not token.startswith("-"):
            args.append(token)
            continue
        name, eq, value = token.partition("=")
        if name in options and name not in repeated:
            return None  # click keeps the last: left to typer
        if name in flags and not eq:
            options[name] = [""]
            continue
        if name not in valued and name not in repeated:
            return None  # --help, an unknown option, a flag given a value, `--`
        if not eq:
            if not left:
                return None  # a missing value: typer's one-line refusal
            value = left.pop(0)
        if not plain_token(value) or (value.startswith("-") and not (name in signed and _SIGNED.fullmatch(value))):
            return None
        options.setdefault(name, []).append(value)
    return args, options


def _one(options: dict[str, list[str]], name: str) -> str | None:
    return options[name][0] if name in options else None


def plain_explain(rest: Sequence[str]) -> Callable[[], None] | None:
    scanned = scan(rest, ("--json",), ("--turn", "--budget", "--provider", "--format"),
                   ("--gate", "--threshold"), ("--turn", "--budget"))
    if scanned is None or len(scanned[0]) != 1:
        return None  # no TARGET (typer's one line) or a second one (explain's own, with ctx.args)
    (target,), opts = scanned

    def run() -> None:
        from .cli_explain import explain

        explain(target, _one(opts, "--turn"), _one(opts, "--budget"), opts.get("--gate"),
                opts.get("--threshold"), _one(opts, "--provider"), _one(opts, "--format") or "text",
                "--json" in opts)

    return run


def plain_verify(rest: Sequence[str]) -> Callable[[], None] | None:
    scanned = scan(rest, (), ())
    if scanned is None or len(scanned[0]) != 1:
        return None
    file = Path(scanned[0][0])

    def run() -> None:
        from .cli_verify import verify

        verify(file)

    return run


def plain_salvage(rest: Sequence[str]) -> Callable[[], None] | None:
    # `-o OUT` as its own two tokens only: click reads `-oOUT` and `-o=OUT` ("=OUT") its own ways.
    scanned = scan(["--out" if t == "-o" else t for t in rest], ("--force",), ("--out",))
    if scanned is None or len(scanned[0]) != 1 or "--out" not in scanned[1]:
        return None  # no FILE, a second one, or no -o: typer's one-line refusals
    (file,), opts = scanned
    out, force = Path(opts["--out"][0]), "--force" in opts

    def run() -> None:
        from .cli_salvage import salvage

        salvage(Path(file), out, force)

    return run


def plain_ps(rest: Sequence[str]) -> Callable[[], None] | None:
    scanned = scan(rest, ("--json",), ())
    if scanned is None or scanned[0]:
        return None
    as_json = "--json" in scanned[1]

    def run() -> None:
        from .cli_ps import ps

        ps(as_json)

    return run


_COMMANDS: dict[str, Callable[[Sequence[str]], Callable[[], None] | None]] = {
    "explain": plain_explain, "verify": plain_verify, "salvage": plain_salvage, "ps": plain_ps,
}


def plain_command(argv: Sequence[str], environ: Mapping[str, str]) -> Callable[[], None] | None:
    """The command a plain `explain`, `verify`, `salvage` or `ps` command line runs, as typer would run
    it, or None when typer must read the line (see the module's docstring)."""
    if not argv or argv[0] not in _COMMANDS or shell_completing(environ):
        return None
    return _COMMANDS[argv[0]](argv[1:])
