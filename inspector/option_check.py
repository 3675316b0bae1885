"""Option values checked before a command reads a file or starts anything, a wrong one said as that
option's error (exit 2): `simulate`'s and `explain`'s --provider, --policy, --policies and --threshold
(the two said the same wrong value differently: "unknown provider 'x'" without the option's name, from
explain; a tier-threshold order error naming values the user never gave), and --theme for every command
that starts a terminal UI (replay, attach, demo, run, top)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from .recording_open import fail

if TYPE_CHECKING:
    from engine.sim.pricing import PriceTable


def option_check(option: str, check: Callable[..., object], *args: object, hint: str = "") -> None:
    """`check(*args)`, its ContextPipeError said as the option's error (exit 2), `hint` after it."""
    from engine.errors import ContextPipeError

    try:
        check(*args)
    except ContextPipeError as exc:
        fail(f"{option}: {exc}{hint}", 2)


def check_prices(prices: Path | None) -> PriceTable:
    """The price table a command prices by (--prices, else $CONTEXTPIPE_PRICES, else the bundled one), or
    one usage error (exit 2) naming where it came from, before any recording is read. simulate, report,
    diff and forks each said a missing or bad one their own way: "no such price table", "--prices: ...
    (set CONTEXTPIPE_PRICES to a valid file)" of a --prices file, report a bad $CONTEXTPIPE_PRICES as every
    session skipped (exit 1)."""
    from engine.errors import ContextPipeError
    from engine.sim.pricing import ENV_VAR, load_prices

    if prices is not None and not prices.exists():
        fail(f"--prices: no such price table: {prices}", 2)
    try:
        return load_prices(prices)
    except ContextPipeError as exc:
        fail(f"--prices: {exc}" if prices is not None else f"${ENV_VAR}: {exc}", 2)


def check_thresholds(given: Mapping[str, float] | None) -> None:
    """--threshold's values (names already checked by parse_thresholds) against the defaults of the rest:
    the order error lists all three ("got (0.6, 0.5, 0.9)"), so it says which of them were not given."""
    if not given:
        return
    from engine.errors import ContextPipeError
    from engine.plan import Thresholds

    defaults = Thresholds().to_dict()
    try:
        Thresholds(**{**defaults, **given})
    except ContextPipeError as exc:
        rest = [f"{name}={value:g}" for name, value in defaults.items() if name not in given]
        note = ""
        if rest:
            one = len(rest) == 1
            note = (
                f"; {' and '.join(rest)} {'is the default' if one else 'are the defaults'} "
                f"(give {'it' if one else 'them'} with --threshold too to move {'it' if one else 'them'})"
            )
        fail(f"--threshold: invalid thresholds {dict(given)}: {exc}{note}", 2)


# The names --theme's help and its error offer (themes.ALIASES; themes.pick_theme's warning says them too,
# from a module that cannot import this one's: the themes import textual, the command line does not).
THEME_CHOICES = "dark, light or high-contrast"
# --theme's help in every command that starts a terminal UI: one rule, said where the option is.
THEME_HELP = f"{THEME_CHOICES} (Textual's own, e.g. nord, too); another name is an error (exit 2)."


def check_theme(theme: str | None) -> None:
    """An unknown --theme is the option's error (exit 2) before anything starts (an agent, a proxy, the
    app), as every other unknown option value is; it was a toast in the app and the default theme, while
    an unknown provider or policy was exit 2. ($TEXTUAL_THEME, shared with other Textual apps, is still
    a warning in the app: the environment is not this command line.)"""
    if theme is None:
        return
    from themes import theme_known

    if not theme_known(theme):
        fail(
            f"--theme: unknown theme {theme!r}; choose {THEME_CHOICES} (or a Textual theme, e.g. nord)",
            2,
        )


def theme_option(theme: str | None) -> str | None:
    """typer's callback for --theme (check_theme, then the value as given)."""
    check_theme(theme)
    return theme
