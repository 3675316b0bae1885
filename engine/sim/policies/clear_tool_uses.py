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

from engine.artifacts import Message, ToolResult
from engine.providers.base import Block
from engine.sim.policies.base import (
    PeerRequest,
    TurnView,
    blocks_tokens,
    documented_trigger,
    last_fitting_window,
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
        # Each turn clears the same results as the turn before and a few more, so a message's cleared
        # form and the tokens it frees are made once: (message hash, parts cleared) -> (message, freed).
        self._cleared: dict[tuple[str, tuple[int, ...]], tuple[Message, int]] = {}
        # A message the clearing leaves as it was is made again from its parts (its hash recomputed),
        # once: message hash -> that message.
        self._rehashed: dict[str, Message] = {}
        # The conversation last scanned for results and what was found (see _results).
        self._scanned: tuple[tuple[Message, ...], list[tuple[int, int]]] = ((), [])

    def reset(self) -> None:
        self._cleared.clear()
        self._rehashed.clear()
        self._scanned = ((), [])

    def _results(self, msgs: tuple[Message, ...]) -> list[tuple[int, int]]:
        """(message, part) of every result clearing may take, in order. Each turn's conversation is the
        last one's and a few more messages: without tools to exclude, only the new ones are looked at."""
        if self.exclude_tools:
            names = {c.id: c.name for x in msgs if x.role == "assistant" for c in x.tool_calls}
            return [
                (i, j)
                for i, x in enumerate(msgs)
                for j, p in enumerate(x.parts)
                if isinstance(p, ToolResult) and names.get(p.call_id) not in self.exclude_tools
            ]
        prev, found = self._scanned
        if len(msgs) < len(prev) or msgs[: len(prev)] != prev:
            prev, found = (), []
        found = found + [
            (i, j)
            for i in range(len(prev), len(msgs))
            for j, p in enumerate(msgs[i].parts)
            if isinstance(p, ToolResult)
        ]
        self._scanned = (msgs, found)
        return found

    def _trigger(self, v: TurnView) -> int:
        if self.trigger is not None:
            return self.trigger
        return documented_trigger(v, DEFAULT_TRIGGER)

    def request(self, v: TurnView) -> PeerRequest:
        m = v.measure
        msgs = v.messages
        every = v.history.of(msgs, m)
        full = system_tokens(v) + blocks_tokens(every)
        actions: list[str] = []
        blocks_of: list[Block] | None = every
        if full > self._trigger(v):
            results = self._results(msgs)
            clear = results[: max(0, len(results) - self.keep)]
            by_msg: dict[int, list[int]] = {}
            for i, j in clear:
                by_msg.setdefault(i, []).append(j)
            freed = 0
            new = list(msgs)
            for i, js in by_msg.items():
                x = msgs[i]
                key = (x.sha, tuple(js))
                got = self._cleared.get(key)
                if got is None:
                    parts = list(x.parts)
                    gain = 0
                    for j in js:
                        p = parts[j]
                        assert isinstance(p, ToolResult)
                        cleared = ToolResult(p.call_id, PLACEHOLDER, p.is_error, "cleared")
                        gain += m.part(p) - m.part(cleared)
                        parts[j] = cleared
                    got = self._cleared[key] = (Message(x.role, tuple(parts)), gain)
                new[i], gain = got
                freed += gain
            if clear and freed >= self.clear_at_least:
                rehashed = self._rehashed
                for i, x in enumerate(new):
                    if i not in by_msg:  # the rest made again from their parts (their hashes recomputed)
                        y = rehashed.get(x.sha)
                        if y is None:
                            y = rehashed[x.sha] = Message(x.role, x.parts)
                        new[i] = y
                msgs = tuple(new)
                blocks_of = None
                actions.append("clear_tool_uses")
        budget = v.ceiling - system_tokens(v)
        if blocks_of is None:
            blocks_of = v.history.of(msgs, m)
        if blocks_tokens(blocks_of) > budget:
            msgs = last_fitting_window(v, msgs, budget)
            blocks_of = v.history.of(msgs, m)
            actions.append("drop_oldest_rounds")
        blocks = list(v.system) + blocks_of
        return PeerRequest(with_tail_marker(blocks, v.markers), actions, bool(actions))
