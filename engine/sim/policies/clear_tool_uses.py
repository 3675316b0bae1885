"""Anthropic's server-side context editing, strategy `clear_tool_uses_20250919`.

Documented behaviour and defaults (platform.claude.com, build-with-claude/context-editing):
- `trigger`: 100,000 input tokens. Once the prompt exceeds it, the oldest tool results are cleared in
  chronological order and replaced with placeholder text; the tool use blocks stay.
- `keep`: 3 tool uses. The most recent tool use/result pairs kept after clearing.
- `clear_at_least`: none. The minimum tokens a clearing must free (else it does not clear).
- `exclude_tools`: none. Tools whose results are never cleared.
- `clear_tool_inputs`: false (only results are cleared).
The edit is applied server-side to the full history the client sends, before caching, so it is
recomputed on every request; the documentation warns that each clearing invalidates the cached prefix
from the first cleared result on.

The default trigger is for Claude's 200k-token window (it fires at half of it). It is applied as
documented wherever it fires before the request would outgrow the what-if window; in a window too small
for it, it is the same half of that window (else it would never fire before the request overflowed).
Where clearing still leaves the request over the window, the oldest whole rounds are dropped (what a
client must do before the API rejects the prompt).
"""

from __future__ import annotations

from dataclasses import replace

from engine.artifacts import Message, ToolResult
from engine.sim.policies.base import (
    PeerRequest,
    TurnView,
    documented_trigger,
    last_fitting_window,
    message_block,
    system_tokens,
    with_tail_marker,
)

NAME = "clear_tool_uses"
DOC = (
    "Anthropic context editing clear_tool_uses_20250919 (documented defaults: trigger 100k, or half of "
    "a window too small for it; keep 3; no clear_at_least)"
)
DEFAULT_TRIGGER = 100_000
PLACEHOLDER = "[tool result cleared by context editing]"


class ClearToolUses:
    name = NAME

    def __init__(
        self,
        trigger: int | None = None,
        keep: int = 3,
        clear_at_least: int = 0,
        exclude_tools: tuple[str, ...] = (),
    ) -> None:
        self.trigger = trigger
        self.keep = keep
        self.clear_at_least = clear_at_least
        self.exclude_tools = frozenset(exclude_tools)

    def reset(self) -> None:
        pass

    def _trigger(self, v: TurnView) -> int:
        if self.trigger is not None:
            return self.trigger
        return documented_trigger(v, DEFAULT_TRIGGER)

    def request(self, v: TurnView) -> PeerRequest:
        m = v.measure
        msgs = v.messages
        full = system_tokens(v) + sum(m.item(x) for x in msgs)
        actions: list[str] = []
        if full > self._trigger(v):
            names = {c.id: c.name for x in msgs if x.role == "assistant" for c in x.tool_calls}
            results = [
                (i, j)
                for i, x in enumerate(msgs)
                for j, p in enumerate(x.parts)
                if isinstance(p, ToolResult) and names.get(p.call_id) not in self.exclude_tools
            ]
            clear = results[: max(0, len(results) - self.keep)]
            freed = 0
            new = list(msgs)
            for i, j in clear:
                x = new[i]
                p = x.parts[j]
                assert isinstance(p, ToolResult)
                cleared = ToolResult(p.call_id, PLACEHOLDER, p.is_error, "cleared")
                freed += m.part(p) - m.part(cleared)
                parts = list(x.parts)
                parts[j] = cleared
                new[i] = replace(x, parts=tuple(parts), sha="")
            if clear and freed >= self.clear_at_least:
                msgs = tuple(Message(x.role, x.parts) for x in new)  # recompute hashes
                actions.append("clear_tool_uses")
        budget = v.ceiling - system_tokens(v)
        if sum(m.item(x) for x in msgs) > budget:
            msgs = last_fitting_window(v, msgs, budget)
            actions.append("drop_oldest_rounds")
        blocks = list(v.system) + [message_block(x, m) for x in msgs]
        return PeerRequest(with_tail_marker(blocks, v.markers), actions, bool(actions))
