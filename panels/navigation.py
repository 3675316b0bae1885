"""Messages panels post to move the app's current turn."""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message


@dataclass
class JumpToTurn(Message):
    """A panel asks to show the turn at this timeline position (alert selected, strip clicked)."""

    index: int
