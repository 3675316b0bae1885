"""mini-swe-agent's own agent, made to compact its history as agents with a context manager do: before
its fourth model call it keeps the system prompt, the task and the last exchange, and puts a summary in
place of the turns between. Named with `mini --agent-class tests.capture.compacting_agent.CompactingAgent`
(the test's PYTHONPATH holds the repository); nothing else of mini changes."""

from __future__ import annotations

from typing import Any

from minisweagent.agents.interactive import InteractiveAgent

SUMMARY = "Summary of the work so far: printed step-one and step-two."
COMPACT_BEFORE_CALL = 4


class CompactingAgent(InteractiveAgent):
    def query(self) -> dict[str, Any]:
        if self.n_calls + 1 == COMPACT_BEFORE_CALL:
            self.messages = [*self.messages[:2], {"role": "user", "content": SUMMARY}, *self.messages[-2:]]
        return super().query()
