"""History operations shared by several Optimize rules (a helper module, not a rule).

Rules stay independent of each other: a rule that needs to drop rounds or locate the history section
imports these helpers, never another rule's module.
"""

from __future__ import annotations

from engine.artifacts import Message, Text
from engine.assembly import Assembly, Measure, history_rounds, omission_marker
from engine.types import Form, SectionKind


def history_index(asm: Assembly) -> int | None:
    """Position of the history section in the assembly, or None when there is none."""
    return next((i for i, s in enumerate(asm) if s.kind == SectionKind.HISTORY), None)


def drop_oldest(asm: Assembly, idx: int, count: int, m: Measure) -> tuple[Assembly, int]:
    """Drop the `count` oldest droppable rounds of the history at asm[idx]; returns (asm, tokens saved).

    The task (round 0) and the newest round are never droppable, and a round is dropped whole, so a
    tool call and its result leave together. One omission marker rides on the task message (replacing
    an earlier marker), so the conversation still starts with a user turn and alternates."""
    hist = asm[idx]
    rounds = history_rounds(hist.items)
    droppable = rounds[1:-1]
    if count <= 0 or not droppable:
        return asm, 0
    gone = droppable[:count]
    start, end = gone[0][0], gone[-1][1]
    removed = hist.items[start:end]
    saved = m.items(removed)
    first = hist.items[0]
    marker = Text(omission_marker(saved, f"{len(gone)} earlier rounds dropped"))
    if isinstance(first, Message) and first.role == "user":
        parts = tuple(p for p in first.parts if not (isinstance(p, Text) and p.text.startswith("[...")))
        prior = sum(m.part(p) for p in first.parts if isinstance(p, Text) and p.text.startswith("[..."))
        new_first = Message("user", parts + (marker,))
        saved -= m.item(new_first) - m.item(first) + prior
        items = (new_first,) + hist.items[1:start] + hist.items[end:]
    else:
        items = hist.items[:start] + hist.items[end:]
    new_hist = hist.with_items(items, Form.TRIMMED, saved)
    return asm[:idx] + (new_hist,) + asm[idx + 1 :], saved
