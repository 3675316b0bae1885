"""The catalog: which context sources exist, how volatile they are, and who gives up tokens first.

Also holds the two kinds of state with special lifecycles: session latches (evaluated once, frozen;
a change is a recorded flip) and emergent context (found mid-turn, injected next turn only, deduplicated
by content hash, capped per list).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, TypeVar

from engine.errors import ConfigError
from engine.hashing import sha256_hex
from engine.types import CacheScope, Lifecycle, Priority, SectionKind

# A binder produces a section's text for this turn. It may be async (I/O) or a plain function; one that
# takes an argument receives the section's token budget for the turn.
Binder = (
    Callable[[], str] | Callable[[], Awaitable[str]] | Callable[[int], str] | Callable[[int], Awaitable[str]]
)

_E = TypeVar("_E", bound=Enum)


def source_option(enum: type[_E], value: object, what: str, source_id: str) -> _E:
    """One of add_source's enumerated options, given as the member, its value or its name in any case
    ("session" for CacheScope.SESSION, as `kind` already took "context"); anything else is a ConfigError
    that lists the choices. int("session") inside the engine raised a bare ValueError far from the call."""
    if isinstance(value, enum):
        return value
    if isinstance(value, str):
        by_name = enum.__members__.get(value.strip().upper())
        if by_name is not None:
            return by_name
    try:
        return enum(value)
    except (ValueError, TypeError):
        choices = ", ".join(m.name.lower() for m in enum)
        raise ConfigError(
            f"source {source_id!r}: {what} {value!r} is not one of {choices} (or engine.{enum.__name__}.*)"
        ) from None


# Send order of section kinds; within a kind, registration order. Anchors always lead.
KIND_ORDER: tuple[SectionKind, ...] = (
    SectionKind.IDENTITY,
    SectionKind.CONSTRAINTS,
    SectionKind.TOOLS,
    SectionKind.LATCH,
    SectionKind.MEMORY,
    SectionKind.WORKING_MEMORY,
    SectionKind.CONTEXT,
    SectionKind.GOAL,
    SectionKind.EMERGENT,
    SectionKind.HISTORY,
)


@dataclass(frozen=True)
class SourceSpec:
    """A registered context source. `id` doubles as the section id."""

    id: str
    kind: SectionKind
    lifecycle: Lifecycle = Lifecycle.PER_TURN
    scope: CacheScope = CacheScope.NONE
    priority: Priority = Priority.NORMAL
    estimate: int = 0  # estimated token cost before the first bind
    max_tokens: int | None = None  # per-section ceiling; None = whatever the plan gives it
    timeout_s: float = 2.0
    name: str = ""

    def __post_init__(self) -> None:
        if not self.id or not isinstance(self.id, str):
            raise ConfigError("a context source needs a non-empty string id")
        for what, v in (("estimate", self.estimate), ("max_tokens", self.max_tokens)):
            if v is None and what == "max_tokens":
                continue
            if not isinstance(v, int) or isinstance(v, bool):
                raise ConfigError(f"source {self.id!r}: {what} must be an integer token count, got {v!r}")
        if self.estimate < 0 or (self.max_tokens is not None and self.max_tokens < 0):
            raise ConfigError(f"source {self.id!r}: token estimates and ceilings must be >= 0")
        # `not x > 0` also refuses NaN, which every comparison lets through (asyncio.wait_for(NaN) never
        # times out); infinity is refused too: a binder that hangs would hang the turn.
        t = self.timeout_s
        if not isinstance(t, (int, float)) or isinstance(t, bool) or not 0 < t < float("inf"):
            raise ConfigError(f"source {self.id!r}: timeout_s must be a positive number of seconds, got {t!r}")

    @property
    def label(self) -> str:
        return self.name or self.id.replace("_", " ").title()

    def to_event(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind.value,
            "lifecycle": self.lifecycle.value,
            "scope": int(self.scope),
            "priority": int(self.priority),
            "estimate": self.estimate,
            "max_tokens": self.max_tokens,
            "timeout_s": self.timeout_s,
            "name": self.name,
        }

    @classmethod
    def from_event(cls, ev: dict[str, Any]) -> SourceSpec:
        return cls(
            id=ev["id"],
            kind=SectionKind(ev["kind"]),
            lifecycle=Lifecycle(ev["lifecycle"]),
            scope=CacheScope(ev["scope"]),
            priority=Priority(ev["priority"]),
            estimate=ev["estimate"],
            max_tokens=ev["max_tokens"],
            timeout_s=ev["timeout_s"],
            name=ev.get("name", ""),
        )


def sort_key(spec: SourceSpec, registration_index: int) -> tuple[int, int]:
    return (KIND_ORDER.index(spec.kind), registration_index)


@dataclass
class Latch:
    """A named value held for the session (e.g. a mode); `flips` counts how often it changed, as each change
    breaks the cache."""
    name: str
    value: str
    sha: str
    flips: int = 0


@dataclass
class LatchTable:
    """Session latches: first value wins until explicitly changed; every change is a flip."""

    latches: dict[str, Latch] = field(default_factory=dict)

    def set(self, name: str, value: str) -> bool:
        """Returns True when this is a flip (the latch existed with a different value)."""
        sha = sha256_hex(value)
        cur = self.latches.get(name)
        if cur is None:
            self.latches[name] = Latch(name, value, sha)
            return False
        if cur.sha == sha:
            return False
        self.latches[name] = Latch(name, value, sha, cur.flips + 1)
        return True

    def render(self) -> str:
        return "\n".join(f"{k}: {self.latches[k].value}" for k in sorted(self.latches))


@dataclass(frozen=True)
class EmergentItem:
    """A one-turn reminder queued on a list, injected only in `due_turn`."""
    list_name: str
    text: str
    sha: str
    due_turn: int  # the only turn in which it is injected (one-turn TTL)


@dataclass
class EmergentQueue:
    """Items discovered mid-turn, injected into the next turn only.

    `seen` keeps every hash ever accepted so a replayed journal (or a tool that reports the same finding
    twice) cannot inject an item twice.
    """

    cap_per_list: int = 8
    items: list[EmergentItem] = field(default_factory=list)
    seen: set[str] = field(default_factory=set)

    def push(self, list_name: str, text: str, current_turn: int) -> EmergentItem | None:
        sha = sha256_hex(list_name + "\x00" + text)
        if sha in self.seen:
            return None
        due = current_turn + 1
        same = [i for i in self.items if i.list_name == list_name and i.due_turn == due]
        if len(same) >= self.cap_per_list:
            return None
        item = EmergentItem(list_name, text, sha, due)
        self.seen.add(sha)
        self.items.append(item)
        return item

    # Both asked every turn, nearly always of an empty queue: the comprehension (a frame of its own)
    # only when there is something to go through.
    def due(self, turn: int) -> list[EmergentItem]:
        return [i for i in self.items if i.due_turn == turn] if self.items else []

    def expire(self, turn: int) -> None:
        """Drop items whose turn has passed (called once a turn completes)."""
        if self.items:
            self.items = [i for i in self.items if i.due_turn > turn]
