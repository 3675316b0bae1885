"""The one rounding rule for token counts, with no UI imports: the panels (through panels/fmt.py) and the
plain-text fleet report (`cp-inspect report`, inspector/fleet_report.py) print counts with it, so a
session's prompt reads the same in the table as in the inspector. Kept apart from panels/fmt.py because
that module imports textual (~250 ms), which a report printed to a terminal has no use for."""

from __future__ import annotations


def tok(n: int | float | None) -> str:
    """Token counts the way people read them: 850, 9.8k, 33k, 1.2M. One rule for every panel: a count
    is rounded once, at the precision of the size it rounds to. Choosing the precision from the count
    before rounding printed 9,996 as "10.0k" beside a 10,200 printed "10k" (the pressure panel's "of
    10.0k usable / 10k"), and 999,960 as "1000k"."""
    if n is None:
        return "-"
    n = int(n)
    if abs(n) < 1000:
        return str(n)
    if abs(round(n / 1000, 1)) < 10:
        return f"{n / 1000:.1f}k"
    if abs(round(n / 1000)) < 1000:
        return f"{n / 1000:.0f}k"
    return f"{n / 1_000_000:.1f}M"


def signed(n: int) -> str:
    return "±0" if n == 0 else f"+{tok(n)}" if n > 0 else f"−{tok(-n)}"
