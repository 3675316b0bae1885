from __future__ import annotations

from textual.theme import Theme

from themes.palette import DEFAULT_VARIABLES

DARK = Theme(
    name="cp-dark",
    primary="#5fa8e6",
    secondary="#c98a2b",
    accent="#e6a15f",
    warning="#e0b341",
    error="#e5534b",
    success="#57ab5a",
    foreground="#d7dae0",
    background="#16181d",
    surface="#1e2128",
    panel="#262a33",
    dark=True,
    variables={**DEFAULT_VARIABLES, "footer-key-foreground": "#5fa8e6"},
)
