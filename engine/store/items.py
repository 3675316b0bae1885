"""What the store holds: items (originals, never rewritten), their kinds and the links between them."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

# A Python str holds a surrogate code point only when it is lone (a valid pair is one code point):
# text decoded from bytes with errors="surrogateescape" (argv, stdin, os.fsdecode of a file name) or a
# JSON "\\ud800" escape. SQLite stores UTF-8, which cannot encode one.
_SURROGATE = re.compile("[\ud800-\udfff]")


def lone_surrogate(text: str) -> int:
    """Index of the first lone surrogate in `text`, or -1."""
    m = _SURROGATE.search(text)
    return -1 if m is None else m.start()


def replace_surrogates(text: str) -> str:
    """`text` with each lone surrogate replaced by U+FFFD, as bytes decoded with errors="replace" read."""
    return _SURROGATE.sub("\ufffd", text)


class Kind(StrEnum):
    """An item's kind decides the chat role it is sent under and how its header reads."""

    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL_RESULT = "tool_result"
    FILE_READ = "file_read"
    SUMMARY = "summary"
    MEMORY = "memory"

    @property
    def role(self) -> str:
        # Tool results are sent as user turns: a bare {"role": "tool"} message needs a paired
        # assistant tool call, which a window that may stub or drop the call cannot promise.
        if self in (Kind.SYSTEM, Kind.USER, Kind.ASSISTANT):
            return self.value
        return "user"

    @property
    def is_message(self) -> bool:
        """Messages are sent verbatim; other kinds carry a one-line header naming the item."""
        return self in (Kind.SYSTEM, Kind.USER, Kind.ASSISTANT)

    @classmethod
    def parse(cls, value: str) -> Kind:
        if not isinstance(value, str):  # None or a number: an AttributeError from .strip() said nothing
            names = ", ".join(k.value for k in cls)
            raise TypeError(f"item kind must be a Kind or one of {names}; got {value!r}")
        try:
            return cls(value.strip().lower().replace("-", "_"))
        except ValueError:
            names = ", ".join(k.value for k in cls)
            raise ValueError(f"unknown item kind {value!r}: use one of {names}") from None


class LinkKind(StrEnum):
    SUMMARIZES = "summarizes"  # summary item -> each original it stands for
    DERIVED_FROM = "derived_from"  # item computed from another (e.g. an edited copy)
    REPLIES_TO = "replies_to"  # tool result -> the assistant call that asked for it
    CITES = "cites"  # item mentions something another item introduced
    SUPERSEDES = "supersedes"  # rolled-forward summary -> the summary it replaces

    @classmethod
    def parse(cls, value: str) -> LinkKind:
        if not isinstance(value, str):
            names = ", ".join(k.value for k in cls)
            raise TypeError(f"link kind must be a LinkKind or one of {names}; got {value!r}")
        try:
            return cls(value.strip().lower())
        except ValueError:
            names = ", ".join(k.value for k in cls)
            raise ValueError(f"unknown link kind {value!r}: use one of {names}") from None


# Links that count as "someone depends on this item" when scoring inbound references.
REFERENCE_LINKS = (LinkKind.CITES, LinkKind.REPLIES_TO, LinkKind.DERIVED_FROM)


@dataclass(frozen=True)
class Item:
    """One original as stored. `turn` is the store's turn counter when the item was added."""

    id: int
    kind: Kind
    body: str
    hash: str
    turn: int
    timestamp: float | None
    source: str | None
    file_hash: str | None
    pinned: bool
    importance: float


@dataclass
class ItemMeta:
    """The body-less row kept in memory for scoring and selection (5,000 of these must solve in ms)."""

    id: int
    kind: Kind
    hash: str
    turn: int
    source: str | None
    file_hash: str | None
    pinned: bool
    importance: float
    inbound: int = 0
    covered_by: int | None = None  # newest summary item standing for this one
    superseded: bool = False  # a summary replaced by a rolled-forward one

    @property
    def dedup_key(self) -> str:
        """What copies of one content share, so that a window keeps one of them: the body's hash. Not
        for a summary, which stands for its own originals: two summaries of different stretches whose
        model wrote the same words ("Nothing of note.") were one group, so the older was dropped as a
        duplicate and, with its originals covered, nothing of that stretch was left in any window."""
        return self.hash if self.kind is not Kind.SUMMARY else f"{self.hash}#{self.id}"
