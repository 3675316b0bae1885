"""Summary compaction at a threshold: Anthropic's server-side compaction and a Claude Code-style one.

Both replace the conversation so far with one summary once the prompt crosses a threshold, then send
the summary plus everything after it, appending, until the threshold is crossed again. The summary is
written by a model call of its own, billed (input and output) and cached like any request.

- `server_compaction`: Anthropic's `compact_20260112` edit (platform.claude.com, build-with-claude/
  compaction). Documented: `trigger` defaults to 150,000 input tokens (at least 50,000); when the input
  exceeds it the API summarizes the current conversation into a compaction block and continues the
  response from the compacted context, so that request runs two sampling iterations, both billed: the
  compaction iteration (the whole prompt in, the summary out) and the message iteration (system prompt
  and summary in, the reply out). On later requests the API drops every message block before the
  compaction block. The default trigger is for a 200k window; where it would not fire before the
  request outgrew a smaller what-if window, it is three quarters of that window (below 50,000 tokens,
  i.e. in windows under ~67k, the API itself would refuse such a trigger: a what-if, and the column's
  description says so).
- `threshold_compaction`: a Claude Code-style auto-compact: when the request would pass 95% of the
  window (or, in a small window, no longer fit its ceiling), the client first has the model summarize
  the conversation (that request, as it would have been sent, plus the summary as its output), then
  sends the summary and the newest round. Claude Code documents no figure: 95% was its default in 2025;
  later builds are reported (issue threads, not documentation) to compact about 13k tokens plus the
  output reserve below the window, i.e. ~83% of 200k. The peer keeps 95% ("a high threshold").

The simulator has no model, so a summary is a block of SUMMARY_TOKENS (at most a tenth of what it
replaces).
"""

from __future__ import annotations

from itertools import accumulate, islice

from engine.assembly import Measure
from engine.providers.base import Block
from engine.sim.policies.base import (
    SUMMARY_TOKENS,
    Messages,
    PeerRequest,
    SideCall,
    TurnView,
    documented_trigger,
    last_fitting_window,
    newest_round_start,
    system_tokens,
    text_block,
    with_tail_marker,
)

SERVER = "server_compaction"
THRESHOLD = "threshold_compaction"
SERVER_TRIGGER = 150_000  # compact_20260112's documented default trigger (input tokens)
DOC_SERVER = (
    "Anthropic compact_20260112 (trigger 150k; 3/4 of a window too small for it, under the API's 50k minimum "
    "below a 67k window): a compaction and a message iteration billed, earlier history dropped"
)
DOC_THRESHOLD = (
    "Claude Code-style auto-compact at 95% of the window: a summarizing call, then summary + newest round"
)


class SummaryCompaction:
    """The state both share: where the summarized part ends and the summary standing in for it."""

    name = ""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.cut = 0  # messages before this index are replaced by the summary
        self.summary: Block | None = None
        # The conversation last weighed, the Measure it was weighed with, and its running sums (see
        # _running_sums).
        self._sums: tuple[Messages, Measure, list[int]] | None = None

    def _running_sums(self, v: TurnView) -> list[int]:
        """sums[i] = the tokens of v.messages[:i] (Measure.item each), carried from the last call's: a
        conversation that starts with the last one is summed from where that one ended.

        Measure.cumulative gives the same sums, but it finds its lineage by asking whether this view's
        new tuple starts with the last one: by value (a copy and a compare of the whole conversation)
        and then its memo's links released, each call (a 3,000-turn what-if: ~0.3 ms a call late, per
        compaction column). The views say when a conversation was made from the last one by appending
        (HistoryBlocks.extends); else it is compared, and summed afresh where it does not start so."""
        msgs, m = v.messages, v.measure
        held = self._sums
        if held is not None and held[1] is m:
            was, _, sums = held
            k = len(was)
            if msgs is was:
                return sums
            if k <= len(msgs) and (v.history.extends(msgs, was) or msgs[:k] == was):
                sums += islice(accumulate(map(m.item, msgs[k:]), initial=sums[-1]), 1, None)
                self._sums = (msgs, m, sums)
                return sums
        sums = list(accumulate(map(m.item, msgs), initial=0))
        self._sums = (msgs, m, sums)
        return sums

    def _blocks(self, v: TurnView, msgs: Messages) -> list[Block]:
        head = list(v.system) + ([self.summary] if self.summary is not None else [])
        # The session's Blocks of these messages, made once each (HistoryBlocks): a Block made again
        # for every message sent, every turn, was the peers' largest share of a long what-if.
        return head + v.history.of(msgs, v.measure, copy=False)  # (copied into the request here)

    def _messages_tokens(self, v: TurnView, msgs: Messages) -> int:
        """The tokens of `msgs`, a tail of the conversation (what follows the cut, or a window of it),
        from its running sums (_running_sums, extended by what each turn appended): summed afresh, each check read every message since the cut, every call (a
        3,000-turn what-if: the whole session, two or three times a turn, per compaction column). A
        message's Block holds its Measure count (message_block), so this is their Blocks' total too."""
        sums = self._running_sums(v)
        n = len(v.messages)
        return sums[n] - sums[n - len(msgs)]

    def _head_tokens(self, v: TurnView) -> int:
        return system_tokens(v) + (self.summary.tokens if self.summary is not None else 0)

    def _fit(self, v: TurnView, msgs: Messages, actions: list[str]) -> Messages:
        """What a client must do before the API rejects the prompt: drop the oldest whole rounds.
        `msgs`: the conversation from the cut on (v.messages[self.cut:])."""
        if self._messages_tokens(v, msgs) > v.ceiling - self._head_tokens(v):
            actions.append("drop_oldest_rounds")
            return last_fitting_window(v, msgs, v.ceiling - self._head_tokens(v))
        return msgs

    def _summarize(self, v: TurnView, msgs: Messages, upto: int) -> int:
        """Replace the summary and messages before `upto` (of which `msgs` were sent) by a new summary."""
        replaced = sum(v.measure.item(x) for x in msgs)
        replaced += self.summary.tokens if self.summary is not None else 0
        tokens = max(1, min(SUMMARY_TOKENS, replaced // 10))
        self.summary = text_block(f"{self.name} summary of messages [0, {upto})", tokens)
        self.cut = upto
        return tokens


class ServerCompaction(SummaryCompaction):
    name = SERVER

    def request(self, v: TurnView) -> PeerRequest:
        actions: list[str] = []
        msgs = self._fit(v, v.messages[self.cut :], actions)
        blocks = self._blocks(v, msgs)
        side: list[SideCall] = []
        if msgs and self._head_tokens(v) + self._messages_tokens(v, msgs) > documented_trigger(
            v, SERVER_TRIGGER
        ):
            # The compaction iteration reads the whole prompt and writes the summary; the message
            # iteration then answers from the system prompt and the compaction block alone.
            actions.append("compact")
            summary = self._summarize(v, msgs, len(v.messages))
            side.append(SideCall(with_tail_marker(blocks, v.markers), summary))
            blocks = self._blocks(v, ())
        return PeerRequest(with_tail_marker(blocks, v.markers), actions, bool(actions), side)


class ThresholdCompaction(SummaryCompaction):
    name = THRESHOLD
    share = 0.95

    def request(self, v: TurnView) -> PeerRequest:
        actions: list[str] = []
        msgs = v.messages[self.cut :]
        side: list[SideCall] = []
        # At 95% of the window, or where the request would no longer fit below that (a small window's
        # response reserve): Claude Code compacts before it overflows, it never drops rounds instead.
        if self._head_tokens(v) + self._messages_tokens(v, msgs) > min(int(self.share * v.window), v.ceiling):
            newest = newest_round_start(v.messages, self.cut)
            upto = len(v.messages) if newest is None else newest  # keep the newest round
            if upto > self.cut:
                actions.append("compact")
                # The summarizing call: the conversation as it would have been sent, the summary out.
                asked = with_tail_marker(self._blocks(v, self._fit(v, msgs, [])), v.markers)
                side.append(SideCall(asked, self._summarize(v, v.messages[self.cut : upto], upto)))
                msgs = v.messages[self.cut :]
        msgs = self._fit(v, msgs, actions)
        blocks = self._blocks(v, msgs)
        return PeerRequest(with_tail_marker(blocks, v.markers), actions, bool(actions), side)


def server_compaction() -> ServerCompaction:
    return ServerCompaction()


def threshold_compaction() -> ThresholdCompaction:
    return ThresholdCompaction()
