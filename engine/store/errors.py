"""Errors the store raises on purpose. Each message names the thing that is wrong and what to do."""

from __future__ import annotations

from engine.errors import BudgetExceededError, ContextPipeError


class StoreError(ContextPipeError):
    """Base class for context-store errors."""


class StoreCorruptError(StoreError):
    """The database file is not a SQLite database, or its pages are damaged."""

    def __init__(self, path: str, detail: str, *, row: bool = False) -> None:
        self.path = path
        if row:  # its pages are whole, a value in them is not what the store writes (see row_check)
            super().__init__(
                f"{path}: {detail}: the database was changed outside the store. Set that value back, or "
                f"move the file aside and rebuild a fresh store from the recording or trajectory with "
                f"`cp-inspect ctx import --db NEW_FILE RECORDING`"
            )
            return
        super().__init__(
            f"{path} is not a usable context store ({detail}). The originals cannot be read from it; "
            f"move it aside and rebuild a fresh store from the recording or trajectory with "
            f"`cp-inspect ctx import --db NEW_FILE RECORDING`"
        )


class StoreLockedError(StoreError):
    """Another connection held a write lock for longer than the busy timeout."""

    def __init__(self, path: str, timeout_s: float) -> None:
        self.path = path
        super().__init__(
            f"{path} is locked: another process holds a write lock on it (waited {timeout_s:g} s). "
            "Wait for that process to finish, or point --db at a different file"
        )


class UnknownItemError(StoreError, KeyError):
    def __init__(self, item_id: int, path: str) -> None:
        self.item_id = item_id
        super().__init__(f"no item #{item_id} in {path}")

    def __str__(self) -> str:  # KeyError would otherwise quote the message
        return str(self.args[0])


class PinsExceedBudgetError(StoreError, BudgetExceededError):
    """Pinned items alone do not fit: the store never drops a pin, so it refuses instead."""

    def __init__(self, pinned_tokens: int, usable: int, limit: int, pins: list[tuple[int, int]]) -> None:
        self.pinned_tokens = pinned_tokens
        self.usable = usable
        biggest = ", ".join(f"#{i} ({t} tokens)" for i, t in sorted(pins, key=lambda p: (-p[1], p[0]))[:5])
        super().__init__(
            f"pinned items alone need {pinned_tokens} tokens but the budget of {limit} leaves {usable} usable "
            f"after its margin; largest pins: {biggest}. Raise the budget or unpin something"
        )


class StoreTextError(StoreError, ValueError):
    """Text the store cannot keep: it holds a lone surrogate, which UTF-8 (SQLite's text) cannot encode."""

    def __init__(self, what: str, text: str, index: int, todo: str = "") -> None:
        self.what = what
        self.index = index
        todo = todo or (
            "decode the bytes with errors='replace', or pass the text through "
            "engine.store.items.replace_surrogates, and add it again"
        )
        super().__init__(
            f"{what} is not valid Unicode: a lone surrogate U+{ord(text[index]):04X} at character {index} "
            f"(bytes decoded with errors='surrogateescape', or a JSON \\ud800-style escape); nothing was "
            f"stored. To store it, {todo}"
        )
