"""Colour variables shared by every theme; panels refer to them as `$scope-global` etc.

The scope and tier colours come from the Okabe-Ito palette, which stays distinguishable for the
common forms of colour blindness; panels also never rely on colour alone (forms and tiers are
spelled out, markers are glyphs).
"""

from __future__ import annotations

OKABE_ITO = {
    "blue": "#0072B2", "orange": "#E69F00", "green": "#009E73", "sky": "#56B4E9",
    "vermillion": "#D55E00", "purple": "#CC79A7", "yellow": "#F0E442",
}

# Defaults for themes we did not define (textual-dark, nord, ...), so CSS variables always resolve.
DEFAULT_VARIABLES: dict[str, str] = {
    "scope-global": "#3f7cc4",
    "scope-session": "#c98a2b",
    "scope-none": "#5c6370",
    "tier-normal": "#3fa66a",
    "tier-trim": "#c9b02b",
    "tier-compact": "#d9822b",
    "tier-prune": "#d0463c",
    "cache-served": "#3fa66a",
    "cache-break": "#d0463c",
    "gauge-empty": "#3a3f4b",
}

TIER_VARIABLE = {
    "Normal": "tier-normal", "TrimSchemas": "tier-trim",
    "CompactHistory": "tier-compact", "AggressivePrune": "tier-prune",
}
SCOPE_VARIABLE = {"global": "scope-global", "session": "scope-session", "none": "scope-none"}
