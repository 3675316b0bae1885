"""Counts in the words people read: "1 turn", "3 turns". The engine's reasons ("pays back within the 1
turns it is expected to last") and the inspector's lines ("ok: 1 turns replayed") each pluralized by
hand, and a count of one read wrong wherever one of them forgot; both sides use this."""

from __future__ import annotations


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """`n` and `noun`, the noun plural unless n is 1: counted(1, "turn") is "1 turn", counted(2, "turn")
    "2 turns" (`plural` for a noun that does not take an s)."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def nouned(n: int, noun: str, plural: str | None = None) -> str:
    """Only the noun, for a count printed apart from it ("1 of 1 turn", "3 of 40 turns")."""
    return noun if n == 1 else plural or noun + "s"
