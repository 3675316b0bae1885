"""Paged expand: an item's original text a page at a time, with what is left said in each page.

`ContextStore.expand(id)` returns the whole text, and a 50 MB tool output came back as 50 MB (into an
agent's context, or a terminal). `expand_page` returns at most `limit` characters from `offset`; the
pages, followed by `next_offset` until it is None, join to exactly what `expand` returns.

Offsets and limits count characters (Python code points), not tokens: a page must be cut the same way
whatever model reads it, and characters are what the caller can slice and join. A page ends after a
newline when one lies in its second half, so pages read as whole lines where the text has them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

EXPAND_PAGE_CHARS = 100_000  # ~25 k tokens: a page an agent's context can take


@dataclass(frozen=True)
class ExpandPage:
    """Characters [offset, end) of item `item_id`'s expanded text, which is `total` characters long."""

    item_id: int
    text: str
    offset: int
    total: int

    @property
    def end(self) -> int:
        return self.offset + len(self.text)

    @property
    def left(self) -> int:
        """Characters after this page."""
        return self.total - self.end

    @property
    def next_offset(self) -> int | None:
        """Where the next page starts, or None when this page reaches the end."""
        return self.end if self.left else None

    def tool_result(self) -> str:
        """What an agent's expand tool call gets back: the page, then its note on a line of its own
        when there is more than this page (the note says the offset to call again with)."""
        note = self.note()
        if not note:
            return self.text
        return f"{self.text}{'' if self.text.endswith(chr(10)) else chr(10)}{note}"

    def note(self) -> str:
        """One line saying which part this is and how to get the rest ("" for the whole text)."""
        if self.offset == 0 and not self.left:
            return ""
        where = f"[#{self.item_id}: characters {self.offset:,}-{self.end:,} of {self.total:,}"
        if not self.left:
            return where + "; this is the end]"
        return f"{where}; {self.left:,} left: expand({self.item_id}, offset={self.end}) for the next page]"


def check_window(offset: object, limit: object) -> tuple[int, int]:
    """offset >= 0 and limit >= 1, as ints; anything else is a ValueError / TypeError saying which."""
    for name, v, low in (("offset", offset, 0), ("limit", limit, 1)):
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError(f"expand {name} must be a whole number of characters, got {v!r}")
        if v < low:
            raise ValueError(f"expand {name} must be at least {low} (characters), got {v}")
    assert isinstance(offset, int) and isinstance(limit, int)
    return offset, limit


def cut(chunk: str, at_end: bool) -> str:
    """The page out of `chunk` (at most limit characters from the offset): whole unless more text
    follows, then up to its last newline when that lies in its second half."""
    if at_end:
        return chunk
    nl = chunk.rfind("\n")
    return chunk[: nl + 1] if nl >= len(chunk) // 2 else chunk


def page_of(item_id: int, text: str, offset: int, limit: int) -> ExpandPage:
    """A page of text already in memory."""
    if offset > len(text):
        raise ValueError(past_end(item_id, offset, len(text)))
    chunk = text[offset : offset + limit]
    return ExpandPage(item_id, cut(chunk, offset + len(chunk) >= len(text)), offset, len(text))


def past_end(item_id: int, offset: int, total: int) -> str:
    return f"expand offset {offset:,} is past the end of #{item_id} ({total:,} characters): give an offset up to {total:,}"


# A piece of a text made of several: a string, or a reader of a stored body that, given a start and a
# number of characters, returns the body's length and those characters of it (ContextStore streams it).
Piece = str | Callable[[int, int], tuple[int, str]]


def page_of_pieces(item_id: int, pieces: Iterable[Piece], offset: int, limit: int) -> ExpandPage:
    """page_of(item_id, "".join(the pieces' texts), offset, limit) without joining them: each piece
    gives only the characters the page takes, so a summary's page does not hold its originals whole."""
    end = offset + limit
    pos = 0  # characters of the pieces before this one
    got: list[str] = []
    for p in pieces:
        if isinstance(p, str):
            n = len(p)
            if pos < end and pos + n > offset:
                got.append(p[max(0, offset - pos) : end - pos])
        else:
            lo = max(0, offset - pos)
            n, chunk = p(lo, max(0, end - pos - lo))
            got.append(chunk)
        pos += n
    if offset > pos:
        raise ValueError(past_end(item_id, offset, pos))
    chunk = "".join(got)
    return ExpandPage(item_id, cut(chunk, offset + len(chunk) >= pos), offset, pos)
