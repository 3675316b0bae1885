"""Reading a token count (a window, a budget) and a turn number from the command line, without typer.

The inspector prints windows as "32.0k" and "1.20M", and people type them back that way: a typer `int`
option refused `--window 32k` with a three-line usage block. Every option taking a number of tokens
goes through `tokens_option`, so `32000`, `32,000`, `32k`, `32K` and `1.5M` all mean the same thing in
every command, and a value it cannot read is one `cp-inspect:` line (exit 2). Kept free of typer: the
console script runs `simulate` and `replay` without importing it (simulate_argv.py, replay_argv.py).
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

from .recording_open import fail

# k and M as the inspector prints them (thousands and millions, not 1024s). Commas group thousands
# only where they sit every three digits ("32,000", not "3,2000", which is more likely a typo).
_TOKENS = re.compile(r"(?P<num>[0-9]{1,3}(?:,[0-9]{3})+|[0-9]+(?:\.[0-9]+)?|\.[0-9]+)(?P<unit>[kKmM]?)")
_UNIT = {"": 1, "k": 1_000, "K": 1_000, "m": 1_000_000, "M": 1_000_000}


def parse_tokens(text: str) -> int:
    """A count of tokens written as 32000, 32,000, 32k, 32K or 1.5M; ValueError when it is not one
    (including a fraction of a token, e.g. 1.0005k)."""
    found = _TOKENS.fullmatch(text.strip())
    if found is None:
        raise ValueError(text)
    try:
        value = Decimal(found["num"].replace(",", "")) * _UNIT[found["unit"]]
    except InvalidOperation as exc:  # the pattern admits only decimals: kept so nothing is a traceback
        raise ValueError(text) from exc
    if value != value.to_integral_value():
        raise ValueError(text)
    return int(value)


def tokens_option(value: str | int | None, option: str) -> int | None:
    """`option`'s value as a number of tokens (None when not given), or its one-line usage error.
    Range checks (positive, at most the planner's limit) stay with each command, which knows its own."""
    if value is None or isinstance(value, int):
        return value
    text = value.strip()
    try:
        # A negative count is read, for the command's range check to say what the option takes.
        return -parse_tokens(text[1:]) if text.startswith("-") else parse_tokens(text)
    except ValueError:
        fail(f"{option}: cannot read {value!r}: give tokens as 32000 or 32k", 2)


def parse_turn(text: str) -> int:
    """A --turn value: an integer, negative counting from the last; ValueError otherwise. The caller says
    what was wrong with the recording's range of turns, which it knows only once the file is open."""
    if re.fullmatch(r"[+-]?[0-9]{1,18}", text.strip()) is None:
        raise ValueError(text)
    return int(text)
