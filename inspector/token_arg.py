"""Reading a token count (a window, a budget) and a turn number from the command line, without typer.

The inspector prints windows as "32.0k" and "1.20M", and people type them back that way: a typer `int`
option refused `--window 32k` with a three-line usage block. Every option taking a number of tokens
goes through `tokens_option`, so `32000`, `32,000`, `32k`, `32K` and `1.5M` all mean the same thing in
every command, and a value it cannot read is one `cp-inspect:` line (exit 2). Every other number option
(ports, counts, offsets, seconds) is read by `number_option`, typer's `parser=`, with the same one line
where typer printed its usage block. Kept free of typer: the console script runs `simulate` and `replay`
without importing it (simulate_argv.py, replay_argv.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from .recording_open import fail

# decimal (~2 ms of CPU to import on the reference host) is imported by parse_tokens, when a count is
# typed: most command lines type none, and nothing else `cp-inspect simulate` imports needs it.

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
    from decimal import Decimal, InvalidOperation

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


# A whole number as people type it: 8080, +3, -5 (a range check says what a negative means), 100,000.
_WHOLE = re.compile(r"[+-]?(?:[0-9]{1,3}(?:,[0-9]{3})+|[0-9]+)")


def parse_whole(text: str) -> int:
    """An integer written as 8080, -5 or 100,000; ValueError otherwise (1.5, 1e3, 'abc')."""
    if _WHOLE.fullmatch(text.strip()) is None:
        raise ValueError(text)
    return int(text.strip().replace(",", ""))


def parse_real(text: str) -> float:
    """A number written as 1.5, .5, 2 or 1e-3; ValueError otherwise. 'nan' and 'inf' are read, for the
    option's range check to refuse them with its own words."""
    if "_" in text:  # float() reads 1_000 as a thousand; no other option of this program does
        raise ValueError(text)
    return float(text.strip())


def number_option(option: str, takes: str, kind: type = int) -> Callable[[str | int | float], int | float]:
    """typer's `parser=` for an integer (kind=int) or decimal (kind=float) option or argument: a value that
    is not a number is one `cp-inspect:` line naming the option and what it takes (exit 2), where typer
    printed its usage block ("Invalid value for '--port': Input should be a valid integer ..."). `takes`
    says what to write, e.g. "a port number, 0 to 65535". Range checks stay with each command, which words
    its own; this only reads."""
    read = parse_whole if kind is int else parse_real

    def parse(value: str | int | float) -> int | float:
        if not isinstance(value, str):
            return value  # the default, given as a number
        try:
            return read(value)
        except ValueError:
            fail(f"{option}: cannot read {value!r}: give {takes}", 2)

    return parse
