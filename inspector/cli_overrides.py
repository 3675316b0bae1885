"""What-if option values every command reads alike, without typer: --gate NAME=on|off, --threshold
NAME=VALUE and --window's range. Kept apart from cli_common.py (which builds typer's option annotations)
so that the typer-free command paths (cli_argv.py) read them without importing typer."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .recording_open import fail

# The planner's ceiling (engine.tokens.Budget) and the store's (engine.store.budget.MAX_BUDGET): no model
# has a larger window. Held here as a number so that checking an option imports neither.
MAX_WINDOW = 100_000_000


def check_window(window: int | None, option: str = "--window") -> None:
    """A window (or budget) the planner can use, or the option's usage error (exit 2) before any work is
    done, worded alike in every command (report, import, simulate, explain's --budget): each said its own
    ("a positive number of tokens", "budget limit ... is out of range", without the option's name)."""
    if window is not None and not 0 < window <= MAX_WINDOW:
        fail(f"{option} must be between 1 and {MAX_WINDOW:,} tokens, got {window}", 2)


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


def parse_thresholds(values: list[str] | None) -> dict[str, float]:
    from engine.whatif import threshold_key

    def fraction(name: str, value: float) -> None:
        if not 0.0 < value <= 10.0:
            fail(f"--threshold {name}={value:g}: a threshold is a fraction of the window, e.g. {name}=0.7", 2)

    return parse_named(values, "threshold", float, threshold_key, fraction)


def parse_gates(values: list[str] | None) -> dict[str, bool]:
    from engine.whatif import gate_key

    return parse_named(values, "gate", on_off, gate_key)


def parse_named(values: list[str] | None, what: str, conv: Callable[[str], Any], key: Callable[[str], str],
                check: Callable[[str, Any], None] | None = None) -> dict[str, Any]:
    """--gate's and --threshold's NAME=VALUE pairs by the engine's name for each (`key`, which raises
    ValueError naming the ones it knows for a NAME it does not), each value then passed to `check` with
    the NAME as typed: one usage error (exit 2) for the first that is wrong, in the order given."""
    out: dict[str, Any] = {}
    for name, value in parse_pairs(values, what, conv).items():
        try:
            out[key(name)] = value
        except ValueError as exc:
            fail(f"--{what}: {exc}", 2)
        if check is not None:
            check(name, value)
    return out


def on_off(v: str) -> bool:
    if v.lower() in ("on", "true", "1", "yes"):
        return True
    if v.lower() in ("off", "false", "0", "no"):
        return False
    raise ValueError("use on or off")
