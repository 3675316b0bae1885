"""Summary compaction at a threshold: Anthropic's server-side compaction and a Claude Code-style one.

Both replace the conversation so far with one summary once the prompt crosses a threshold, then send
the summary plus everything after it, appending, until the threshold is crossed again.

- `server_compaction`: Anthropic's `compact_20260112` edit. Documented default trigger: 150,000 input
  tokens (three quarters of a 200k window; scaled to three quarters of a smaller what-if window). The
  API summarizes the older history into a compaction block and drops the prior messages on later turns:
  the turn that crosses the trigger is sent whole, and the summary is billed as that turn's extra output.
- `threshold_compaction`: a Claude Code-style auto-compact: when the next request would pass 95% of
  the window, the client first has the model summarize the conversation (the summary billed as extra
  output), then sends the summary and the newest round.

The simulator has no model, so a summary is a block of SUMMARY_TOKENS (at most a tenth of what it
replaces). The summarization call's own input (the conversation, mostly a cache read) is not billed
here: this favours both peers slightly.
"""

from __future__ import annotations

from engine.artifacts import Message
from engine.providers.base import Block
from engine.sim.policies.base import (
    SUMMARY_TOKENS,
    PeerRequest,
    TurnView,
    last_fitting_window,
    message_block,
    round_starts,
    system_tokens,
    text_block,
    total,
    with_tail_marker,
)

SERVER = "server_compaction"
THRESHOLD = "threshold_compaction"
DOC_SERVER = (
    "Anthropic compact_20260112 (trigger 150k of 200k -> 3/4 of the window), summary replaces history"
)
DOC_THRESHOLD = "Claude Code-style auto-compact at 95% of the window: summary + newest round"


class SummaryCompaction:
    def __init__(self, name: str, trigger_share: float, send_crossing_turn: bool) -> None:
        self.name = name
        self.trigger_share = trigger_share
        self.send_crossing_turn = send_crossing_turn  # server-side: the crossing turn goes out whole
        self.reset()

    def reset(self) -> None:
        self.cut = 0  # messages before this index are replaced by the summary
        self.summary: Block | None = None
        self.pending: tuple[int, int] | None = None  # (cut, summary tokens) to apply from next turn

    def _blocks(self, v: TurnView, msgs: tuple[Message, ...]) -> list[Block]:
        head = list(v.system) + ([self.summary] if self.summary is not None else [])
        return head + [message_block(x, v.measure) for x in msgs]

    def _summarize(self, v: TurnView, upto: int) -> int:
        replaced = sum(v.measure.item(x) for x in v.messages[self.cut : upto])
        replaced += self.summary.tokens if self.summary is not None else 0
        tokens = max(1, min(SUMMARY_TOKENS, replaced // 10))
        self.summary = text_block(f"{self.name} summary of messages [0, {upto})", tokens)
        self.cut = upto
        return tokens

    def request(self, v: TurnView) -> PeerRequest:
        m = v.measure
        actions: list[str] = []
        extra = 0
        if self.pending is not None:  # the compaction decided on the previous turn takes effect
            self.cut, tokens = self.pending
            self.summary = text_block(f"{self.name} summary of messages [0, {self.cut})", tokens)
            self.pending = None
        msgs = v.messages[self.cut :]
        blocks = self._blocks(v, msgs)
        trigger = int(self.trigger_share * v.window)
        if total(blocks) > trigger:
            starts = [s for s in round_starts(v.messages) if s > self.cut]
            upto = starts[-1] if starts else len(v.messages)  # keep the newest round
            if upto > self.cut:
                actions.append("compact")
                if self.send_crossing_turn:
                    replaced = sum(m.item(x) for x in v.messages[self.cut : upto])
                    replaced += self.summary.tokens if self.summary is not None else 0
                    extra = max(1, min(SUMMARY_TOKENS, replaced // 10))
                    self.pending = (upto, extra)
                else:
                    extra = self._summarize(v, upto)
                    msgs = v.messages[self.cut :]
                    blocks = self._blocks(v, msgs)
        budget = v.ceiling - system_tokens(v) - (self.summary.tokens if self.summary is not None else 0)
        if sum(m.item(x) for x in msgs) > budget:
            msgs = last_fitting_window(v, msgs, budget)
            blocks = self._blocks(v, msgs)
            actions.append("drop_oldest_rounds")
        return PeerRequest(with_tail_marker(blocks, v.markers), actions, bool(actions), extra)


def server_compaction() -> SummaryCompaction:
    return SummaryCompaction(SERVER, 0.75, send_crossing_turn=True)


def threshold_compaction() -> SummaryCompaction:
    return SummaryCompaction(THRESHOLD, 0.95, send_crossing_turn=False)
