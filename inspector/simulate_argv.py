"""A plain `cp-inspect simulate FILE... [options]` read without typer's dispatch.

typer 0.29 coerces every parameter that is not a bool flag through a pydantic TypeAdapter, built when
the command runs, whatever its value (even None): any `simulate` command line imports pydantic and
builds its adapters, and typer first builds every command of the program. That is ~0.2-0.3 s CPU of a
run whose goal is 1 s (BENCHMARKS.md, "Session-wide what-if and cost"); no annotation avoids it
(typer 0.29 has no `click_type=`, and wraps a `parser=` in an adapter too). simulate's values are plain: paths, a
number of tokens (read by token_arg.parse_tokens, as simulate_command reads typer's text), strings and
repeatable NAME=VALUE strings, which come out of typer exactly as read here, so
the console script hands them to `simulate` itself. Anything else (help, an unknown or repeated
single option, a value that looks like an option, a signed or unusual number, `--`, shell completion)
returns None and goes through typer as before, so its answers (help, usage errors, exit codes) stay
typer's own. tests/test_simulate_argv.py checks the two agree on generated command lines.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .replay_argv import scan_plain, shell_completing
from .token_arg import parse_tokens

# Option -> simulate's keyword, by the kind of value it takes.
_TEXT = {"--provider": "provider", "--model": "model", "--policies": "policies", "--policy": "policy"}
_PATH = {"--prices": "prices"}
_INT = {"--window": "window"}
_REPEATED = {"--gate": "gate", "--threshold": "threshold"}
_FLAGS = {"--no-calibrate": "no_calibrate", "--json": "as_json", "--per-turn": "per_turn"}


def plain_simulate(argv: Sequence[str], environ: Mapping[str, str]) -> dict[str, Any] | None:
    """`simulate`'s keyword arguments for a plain simulate command line, as typer would pass them, or
    None when typer must read it (see the module's docstring)."""
    if not argv or argv[0] != "simulate":
        return None
    if shell_completing(environ):
        return None
    out: dict[str, Any] = {
        "files": [], "provider": None, "model": None, "window": None, "gate": None, "threshold": None,
        "prices": None, "policies": None, "policy": None, "no_calibrate": False, "as_json": False,
        "per_turn": False,
    }  # fmt: skip
    scanned = scan_plain(argv[1:], _FLAGS, {*_TEXT, *_PATH, *_INT}, _REPEATED)
    if scanned is None:
        return None
    files, options = scanned
    out["files"] = [Path(f) for f in files]
    for name, value in options:
        if name in _FLAGS:
            out[_FLAGS[name]] = True
        elif name in _REPEATED:
            out[_REPEATED[name]] = [*(out[_REPEATED[name]] or ()), value]
        elif name in _INT:
            try:  # read as simulate_command reads typer's text (32000, 32k, 1.5M); anything else is typer's to say
                out[_INT[name]] = parse_tokens(value)
            except ValueError:
                return None
        elif name in _PATH:
            out[_PATH[name]] = Path(value)
        else:
            out[_TEXT[name]] = value
    if not out["files"]:
        return None  # typer's usage error: the argument is required
    return out
