"""The inspector's themes, registered by the app; also selectable from the command palette."""

from __future__ import annotations

from themes.dark import DARK
from themes.high_contrast import HIGH_CONTRAST
from themes.light import LIGHT
from themes.palette import DEFAULT_VARIABLES, SCOPE_VARIABLE, TIER_VARIABLE

THEMES = (DARK, LIGHT, HIGH_CONTRAST)
DEFAULT_THEME = DARK.name
# Short names accepted by --theme.
ALIASES = {"dark": DARK.name, "light": LIGHT.name, "high-contrast": HIGH_CONTRAST.name, "hc": HIGH_CONTRAST.name}

__all__ = ["THEMES", "DEFAULT_THEME", "ALIASES", "DEFAULT_VARIABLES", "SCOPE_VARIABLE", "TIER_VARIABLE"]
