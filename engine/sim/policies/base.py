"""What a peer policy sees each turn and what it returns, plus helpers every peer uses.

A peer is a context policy people run today (LangChain's trim_messages, Anthropic's context editing
and compaction, a Claude Code-style threshold compaction), re-implemented from its documentation so it
can be replayed over the same recordings as the engine, through the same cache simulator and prices.

Each turn a peer receives the full, uncompacted request as the engine would lay it out (tools and
system blocks as serialized, the conversation as messages) and returns the blocks it would send. Peers
keep their own state between turns (a compaction summary, for instance); `reset()` starts a session.
The simulator compares blocks by content hash and token count only, so a peer's blocks need not be a
valid provider body: a placeholder or a summary is a block with its own hash and size.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import accumulate
from operator import attrgetter
from typing import Any

from engine.artifacts import Message
from engine.assembly import Measure
from engine.hashing import sha256_hex
from engine.history_rounds import history_rounds
from engine.providers.base import Block
from engine.sim.conversation import Conversation
from engine.sim.grown import Grown

# A conversation as the peers read it: a tuple (an edited conversation, a window of one) or a view's
# Conversation (engine/sim/conversation.py: the first n messages of a list, not copied per turn). Never
# changed in place; a conversation's identity says it is the same one (HistoryBlocks).
Messages = Sequence[Message]

# A compaction summary's size when the peer's own model would write it: the simulator has no model,
# so it stands in with a block of this many tokens (never more than a tenth of what it replaces).
SUMMARY_TOKENS = 2_000


@dataclass(frozen=True)
class TurnView:
    """What a peer policy sees on one turn: the uncompacted conversation, the window and the provider."""

    turn: int
    system: tuple[Block, ...]  # tools and system prompt blocks, in wire order, with their markers
    messages: Messages  # the whole conversation so far, uncompacted
    window: int  # the context window of the what-if
    ceiling: int  # the most tokens a request may hold (window minus margin and response reserve)
    markers: bool  # the provider caches at explicit breakpoints (Anthropic, Bedrock)
    measure: Measure
    # One per simulated session, shared by its views (see HistoryBlocks); a view made alone gets its own.
    history: HistoryBlocks = field(default_factory=lambda: HistoryBlocks(), compare=False, repr=False)


_SHA = attrgetter("sha")
_TOKENS = attrgetter("tokens")


class HistoryBlocks:
    """A session's history Blocks (no marker) by message hash, made once each and handed out again.

    Every turn a peer lays out the whole conversation as Blocks: making a new Block per message per turn
    was quadratic work (1,500 turns: 2.25 million Blocks a policy), and the simulator, meeting objects it
    had not seen the turn before, compared each request with the previous one block by block in Python
    (dataclass __eq__), where the very same objects compare in C. A message's Block depends only on its
    hash and the session's Measure (`message_block`), so the figures are the same."""

    # The last few conversations laid out, with their Blocks. Each turn every peer asks for the whole
    # conversation (the same tuple), and next turn's is this one with the new messages appended: the
    # Blocks are carried, and only the messages after the carried ones are looked up (a lookup by hash
    # per message, per peer, per turn was the peers' largest share left of a long what-if). A window of
    # the newest messages is the tail of a carried list. Several, the last extended kept: each peer
    # that edits the conversation (clear_tool_uses' variants, a compaction) asks for its own, in between.
    CARRIED = 16

    def __init__(self) -> None:
        self.by_sha: dict[str, Block] = {}
        # (conversation, its Blocks, their tokens), the last extended or edited last.
        self.carried: list[tuple[Messages, list[Block], int]] = []
        # (a conversation, the one it was made from by appending): see note_extends.
        self._extended: tuple[Messages, Messages] | None = None

    def note_extends(self, msgs: Messages, was: Messages) -> None:
        """Say that `msgs` was made as `was` with messages appended (msgs[:len(was)] are was's objects).

        The views of one pass over a session (TurnViews) are made so, one from the last, and each peer
        asks every turn whether this turn's conversation starts with last turn's: by value that is a
        copy and a comparison of the whole conversation (several a peer a turn, each O(history): a
        peer's per-call cost grew with the call's index at a constant request size). Only the newest
        such pair is held (both tuples, so their ids stay theirs)."""
        self._extended = (msgs, was)

    def extends(self, msgs: Messages, was: Messages) -> bool:
        """True when msgs[:len(was)] == was is known without reading them (note_extends said so, or
        they are one object); False means not known (compare them)."""
        if msgs is was:
            return True
        got = self._extended
        return got is not None and got[0] is msgs and got[1] is was

    def _keep(self, msgs: Messages, blocks: list[Block], tokens: int, copy: bool) -> list[Block]:
        carried = self.carried
        carried.append((msgs, blocks, tokens))
        if len(carried) > self.CARRIED:
            del carried[0]
        return blocks.copy() if copy else blocks

    def of(self, msgs: Messages, measure: Measure, copy: bool = True) -> list[Block]:
        """message_block(m, measure) of each message, in order.

        copy=False: the list may be this store's own (the carried one): read it before the store's next
        call and never change it. A peer that copies the Blocks into its request anyway (system blocks
        first) spares a copy of the whole conversation a call: each is a reference count touched per
        Block, thousands of scattered objects, ~0.1 ms a call on a 3,000-turn session, per peer."""
        if isinstance(msgs, list):  # (a conversation is a tuple, or a view's Conversation)
            return self.looked_up(msgs, measure)
        carried = self.carried
        for done, blocks, _ in carried:
            if done is msgs:
                return blocks.copy() if copy else blocks
        for i, (done, blocks, tokens) in enumerate(carried):
            k = len(done)
            # Equal messages have equal hashes, so equal Blocks; the same objects compare in C.
            # (The last carried message first: a window that starts elsewhere fails there, not after a slice.)
            if (
                k <= len(msgs)
                and (not k or msgs[k - 1] is done[-1])
                and (self.extends(msgs, done) or msgs[:k] == done)
            ):
                added = self.looked_up(msgs[k:], measure)
                del carried[i]
                # The carried list is this store's own (every caller got a copy): extended in place, not
                # copied whole a second time each turn (a peer's conversation grows with the session).
                blocks += added
                return self._keep(msgs, blocks, tokens + blocks_tokens(added), copy)
        for done, blocks, _ in carried:
            # A window of the newest messages (what a peer keeps when the whole does not fit).
            d = len(done) - len(msgs)
            if msgs and d >= 0 and msgs[-1] is done[-1] and msgs[0] is done[d] and done[d:] == msgs:
                return blocks[d:]
        blocks = self.looked_up(msgs, measure)
        return self._keep(msgs, blocks, blocks_tokens(blocks), copy)

    def tokens(self, msgs: Messages, measure: Measure) -> int:
        """blocks_tokens(self.of(msgs, measure)): for a conversation laid out or edited here, its total
        carried with it (the peers weigh the whole conversation every turn: summing its Blocks again
        was a read of every message per peer per turn)."""
        for done, _, tokens in self.carried:
            if done is msgs:
                return tokens
        blocks = self.of(msgs, measure, copy=False)
        last = self.carried[-1] if self.carried else None
        if last is not None and last[0] is msgs:
            return last[2]
        return blocks_tokens(blocks)  # a list, or a window of a carried conversation

    def edited(
        self,
        msgs: Messages,
        was: Messages,
        changed: Iterable[int],
        measure: Measure,
        copy: bool = True,
    ) -> list[Block]:
        """self.of(msgs, measure) for `msgs` that is `was` with the messages at `changed` replaced and
        messages appended (an index past `was` is one of those): `was`'s Blocks carried, only the changed and the new
        messages looked up (clear_tool_uses clears a few more results every turn: its edited
        conversation, looked up whole, was a lookup of every message per turn)."""
        at = next((i for i, c in enumerate(self.carried) if c[0] is was), None)
        if at is None:
            return self.of(msgs, measure, copy)
        _, blocks, tokens = self.carried[at]
        k = len(was)
        # `was`'s entry goes (replaced by msgs'), and its list is this store's own (every caller got a
        # copy, or read it before this call): edited in place, not copied whole a call.
        out = blocks
        by_sha = self.by_sha
        for j in changed:
            if j >= k:  # an appended message (cleared in the turn it came): looked up below
                continue
            b = by_sha.get(msgs[j].sha)
            if b is None:
                b = by_sha[msgs[j].sha] = message_block(msgs[j], measure)
            tokens += b.tokens - out[j].tokens
            out[j] = b
        added = self.looked_up(msgs[k:], measure)
        out += added
        del self.carried[at]
        return self._keep(msgs, out, tokens + blocks_tokens(added), copy)

    def looked_up(self, msgs: Messages, measure: Measure) -> list[Block]:
        """message_block(m, measure) of each message, each looked up by its hash (the reference `of`
        carries from)."""
        by_sha = self.by_sha
        try:
            return list(map(by_sha.__getitem__, map(_SHA, msgs)))
        except KeyError:
            for m in msgs:
                if m.sha not in by_sha:
                    by_sha[m.sha] = message_block(m, measure)
            return list(map(by_sha.__getitem__, map(_SHA, msgs)))


def blocks_tokens(blocks: list[Block]) -> int:
    return sum(map(_TOKENS, blocks))


@dataclass(frozen=True)
class SideCall:
    """A model call the policy makes this turn before the request that answers it: a summarization.
    It is billed and cached like any request (its input too), in the order the calls are made."""

    blocks: list[Block]
    output_tokens: int  # what the call generates (the summary)


@dataclass
class PeerRequest:
    """What a peer policy sends on one turn: its blocks, what it did and any side calls before them."""

    blocks: Sequence[Block]  # a list, or a Grown (engine/sim/grown.py): read, never changed
    actions: list[str] = field(default_factory=list)  # names of what the peer did this turn
    compaction: bool = False  # the peer rewrote or dropped part of the conversation this turn
    side_calls: list[SideCall] = field(default_factory=list)  # sent before `blocks`, this turn
    # This request's first `same` Blocks are the peer's last request's, the same objects, and its
    # Block at `same` (if both have one) differs from that one's, when the peer knows it (the
    # simulator then does not compare the shared prefix again); None: not known.
    same: int | None = None
    # (s, a, m): this request's Blocks [s, s + m) are the peer's last request's [a, a + m), the same
    # objects, when the peer knows it (a window that moved on or back over the conversation it sent
    # last): the simulator then does not search the two requests for that stretch. None: not known.
    stretch: tuple[int, int, int] | None = None


def documented_trigger(v: TurnView, default: int, documented_window: int = 200_000) -> int:
    """A documented token trigger where it fires before the request would outgrow the what-if window
    (the provider's default is for its own window, 200k for Claude); in a window too small for it, the
    same share of the what-if window (else the trigger would never fire before the request overflowed)."""
    if default < v.ceiling:
        return default
    return v.window * default // documented_window


def message_block(m: Message, measure: Measure, marker: bool = False) -> Block:
    return Block("history", "messages", m.sha, measure.item(m), marker)


def text_block(key: str, tokens: int, marker: bool = False) -> Block:
    """A synthetic message (a summary, a placeholder) identified by `key`: same key, same bytes."""
    return Block("history", "messages", sha256_hex(key), tokens, marker)


def with_tail_marker(blocks: list[Block], on: bool) -> list[Block]:
    """A harness that caches with explicit breakpoints puts a rolling one on the newest message."""
    if on and blocks and blocks[-1].segment == "messages":
        last = blocks[-1]
        blocks[-1] = Block(last.section, last.segment, last.sha, last.tokens, True)
    return blocks


def system_tokens(v: TurnView) -> int:
    return sum(b.tokens for b in v.system)


def total(blocks: list[Block]) -> int:
    return sum(b.tokens for b in blocks)


def round_starts(messages: Messages) -> list[int]:
    """Indices where a whole round starts (an assistant message with the results that follow it)."""
    return [s for s, _ in history_rounds(tuple(messages))[1:]]


def newest_round_start(messages: Messages, after: int) -> int | None:
    """The last of round_starts(messages) past `after` (None when none is), read from the newest message
    back: threshold_compaction asks it at each compaction, and splitting the whole conversation for it
    was O(session) each time, a compaction every few dozen turns (quadratic in the session)."""
    for i in range(len(messages) - 1, max(after, 0), -1):
        if messages[i].role == "assistant":
            return i
    return None


def last_fitting_window(v: TurnView, messages: Messages, budget: int) -> Messages:
    """The longest tail of whole rounds within `budget` tokens (at least the newest round): what every
    policy falls back to when its own rule leaves the request over the window.

    Read from the newest message back, one message at a time, as far as the rounds kept and the one
    that does not fit: the rounds past it are never read. The round starts (history_rounds' after its
    first: the assistant messages past index 0) were found by splitting the whole conversation every
    call, and each round measured as a slice: a conversation whose cleared results leave thousands of
    short rounds within the window (clear_tool_uses on a long session) paid both for every one of them,
    every turn. last_fitting_window_reference is what this was: the tests hold the two equal."""
    item = v.measure.item
    n = len(messages)
    acc = 0  # tokens of the rounds kept, messages[start:]
    size = 0  # tokens of the round being read, messages[i:start]
    start = n
    for i in range(n - 1, 0, -1):
        x = messages[i]
        size += item(x)
        if x.role == "assistant":  # the round [i, start) is whole
            if acc + size > budget and start < n:
                return messages[start:]
            acc += size
            start = i
            size = 0
    # Every round fitted (what comes before the first is no round), or there is no round: everything.
    return messages[start:] if start < n else messages


class FittingWindow:
    """last_fitting_window of a conversation that is the last call's with a few messages edited and
    messages appended, moved from where the last call's window started instead of read again.

    clear_tool_uses past the point where its window fills: the edited conversation's window holds
    thousands of short cleared rounds, and last_fitting_window read them all every turn (a 3,000-turn
    what-if: ~1.6 s CPU, quadratic in the session). The window is the tail from the first round start
    whose tail fits the budget (or the newest round), and a tail's tokens only grow with its length: so
    from the last start, with its tail's tokens carried (the edited messages' differences and the new
    messages added), the start moves forward while the tail does not fit, or back while a round more
    does; the work is the distance it moves. Anything else (another conversation, no carried start) is
    last_fitting_window itself, which the tests hold this equal to."""

    def __init__(self) -> None:
        # (the conversation, its window's start, the tokens of conversation[start:]) of the last call.
        self._last: tuple[Messages, int, int] | None = None
        # (the last call's conversation, P, R) while the caller hands the messages' Blocks (clear_tool_uses):
        # P[i] the tokens of conversation[:i], R its round starts (assistant messages past index 0) in
        # order, both carried as the conversation is edited near its end and appended to. The window is
        # then found by bisection: past its window, clear_tool_uses' start moves on or back by dozens of
        # short cleared rounds when a large result is cleared or comes in (moves of 36-88 messages were
        # common on a 6,000-turn what-if), and the walk below read each of them (~27 us a call).
        self._sums: tuple[Messages, array[int], array[int]] | None = None

    def reset(self) -> None:
        self._last = None
        self._sums = None

    def _carry_sums(
        self, messages: Messages, was: Messages | None, changed: Iterable[int], blocks: Sequence[Block] | None
    ) -> tuple[Messages, array[int], array[int]] | None:
        """(messages, P, R) (see _sums) when `blocks` are the messages' Blocks: the last call's carried
        when `was` is its conversation (`messages` is `was` with the messages at `changed` replaced,
        same roles, and messages appended: P recomputed from the first of them on, R extended by the
        appended), else made from the Blocks (once, where the chain of conversations starts). None
        without Blocks."""
        got, self._sums = self._sums, None
        n = len(messages)
        if blocks is None or len(blocks) != n:
            return None
        if got is not None and was is not None and got[0] is was and n >= len(was):
            _, sums, rounds = got
            k = len(was)
            i0 = min(min(changed, default=k), k)  # (an index past `was` is an appended message)
            del sums[i0 + 1 :]
            acc = sums[i0]
            for b in blocks[i0:]:  # (a few: the newly cleared result's message and the new ones)
                acc += b.tokens
                sums.append(acc)
            for i in range(max(k, 1), n):
                if messages[i].role == "assistant":
                    rounds.append(i)
        else:
            sums = array("q", accumulate(map(_TOKENS, blocks), initial=0))
            rounds = array("q", (i for i, x in enumerate(messages) if i and x.role == "assistant"))
        self._sums = (messages, sums, rounds)
        return self._sums

    def fits(
        self,
        v: TurnView,
        messages: Messages,
        tokens: int,
        was: Messages | None = None,
        changed: Iterable[int] = (),
        blocks: Sequence[Block] | None = None,
    ) -> None:
        """This call's conversation fits whole (`tokens`: its messages' total, as Measure.item counts
        them): carried from its first round start (a start whose tail fits: the walk back from it ends
        at once), so the next call's window, if that one no longer fits, is moved from there.

        clear_tool_uses where its edited conversation hovers about the budget (a newly cleared result
        lets it fit, a turn's new messages not): each turn after one that fitted read the whole ~4,700
        messages again (last_fitting_window: most of that column's window work on a 3,000-turn
        what-if). The answers are window's own, from any carried round start (see window).
        `was`, `changed`, `blocks`: as start's (the Blocks' sums carried to the next call's start)."""
        self._carry_sums(messages, was, changed, blocks)
        item = v.measure.item
        head = 0  # tokens of messages[:s]
        for s, x in enumerate(messages):
            if s and x.role == "assistant":
                self._last = (messages, s, tokens - head)
                return
            head += item(x)
        self._last = None

    def window(self, v: TurnView, messages: Messages, budget: int, *was_changed: Any) -> Messages:
        """last_fitting_window(v, messages, budget), where `messages` may be `was` (the conversation of
        the last call) with the messages at `changed` replaced (same roles) and messages appended: the
        tail of `messages` from start(v, messages, budget, was, changed)."""
        return messages[self.start(v, messages, budget, *was_changed) :]

    def start(
        self,
        v: TurnView,
        messages: Messages,
        budget: int,
        was: Messages | None = None,
        changed: Iterable[int] = (),
        blocks: Sequence[Block] | None = None,
    ) -> int:
        """Where window(...) starts in `messages` (the window itself not made: clear_tool_uses reads
        only where it starts, and a ~4,700-message tuple a call was a copy and a free of it).

        `blocks`: the messages' Blocks (message_block of each, in order), when the caller has them: a
        message's tokens are its Block's, read from it rather than measured again (the walks below read
        ~25 messages a call of clear_tool_uses past its window, Measure.item a method call each)."""
        last, self._last = self._last, None
        got = self._carry_sums(messages, was, changed, blocks)
        if got is not None:
            # The first round start whose tail fits (P[n] - P[s] <= budget: P only grows), else the
            # newest round start; none: the whole conversation (last_fitting_window's answers).
            _, sums, rounds = got
            j = bisect_left(rounds, bisect_left(sums, sums[-1] - budget))
            start = rounds[j] if j < len(rounds) else rounds[-1] if rounds else 0
            if start:
                self._last = (messages, start, sums[-1] - sums[start])
            return start
        item = v.measure.item
        if last is None or was is None or last[0] is not was or len(messages) < len(was):
            out = last_fitting_window(v, messages, budget)
            start = len(messages) - len(out)
            if start >= 1 and messages[start].role == "assistant":  # a round start: carried
                self._last = (messages, start, sum(map(item, out)))
            return start
        _, start, acc = last
        # The walks below read messages one at a time: from the list under a Grown or a Conversation
        # where it holds them (indexed in C; their own __getitem__ is a Python call, ~90 a call of
        # clear_tool_uses past its window).
        seq, m = direct(messages)
        k = len(was)
        for i in dict.fromkeys(changed):  # an index named twice is one message changed
            if start <= i < k:
                acc += item(messages[i]) - item(was[i])
        acc += sum(map(item, messages[k:]) if blocks is None else map(_TOKENS, blocks[k:]))
        n = len(messages)
        if acc <= budget:
            # The start fits: a round more while it fits (the first that does not ends the walk).
            size = 0
            for i in range(start - 1, 0, -1):
                x = seq[i] if i < m else messages[i]
                size += item(x) if blocks is None else blocks[i].tokens
                if x.role == "assistant":
                    if acc + size > budget:
                        break
                    acc += size
                    start = i
                    size = 0
        else:
            # The start does not fit, nor any before it: the first round start after it whose tail
            # fits, else the newest round start.
            newest = start
            for i in range(start, n - 1):
                acc -= item(seq[i] if i < m else messages[i]) if blocks is None else blocks[i].tokens
                if (seq[i + 1] if i + 1 < m else messages[i + 1]).role == "assistant":
                    newest = i + 1
                    if acc <= budget:
                        break
            else:
                acc = sum(map(item, messages[newest:]))
            start = newest
        self._last = (messages, start, acc)
        return start


def direct(messages: Messages) -> tuple[Sequence[Message], int]:
    """(seq, m): messages[i] is seq[i] for 0 <= i < m, where seq is a list or a tuple (indexed in C): a
    Grown's run or a Conversation's, else the messages themselves."""
    if type(messages) is Grown:
        return messages.head()
    if type(messages) is Conversation:
        return messages.head()
    return messages, len(messages)


def last_fitting_window_reference(v: TurnView, messages: Messages, budget: int) -> Messages:
    """last_fitting_window read round by round from the newest back (what it was)."""
    m = v.measure
    acc = 0
    start = len(messages)
    for s in reversed(round_starts(messages) or [0]):
        size = m.items(messages[s:start])
        if acc + size > budget and start < len(messages):
            break
        acc += size
        start = s
    return messages[start:]
