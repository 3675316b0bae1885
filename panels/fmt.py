"""Small formatting helpers shared by the panels (pure; no widgets)."""

from __future__ import annotations

from rich.cells import cell_len, set_cell_size

# The one rounding rule lives in panels/token_counts.py (no UI imports: the fleet report prints with it too).
from panels.token_counts import signed as signed
from panels.token_counts import tok as tok
from themes.palette import SCOPE_VARIABLE, TIER_VARIABLE


def literal(text: str) -> str:
    """`text` from outside (a file name, a model, a tool's or step's words, an error) as markup that shows
    it as it is: every "[" escaped. textual's escape() escapes only what reads as a tag: a lone "[" opened
    one across the rest of the line (`cp-inspect replay 'x[.cpsession'`: MarkupError, the app ended with
    Textual's traceback, exit 1), "keys [A-Z]" lost its "[A-Z]" (read as a style), "call_[3" showed "[/]".
    (A text ending in a backslash still escapes a tag right after it: the markup has no escaped backslash.)"""
    return text.replace("[", "\\[")


BLOCKS = " ▁▂▃▄▅▆▇█"

# What a drawn string may not carry to the terminal. Rich's Text drops carriage return, backspace, bell,
# vertical tab and form feed (dropped here too, so rows, offsets and the highlighter agree); every other
# control character went out to the terminal as it was and was obeyed: ESC [31m turned the text after
# it red, ESC [2J cleared the screen, ESC ] 0; retitled the window and ESC ] 52; wrote the clipboard.
# Those are shown as their Unicode control pictures (␛, ␀, ␡: one character each, so offsets hold) and
# a C1 control (U+0080-U+009F, which some terminals obey as well) as U+FFFD. One translate.
VISIBLE_CONTROLS: dict[int, int | None] = {
    **{c: 0x2400 + c for c in range(32) if c not in (9, 10)}, 0x7F: 0x2421,
    **{c: 0xFFFD for c in range(0x80, 0xA0)}, 7: None, 8: None, 11: None, 12: None, 13: None,
}
# For a one-row cell (an alert, an error, a name): a newline as ␤ and a tab as a space too. A newline
# drawn in a row's segment broke the row (the rest of an alert's message vanished, the panel's next
# rows shifted), and in a panel's line it took rows the panel does not have.
_ONE_LINE: dict[int, int | None] = {**VISIBLE_CONTROLS, 10: 0x2424, 9: 0x20}


def one_line(text: str) -> str:
    """`text` as one row of plain characters: control characters visible, none sent to the terminal."""
    return text.translate(_ONE_LINE)


def fit_cells(text: str, cells: int) -> str:
    """`text` in at most `cells` terminal cells: whole if it fits, else its start and an ellipsis (a cut
    that says so: an alert's message, a section's name)."""
    if cell_len(text) <= cells:
        return text
    return set_cell_size(text, max(0, cells - 1)) + "…" if cells > 0 else ""


def model_in(model: str, cells: int) -> str:
    """A model's name in at most `cells` cells when it can be: its routing prefix goes first, a piece at a
    time ("openrouter/anthropic/claude-3.5-sonnet" -> "…/anthropic/claude-3.5-sonnet" -> "…/claude-3.5-
    sonnet"), so the model that ran shows, not the router; cutting its end (fit_cells) showed
    "openrouter/anthrop". A piece that does not start like a name ("gpt-4o[/]": "]") is no model's: the
    name is then cut whole. What is still too long is the caller's to cut."""
    if cell_len(model) <= cells:
        return model
    pieces = model.split("/")
    shown = model
    for at in range(1, len(pieces)):
        rest = "/".join(pieces[at:])
        if not rest[:1].isalnum():
            break
        shown = f"…/{rest}"
        if cell_len(shown) <= cells:
            break
    return shown


def tier_style(tier: str) -> str:
    return "$" + TIER_VARIABLE.get(tier, "tier-normal")


def scope_style(scope: str) -> str:
    return "$" + SCOPE_VARIABLE.get(scope, "scope-none")


def tier_markup(tier: str) -> str:
    return f"[bold {tier_style(tier)}]{literal(tier)}[/]"


def block(value: float, top: float) -> str:
    """One sparkline character for value in [0, top]."""
    if top <= 0:
        return BLOCKS[0]
    i = round(min(max(value / top, 0.0), 1.0) * (len(BLOCKS) - 1))
    return BLOCKS[max(1, i)] if value > 0 else BLOCKS[0]
