"""Small formatting helpers shared by the panels (pure; no widgets)."""

from __future__ import annotations

from textual.markup import escape

from themes.palette import SCOPE_VARIABLE, TIER_VARIABLE

BLOCKS = " ▁▂▃▄▅▆▇█"


def tok(n: int | float | None) -> str:
    """Token counts the way people read them: 850, 9.8k, 1.2M."""
    if n is None:
        return "-"
    n = int(n)
    if abs(n) >= 1_000_000:
        return f"{n / 1_000_000:.1f}M"
    if abs(n) >= 10_000:
        return f"{n / 1000:.0f}k"
    if abs(n) >= 1000:
        return f"{n / 1000:.1f}k"
    return str(n)


def signed(n: int) -> str:
    return "±0" if n == 0 else f"+{tok(n)}" if n > 0 else f"−{tok(-n)}"


def tier_style(tier: str) -> str:
    return "$" + TIER_VARIABLE.get(tier, "tier-normal")


def scope_style(scope: str) -> str:
    return "$" + SCOPE_VARIABLE.get(scope, "scope-none")


def tier_markup(tier: str) -> str:
    return f"[bold {tier_style(tier)}]{escape(tier)}[/]"


def block(value: float, top: float) -> str:
    """One sparkline character for value in [0, top]."""
    if top <= 0:
        return BLOCKS[0]
    i = round(min(max(value / top, 0.0), 1.0) * (len(BLOCKS) - 1))
    return BLOCKS[max(1, i)] if value > 0 else BLOCKS[0]
