"""History operations shared by several Optimize rules (a helper module, not a rule).

Rules stay independent of each other: a rule that needs to drop rounds or locate the history section
imports these helpers, never another rule's module.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from typing import Any

from engine.artifacts import Message, SectionItem, Text
from engine.assembly import Assembly, Measure, omission_marker
from engine.dropped_history import Round
from engine.types import Form, SectionKind


def task_end(items: Sequence[Any]) -> int:
    """End of round 0 (the task): the first assistant message, or the whole history."""
    return next(
        (i for i, it in enumerate(items) if isinstance(it, Message) and it.role == "assistant"), len(items)
    )


def history_index(asm: Assembly) -> int | None:
    """Position of the history section in the assembly, or None when there is none."""
    for i, s in enumerate(asm):  # a plain loop: called several times a turn, a generator costs more
        if s.kind is SectionKind.HISTORY:
            return i
    return None


def drop_oldest(asm: Assembly, idx: int, count: int, m: Measure) -> tuple[Assembly, int]:
    """Drop the `count` oldest droppable rounds of the history at asm[idx]; returns (asm, tokens saved).

    The task (round 0) and the newest round are never droppable, and a round is dropped whole, so a
    tool call and its result leave together. One omission marker rides on the task message (replacing
    an earlier marker), so the conversation still starts with a user turn and alternates."""
    hist = asm[idx]
    rounds = m.rounds(hist.items)
    # The droppable rounds are rounds[1:-1]; the oldest `count` of them read by index, not sliced out (two
    # copies of the whole conversation's rounds a turn in wave 1, which splits all of it every turn).
    count = min(count, len(rounds) - 2)
    if count <= 0:
        return asm, 0
    start, end = rounds[1][0], rounds[count][1]
    # The history's running sums (one list per lineage, extended by what a turn appended) make the
    # dropped range's tokens one subtraction: summing the range, or what stays, read thousands of
    # messages a compaction turn in a long session (wave 1 drops up to 3/4 of the rounds every turn).
    cum = m.cumulative(hist.items)
    return drop_range(asm, idx, start, end, count, cum[end] - cum[start], m)


def oldest_to_drop(
    items: tuple[SectionItem, ...],
    droppable: Sequence[Round],
    hist_tokens: int,
    need: int,
    m: Measure,
    at_least_one: bool = False,
) -> tuple[int, int]:
    """(count, tokens) of the fewest oldest `droppable` rounds whose tokens reach `need` (all of them
    when none do; none when need <= 0, or one with `at_least_one`).

    Computed from the newest end: the dropped tokens are the droppable total minus what is kept, and
    the droppable total comes from `hist_tokens` (the section's measured total, which the pipeline
    keeps as a running sum), so a turn costs the rounds it keeps, not the whole history."""
    n = len(droppable)
    if n == 0 or (need <= 0 and not at_least_one):
        return 0, 0
    # Running sums make every round's size one subtraction; sums of the newest rounds grow with their
    # count (sizes are never negative), so the most that fit in `room` is found by bisection over the
    # rounds' starting sums, read through a key (log n lookups, not a list of every round's start).
    cum = m.cumulative(items)
    first, last = droppable[0][0], droppable[-1][1]
    total_droppable = hist_tokens - cum[first] - (cum[len(items)] - cum[last])
    room = total_droppable - need  # what may stay of the droppable rounds
    cap = n - 1 if at_least_one else n
    i = bisect_left(droppable, cum[last] - room, n - cap, key=lambda r: cum[r[0]])  # oldest that can stay
    kept = cum[last] - cum[droppable[i][0]] if i < n else 0
    return i, total_droppable - kept


def cut_holds_after_appends(
    prev: tuple[SectionItem, ...],
    items: tuple[SectionItem, ...],
    below: float,
    acc: int,
    need: int,
    m: Measure | None = None,
) -> bool:
    """Whether oldest_to_drop, asked for `need` tokens of `items`, takes again the rounds it took of
    `prev` (where they held `acc` tokens and one round fewer held `below`), when `items` only appended
    to `prev` (its first items `prev`'s, the same objects or equal ones).

    A round ends where the next assistant message starts, so an append changes only the newest round,
    which is never droppable: every round droppable in `prev` is the same round with the same tokens
    in `items`. oldest_to_drop takes the fewest oldest rounds whose tokens reach `need`, and those sums
    only grow with the number of rounds (counts are never negative): with below < need <= acc it takes
    the same rounds, whatever was appended. The callers check what else their cut depends on (the same
    Measure, the section's offset, the compaction state). `m`: whether `items` starts with `prev` is
    asked of its remembered prefixes (Measure.starts_with), the same answer."""
    n = len(prev)
    if not below < need <= acc or n > len(items):
        return False
    if m is not None:
        return m.starts_with(items, prev)
    # The ends first (cheap rejections while several remembered cuts are tried), then all, in C.
    if items is prev:
        return True
    # Identity first: `==` on two references to one message still runs the dataclass's __eq__.
    a, b = items[n - 1], prev[n - 1]
    return (a is b or a == b) and (items[0] is prev[0] or items[0] == prev[0]) and items[:n] == prev


def _is_note(p: Any) -> bool:
    """An omission note (omission_marker's text) a message carries as a Text part of its own."""
    return isinstance(p, Text) and p.text.startswith("[...")


def note_tokens(msg: Message, m: Measure) -> int:
    """Tokens of the omission notes `msg` carries (what a new note on the task replaces)."""
    return sum(m.part(p) for p in msg.parts if _is_note(p))


def without_notes(msg: Message) -> tuple[Any, ...]:
    """`msg`'s parts but its omission notes: the task's own, which a new note is put after."""
    return tuple(p for p in msg.parts if not _is_note(p))


def dropped_note(parts: tuple[Any, ...], rounds: int, tokens: int) -> Message:
    """The task message (its parts without a note) carrying one note for `rounds` dropped rounds of
    `tokens`: what drop_range puts first in the kept history (simulate's lanes make the same)."""
    return Message("user", (*parts, Text(omission_marker(tokens, f"{rounds} earlier rounds dropped"))))


def drop_range(
    asm: Assembly,
    idx: int,
    start: int,
    end: int,
    rounds: int,
    saved: int,
    m: Measure,
    marked: Message | None = None,
) -> tuple[Assembly, int]:
    """Drop history items [start, end) (`rounds` whole rounds holding `saved` tokens) behind one
    omission marker on the task message; returns (asm, tokens saved net of the marker). `marked`: the
    task message with that marker, from an earlier drop of the same rounds after the same task (the
    same value; as the same object, a later comparison of the kept histories is an identity check)."""
    hist = asm[idx]
    first = hist.items[0]
    # The kept history's total, from the old one: every section total is the sum of its items, so
    # it is the old total less the dropped items (and the task message as it was, when it is swapped).
    total = m.section(hist) - saved
    if isinstance(first, Message) and first.role == "user":
        prior = note_tokens(first, m)
        new_first = marked
        if new_first is None:
            new_first = dropped_note(without_notes(first), rounds, saved)
        head = m.item(new_first) - m.item(first)
        total += head
        saved -= head + prior
        items = (new_first,) + hist.items[1:start] + hist.items[end:]
    else:
        head = 0
        items = hist.items[:start] + hist.items[end:]
    new_hist = hist.with_items(items, Form.TRIMMED, saved)
    m.derived(new_hist, total)
    if start >= 1:  # (the kept history's split and running sums, from the cut one's: see dropped_from)
        m.dropped_from(items, hist.items, start, end, head)
    return asm[:idx] + (new_hist,) + asm[idx + 1 :], saved
