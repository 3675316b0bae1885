"""Helpers every `cp-inspect` command module shares: error exits, NAME=VALUE options, opening recordings."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from engine.recording.cpsession import RecordingError, RecordingReader

# What-if options shared by `explain` and `simulate` (parsed with parse_pairs).
GateOpt = Annotated[list[str] | None, typer.Option(help="NAME=on|off for an optimizer gate (repeatable).")]
ThresholdOpt = Annotated[list[str] | None, typer.Option(help="NAME=VALUE tier threshold (repeatable).")]


def fail(message: str, code: int = 1) -> NoReturn:
    """Print a message a person can act on (prefixed like every error of this program) and exit."""
    typer.secho(f"cp-inspect: {message}", fg=typer.colors.RED, err=True)
    raise typer.Exit(code)


def parse_pairs(values: list[str] | None, what: str, conv: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for v in values or []:
        if "=" not in v:
            fail(f"--{what} expects NAME=VALUE, got {v!r}", 2)
        k, raw = v.split("=", 1)
        try:
            out[k.strip()] = conv(raw.strip())
        except ValueError as exc:
            fail(f"--{what} {v!r}: {exc}", 2)
    return out


def on_off(v: str) -> bool:
    if v.lower() in ("on", "true", "1", "yes"):
        return True
    if v.lower() in ("off", "false", "0", "no"):
        return False
    raise ValueError("use on or off")


def open_recording(path: Path) -> RecordingReader:
    if not path.exists():
        fail(f"no such file: {path}")
    try:
        r = RecordingReader.open(path)
    except RecordingError as exc:
        fail(str(exc))
    except PermissionError:
        fail(f"cannot read {path}: permission denied (check the file's owner and mode)")
    if r.damage is not None:
        typer.secho(f"warning: {r.damage.message}", fg=typer.colors.YELLOW, err=True)
    return r
