"""Cache breaks by cause as a person reads them (simulate's text, the inspector's session what-if):
the agent's edits of one kind at several turns in one row. A column's `cache_break_causes` keep one
cause a turn for the agent's edits (engine.importers.history_edits.rewrite_cause: "history rewritten by
the agent: turn 3's tool result truncated"), and an agent that truncates an old output every turn
(SWE-agent's last_n_observations) made as many rows as turns; --json keeps each cause.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from engine.wording import counted

AGENT_REWROTE = "history rewritten by the agent: "  # (how rewrite_cause's causes begin)
_ONE_EDIT = re.compile(r"turn (\d+)'s (.+)")  # one edit, after that: "turn 3's tool result truncated"
SHOWN_TURNS = 3  # a grouped row's first turns shown before "... LAST"


def causes_said(causes: Mapping[str, int]) -> list[str]:
    """`causes` (cause -> breaks) one string each, in their order: the agent's edits of one kind at
    several turns one row with their count and turns, "tool result truncated by the agent: 14 turns
    (3, 5, 8, ... 40)", said where the kind's first cause stands; any other cause, and a kind seen at
    one turn, "CAUSE xN" as before."""
    kinds: dict[str, list[tuple[int, int]]] = {}
    for cause, n in causes.items():
        m = _one_edit(cause)
        if m is not None:
            kinds.setdefault(m[1], []).append((m[0], n))
    said: list[str] = []
    for cause, n in causes.items():
        m = _one_edit(cause)
        at = kinds[m[1]] if m is not None else []
        if m is None or len(at) < 2:
            said.append(f"{cause} x{n}")
        elif at[0][0] == m[0]:  # (the kind's first cause: its row; the others are in it)
            said.append(f"{m[1]} by the agent: {_turns(at)}")
    return said


def _turns(at: list[tuple[int, int]]) -> str:
    """A kind's (turn, breaks) said: "7 turns (1, 2, 3, ... 7)"; when a turn counts more than once
    (several recordings' causes summed), "9 breaks at 7 turns (...)"."""
    turns = sorted(t for t, _ in at)
    breaks = sum(n for _, n in at)
    count = counted(len(turns), "turn")
    if breaks != len(turns):
        count = f"{counted(breaks, 'break')} at {count}"
    shown = ", ".join(map(str, turns[:SHOWN_TURNS]))
    if len(turns) > SHOWN_TURNS + 1:
        shown += f", ... {turns[-1]}"
    elif len(turns) > SHOWN_TURNS:
        shown += f", {turns[-1]}"
    return f"{count} ({shown})"


def _one_edit(cause: str) -> tuple[int, str] | None:
    """(turn, what and how) of a cause naming one edit by the agent ("turn 3's tool result truncated"),
    else None (a compaction's cause, several edits at one turn, an earlier message edited)."""
    if not cause.startswith(AGENT_REWROTE) or ", " in cause[len(AGENT_REWROTE) :]:
        return None
    m = _ONE_EDIT.fullmatch(cause, len(AGENT_REWROTE))
    return None if m is None else (int(m.group(1)), m.group(2))
