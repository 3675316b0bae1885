"""Cutting a long name in its middle, so both its start and its distinguishing end stay: the status
bar's file names (with "…") and the plain-text fleet report's session column (with "...", which any
terminal or pasted table shows). No UI imports, like panels/token_counts.py: the report printed to a
terminal does not load textual."""

from __future__ import annotations


def middle_cut(name: str, limit: int, mark: str = "…", head_share: float = 0.5) -> str:
    """`name`, or its start and end around `mark` in `limit` characters when it is longer (the start
    `head_share` of the characters kept)."""
    if len(name) <= limit:
        return name
    head = int((limit - len(mark)) * head_share)
    return f"{name[:head]}{mark}{name[len(name) - (limit - len(mark) - head) :]}"
