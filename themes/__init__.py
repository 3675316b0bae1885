"""The inspector's themes, registered by the app; also selectable from the command palette."""

from __future__ import annotations

from collections.abc import Collection

from themes.dark import DARK
from themes.high_contrast import HIGH_CONTRAST
from themes.light import LIGHT
from themes.palette import DEFAULT_VARIABLES, SCOPE_VARIABLE, TIER_VARIABLE

THEMES = (DARK, LIGHT, HIGH_CONTRAST)
DEFAULT_THEME = DARK.name
# Short names accepted by --theme.
ALIASES = {
    "dark": DARK.name,
    "light": LIGHT.name,
    "high-contrast": HIGH_CONTRAST.name,
    "hc": HIGH_CONTRAST.name,
}

__all__ = [
    "THEMES",
    "DEFAULT_THEME",
    "ALIASES",
    "DEFAULT_VARIABLES",
    "SCOPE_VARIABLE",
    "TIER_VARIABLE",
    "pick_theme",
    "theme_known",
]


def pick_theme(wanted: str | None, available: Collection[str], origin: str = "") -> tuple[str, str | None]:
    """The theme an app shows for `wanted` (--theme, or $TEXTUAL_THEME: a short name, a registered theme's
    name, or None for the default), and the warning to show when no theme has that name (the default is
    shown instead: a bad name is a notification, as posting does, not a crash; `cp-inspect top --theme
    x` ended in Textual's InvalidThemeError traceback)."""
    name = ALIASES.get(wanted, wanted) if wanted else DEFAULT_THEME
    if name in available:
        return name, None
    # `origin`: where the name came from when not --theme (the command line refuses an unknown --theme
    # before the app starts: the warning is then $TEXTUAL_THEME's, which "--theme takes ..." alone hid).
    said = f" (from {origin})" if origin else ""
    return (
        DEFAULT_THEME,
        f"unknown theme {wanted!r}{said}; using dark (--theme takes dark, light or high-contrast)",
    )


def theme_known(wanted: str) -> bool:
    """Whether --theme names a theme the apps show: a short name, one of ours, or one of Textual's own
    (the apps register those too; pick_theme takes them)."""
    from textual.theme import BUILTIN_THEMES

    name = ALIASES.get(wanted, wanted)
    return name in BUILTIN_THEMES or any(t.name == name for t in THEMES)
