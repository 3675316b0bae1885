from __future__ import annotations

from textual.theme import Theme

from themes.palette import DEFAULT_VARIABLES

LIGHT = Theme(
    name="cp-light",
    primary="#1f5fa6",
    secondary="#9a5b00",
    accent="#a64d1f",
    warning="#9a6b00",
    error="#b3261e",
    success="#2e7d32",
    foreground="#1d2129",
    background="#f7f7f4",
    surface="#ecece7",
    panel="#e0e0da",
    dark=False,
    variables={
        **DEFAULT_VARIABLES,
        "scope-global": "#4d86c6", "scope-session": "#d9a441", "scope-none": "#a9adb5",
        "tier-normal": "#2e7d32", "tier-trim": "#8a7400", "tier-compact": "#b35c00", "tier-prune": "#b3261e",
        "cache-served": "#2e7d32", "cache-break": "#b3261e", "gauge-empty": "#d5d5cf",
    },
)
