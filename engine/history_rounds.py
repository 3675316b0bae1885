"""A history split into rounds, as (start, end) index ranges: a round starts at an assistant message and
runs until the next one (the messages before the first, the task, are round 0), so dropping or keeping
whole rounds never separates a tool call from its result. `Measure.rounds` (engine/assembly.py)
remembers the splits and extends the one a turn appended to (`_extend_rounds`)."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import compress
from operator import attrgetter

from engine.artifacts import Message, SectionItem
from engine.dropped_history import DroppedRounds, GrownRounds, Rounds


def history_rounds(items: tuple[SectionItem, ...]) -> list[tuple[int, int]]:
    """Split history into rounds as (start, end) index ranges.

    A round starts at an assistant message and runs until the next one, so an assistant's tool calls
    and the user message carrying their results always land in the same round: dropping or keeping
    whole rounds can never separate a call from its result. Messages before the first assistant
    message (the task) form round 0.
    """
    starts = assistant_positions(items)
    n = len(items)
    bounds: list[tuple[int, int]] = []
    if not starts or starts[0] > 0:
        bounds.append((0, starts[0] if starts else n))
    # zip/compress keep the per-message work in C: a long session's history is split every turn.
    if starts:
        bounds.extend(zip(starts, starts[1:] + [n], strict=True))
    return bounds


def _extend_rounds(bounds: Rounds, items: tuple[SectionItem, ...], k: int) -> Rounds:
    """history_rounds(items) from `bounds` = history_rounds(items[:k]) (0 < k < len(items)).

    Only the last round of the prefix changes (it ran to k, and now runs to the first new assistant
    message or the end); every earlier round is the same. The new messages' rounds follow. A list's
    or a GrownRounds' earlier rounds are not copied (GrownRounds): a long session's split grows by what
    a turn appended."""
    n = len(items)
    new = [k + i for i in assistant_positions(items[k:])]
    if isinstance(bounds, DroppedRounds):
        out = bounds[:-1]
        out.append((bounds[-1][0], new[0] if new else n))
        if new:
            out.extend(zip(new, new[1:] + [n], strict=True))
        return out
    if isinstance(bounds, list):  # (its rounds but the last are closed: a list of them of its own)
        bounds = GrownRounds(bounds[:-1], len(bounds) - 1, bounds[-1])
    return bounds.grown(new, n)


_ROLE = attrgetter("role")


def assistant_positions(items: Sequence[SectionItem]) -> list[int]:
    """Indices of the assistant messages in `items`."""
    try:
        roles = list(map(_ROLE, items))
    except AttributeError:  # not all messages (never in a history section, but stay correct)
        return [i for i, it in enumerate(items) if isinstance(it, Message) and it.role == "assistant"]
    return list(compress(range(len(roles)), map("assistant".__eq__, roles)))
