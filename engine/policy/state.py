"""The compacted history as folded state: where the cut is and what replaced the cut part.

History only grows, so an index into it stays valid: items [task_end, cut) are replaced by one note
that rides on the task message, items from `cut` on are sent as they are. Between compactions the
request is the same prefix plus what was appended, so the provider's cache keeps serving it. The state
changes only at a compaction, and the request event that follows carries the new state, so a replay
folds it back exactly (see Pipeline._apply).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class CompactionState:
    """The compacted history kept between turns: where the cut is, what it dropped and what replaced it."""
    cut: int = 0  # index of the first history item kept after the task; 0 = nothing cut
    dropped_tokens: int = 0  # tokens the cut part held (the note says so)
    dropped_rounds: int = 0
    compactions: int = 0  # compactions so far in this session
    turn: int = -1  # turn of the last compaction
    summary: str = ""  # key of a summary (Pipeline.summaries) that replaced the cut part, if any

    def to_event(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "cut": self.cut,
            "dropped_tokens": self.dropped_tokens,
            "dropped_rounds": self.dropped_rounds,
            "compactions": self.compactions,
            "turn": self.turn,
        }
        if self.summary:
            d["summary"] = self.summary
        return d

    @classmethod
    def from_event(cls, d: dict[str, Any]) -> CompactionState:
        return cls(
            int(d["cut"]),
            int(d["dropped_tokens"]),
            int(d["dropped_rounds"]),
            int(d["compactions"]),
            int(d["turn"]),
            str(d.get("summary", "")),
        )
