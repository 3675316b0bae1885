"""Peer context policies for `cp-inspect simulate --policies`: one module per policy.

Peers (replayed from each recording's uncompacted conversation, see base.py):
  paper                 no compaction at the recorded window (the agent's own requests when imported)
  sliding_window        LangChain trim_messages, strategy "last"
  clear_tool_uses       Anthropic context editing clear_tool_uses_20250919, documented defaults
  server_compaction     Anthropic server-side compaction compact_20260112
  threshold_compaction  Claude Code-style auto-compact at a high threshold
Engine policies (the engine itself, under the what-if window):
  wave1                 the first release's per-turn planner
  cost_aware            the default: stateful compaction that pays for itself
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from engine.sim.policies import clear_tool_uses, compaction, paper, sliding_window
from engine.sim.policies.base import PeerRequest, TurnView


class Peer(Protocol):
    name: str

    def reset(self) -> None: ...

    def request(self, v: TurnView) -> PeerRequest: ...


PEERS: dict[str, Callable[[], Peer]] = {
    paper.NAME: paper.Paper,
    sliding_window.NAME: sliding_window.SlidingWindow,
    clear_tool_uses.NAME: clear_tool_uses.ClearToolUses,
    compaction.SERVER: compaction.server_compaction,
    compaction.THRESHOLD: compaction.threshold_compaction,
}
ENGINE_POLICIES = ("wave1", "cost_aware")
ALL = (
    "paper",
    "sliding_window",
    "clear_tool_uses",
    "server_compaction",
    "threshold_compaction",
    *ENGINE_POLICIES,
)
DOCS = {
    paper.NAME: paper.DOC,
    sliding_window.NAME: sliding_window.DOC,
    clear_tool_uses.NAME: clear_tool_uses.DOC,
    compaction.SERVER: compaction.DOC_SERVER,
    compaction.THRESHOLD: compaction.DOC_THRESHOLD,
    "wave1": "the engine's first planner: re-plans every turn from the full history (tiers)",
    "cost_aware": "the engine's default: stateful, compacts deep when needed or when it pays back",
}

__all__ = ["PEERS", "ENGINE_POLICIES", "ALL", "DOCS", "Peer", "PeerRequest", "TurnView"]
