from __future__ import annotations

from textual.theme import Theme

from themes.palette import DEFAULT_VARIABLES, OKABE_ITO

# Black background, pure white text, and Okabe-Ito hues for everything that carries meaning,
# so scopes and tiers stay distinct under deuteranopia, protanopia and tritanopia.
HIGH_CONTRAST = Theme(
    name="cp-high-contrast",
    primary=OKABE_ITO["sky"],
    secondary=OKABE_ITO["orange"],
    accent=OKABE_ITO["yellow"],
    warning=OKABE_ITO["orange"],
    error=OKABE_ITO["vermillion"],
    success=OKABE_ITO["green"],
    foreground="#ffffff",
    background="#000000",
    surface="#000000",
    panel="#1a1a1a",
    dark=True,
    variables={
        **DEFAULT_VARIABLES,
        "scope-global": OKABE_ITO["blue"], "scope-session": OKABE_ITO["orange"], "scope-none": "#7f7f7f",
        "tier-normal": OKABE_ITO["green"], "tier-trim": OKABE_ITO["yellow"],
        "tier-compact": OKABE_ITO["orange"], "tier-prune": OKABE_ITO["vermillion"],
        "cache-served": OKABE_ITO["sky"], "cache-break": OKABE_ITO["vermillion"], "gauge-empty": "#333333",
        "footer-key-foreground": OKABE_ITO["yellow"], "border": "#ffffff",
    },
)
