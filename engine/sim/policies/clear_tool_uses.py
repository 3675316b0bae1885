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

from operator import is_

from engine.artifacts import Message, ToolResult
from engine.assembly import Measure
from engine.providers.base import Block
from engine.sim.grown import Grown, Window, shifted
from engine.sim.policies.base import (
    FittingWindow,
    HistoryBlocks,
    Messages,
    PeerRequest,
    TurnView,
    documented_trigger,
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
        self._scanned: tuple[Messages, list[tuple[int, int]]] = ((), [])
        # The last turn's edit, when it cleared (see _clear): (its conversation, results cleared, their
        # places by message, the edited conversation, tokens freed, the list the edited conversation
        # was made from: the carry's own).
        self._last_edit: tuple[Messages, int, dict[int, list[int]], Messages, int, list[Message]] | None = (
            None
        )
        # What this turn's edit changed of the last turn's edited conversation, when it was carried:
        # (that conversation, the messages it re-cleared), so its Blocks are carried too (see request).
        self._edit: tuple[Messages, list[int]] | None = None
        # The window of the edited conversation once it outgrows the budget, moved from the last turn's
        # start: the edit changes a few messages and appends the new ones (see FittingWindow).
        self._window = FittingWindow()
        # The views' HistoryBlocks of the turn being made: it knows when this turn's conversation was
        # made from the last one by appending (see _starts).
        self._history: HistoryBlocks | None = None
        # The last request's system Blocks, the conversation it was cut from and where (see _same).
        self._sent: tuple[tuple[Block, ...], Messages, int] | None = None
        # The last request's Blocks (see request).
        self._req: Grown[Block] | Window[Block] | None = None

    def _starts(self, msgs: Messages, prev: Messages) -> bool:
        """msgs[:len(prev)] == prev: known without reading them when the view was made from the last
        turn's (HistoryBlocks.extends), else compared."""
        h = self._history
        if h is not None and h.extends(msgs, prev):
            return True
        return len(msgs) >= len(prev) and msgs[: len(prev)] == prev

    def reset(self) -> None:
        self._window.reset()
        self._cleared.clear()
        self._rehashed.clear()
        self._scanned = ((), [])
        self._last_edit = None
        self._edit = None
        self._sent = None
        self._req = None

    def _results(self, msgs: Messages) -> list[tuple[int, int]]:
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
        if not self._starts(msgs, prev):
            prev, found = (), []
        # Extended in place: the list is this scan's own (callers read it before the next call), and a
        # copy of every result found so far, a call, grew with the session.
        found += [
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

    def _cleared_form(self, x: Message, js: list[int], m: Measure) -> tuple[Message, int]:
        """`x` with its parts `js` cleared, and the tokens that frees (made once per message and parts)."""
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
        return got

    def _rehash(self, x: Message) -> Message:
        """A message the clearing leaves as it was, made again from its parts (its hash recomputed), once."""
        y = self._rehashed.get(x.sha)
        if y is None:
            y = self._rehashed[x.sha] = Message(x.role, x.parts)
        return y

    def _clear(self, msgs: Messages, m: Measure) -> Messages | None:
        """The conversation with every result but the newest `keep` cleared, or None when that clears
        nothing or frees less than clear_at_least.

        Each turn's conversation is the last one's and a few more messages, and the results to clear
        the last one's and a few more: the edit is carried from the last turn's (its messages, the
        results it cleared, the tokens they freed), and a turn makes only the new messages and the
        messages with a newly cleared result (_clear_all does the whole conversation: the reference)."""
        results = self._results(msgs)
        n = max(0, len(results) - self.keep)
        carry, self._last_edit = self._last_edit, None
        self._edit = None
        if carry is None or self.exclude_tools:
            return self._clear_all(msgs, results[:n], m)
        src, done, by_msg, was, freed, new = carry
        k = len(src)
        if n < done or len(msgs) < k or not self._starts(msgs, src):
            return self._clear_all(msgs, results[:n], m)
        # `new` is the list `was` was made from, the carry's own: edited in place (a copy of `was`
        # a call besides the tuple made of it was a reference count touched per message).
        new.extend(map(self._rehash, msgs[k:]))
        touched: dict[int, None] = {}
        for i, j in results[done:n]:
            js = by_msg.get(i)
            if js is None:
                by_msg[i] = [j]
            else:
                if i not in touched:
                    freed -= self._cleared_form(msgs[i], js, m)[1]  # what it freed with fewer cleared
                js.append(j)
            touched[i] = None
        for i in touched:
            new[i], gain = self._cleared_form(msgs[i], by_msg[i], m)
            freed += gain
        self._edit = (was, list(touched))
        # The edited conversation is the last one up to its first message changed now (or its end), then
        # `new` from there: made on the last one's run (a Grown), not a tuple of the whole `new` a call.
        d = min(touched, default=k)
        return self._applied(msgs, n, by_msg, new, freed, (was, min(d, k)))

    def _clear_all(self, msgs: Messages, clear: list[tuple[int, int]], m: Measure) -> Messages | None:
        by_msg: dict[int, list[int]] = {}
        for i, j in clear:
            by_msg.setdefault(i, []).append(j)
        freed = 0
        new = list(msgs)
        for i, js in by_msg.items():
            new[i], gain = self._cleared_form(msgs[i], js, m)
            freed += gain
        if not clear or freed < self.clear_at_least:
            return None
        for i, x in enumerate(new):
            if i not in by_msg:
                new[i] = self._rehash(x)
        return self._applied(msgs, len(clear), by_msg, new, freed)

    def _applied(
        self,
        msgs: Messages,
        n: int,
        by_msg: dict[int, list[int]],
        new: list[Message],
        freed: int,
        last: tuple[Messages, int] | None = None,
    ) -> Messages | None:
        """The edited conversation when the clearing applies (and the edit carried to the next turn).
        `last`: (the last turn's edited conversation, d) when new[:d] are its first d messages."""
        if not n or freed < self.clear_at_least:
            return None
        if last is not None and isinstance(last[0], Grown):
            out: Messages = last[0].extended(last[1], new[last[1] :])
        else:
            out = Grown.of(new)
        if not self.exclude_tools:
            self._last_edit = (msgs, n, by_msg, out, freed, new)
        return out

    def request(self, v: TurnView) -> PeerRequest:
        self._history = v.history
        m = v.measure
        msgs = v.messages
        # The conversation's total carried with its Blocks (HistoryBlocks.tokens), not summed again;
        # its Blocks are read only when they are sent as they are (see the end).
        tokens = v.history.tokens(msgs, m)
        full = system_tokens(v) + tokens
        actions: list[str] = []
        blocks_of: list[Block] | None = None
        edit: tuple[Messages, list[int]] | None = None
        if full > self._trigger(v):
            cleared = self._clear(msgs, m)
            if cleared is not None:
                edit, self._edit = self._edit, None
                # Last turn's edited conversation with a few results cleared and the new messages: its
                # Blocks carried, only those messages looked up (looked up whole, every turn, it was
                # most of this policy's CPU on a long session).
                blocks_of = (
                    v.history.edited(cleared, edit[0], edit[1], m, copy=False)
                    if edit is not None
                    else v.history.of(cleared, m, copy=False)
                )
                tokens = v.history.tokens(cleared, m)
                msgs = cleared
                actions.append("clear_tool_uses")
        budget = v.ceiling - system_tokens(v)
        start = 0  # the request's messages are msgs[start:]
        if tokens > budget:
            # Last turn's window moved, when this turn's conversation is last turn's edited one edited
            # again (what the edit changed is known); else found afresh (FittingWindow.start).
            start = (
                self._window.start(v, msgs, budget, edit[0], edit[1], blocks_of)
                if edit is not None
                else self._window.start(v, msgs, budget)
            )
            actions.append("drop_oldest_rounds")
        else:
            # (With what the edit changed and the Blocks: the window's sums carried, see FittingWindow.)
            if edit is not None:
                self._window.fits(v, msgs, tokens, edit[0], edit[1], blocks_of)
            else:
                self._window.fits(v, msgs, tokens, None, (), blocks_of)
        # The store's own lists (copy=False), read here once into the request: one copy of the
        # conversation a call, not three (each a reference count touched per Block); a window is the
        # tail of the whole conversation's Blocks (found among the carried ones, it was compared with
        # them and copied twice more). The system Blocks go in front by moving the references, not
        # touching them.
        if blocks_of is None:
            blocks_of = v.history.of(msgs, m, copy=False)
        last = self._sent
        same = self._same(v, msgs, start, edit)
        stretch = None if same is not None else self._stretch(v, last, msgs, start, edit)
        req = self._req
        out: Grown[Block] | Window[Block] | None = None
        if same is not None and type(req) is Grown:
            # The last request's first `same` Blocks are this one's (see _same): kept, and only the
            # rest made (a Grown on the last request's run: engine/sim/grown.py). Until the window fills,
            # each request is the last one with a result cleared near its end and the new messages: made
            # whole a call (and copied again in the simulator), it was per-call work that grew with the
            # session.
            out = req.extended(same, with_tail_marker(blocks_of[same - len(v.system) :], v.markers))
        elif stretch is not None and req is not None:
            out = _shifted(v, req, blocks_of, start, stretch)
        if out is None:
            blocks = blocks_of[start:] if start else blocks_of.copy()
            blocks[0:0] = v.system
            out = Grown.of(with_tail_marker(blocks, v.markers), own=True)
        self._req = out
        if same is None and stretch is not None and stretch[0] != stretch[1] and req is not None:
            # A window that moved: it starts with the system Blocks, the last request's own (_kept held
            # them so), and parts from that request right after them unless its first message's Block
            # is the last one's (a message sent twice). Told, so simulate does not compare the two
            # ~4,800-Block requests to find it (Python-level reads of two Windows, ~5 us a call).
            n = len(v.system)
            if len(out) > n and len(req) > n and out[n] != req[n]:
                same = n
        return PeerRequest(out, actions, bool(actions), same=same, stretch=stretch)

    def _stretch(
        self,
        v: TurnView,
        last: tuple[tuple[Block, ...], Messages, int] | None,
        whole: Messages,
        start: int,
        edit: tuple[Messages, list[int]] | None,
    ) -> tuple[int, int, int] | None:
        """PeerRequest.stretch of this request (whole[start:] after the system Blocks), when the last
        request sent `was`[last start:] of a conversation this one is `was` with a few results newly
        cleared, or with messages appended: from the later of the two starts up to the first message
        cleared since (or the last request's newest, which went with a marker), the messages are the
        same and so are their Blocks (one object per hash: HistoryBlocks). The window past the budget
        moves on or back by a round or two a turn, and simulate searched the two requests for this
        stretch (two copies of a ~4,700-Block request, a call, on a 3,000-turn what-if)."""
        if last is None:
            return None
        system, was, was_start = last
        touched = _kept(v, system, was, whole, edit)
        if touched is None:
            return None
        k = len(was)
        i0 = max(start, was_start)
        i1 = min((i for i in touched if i0 <= i < k), default=k)
        if v.markers:
            i1 = min(i1, k - 1)  # the last request's newest message went with a marker: another Block
        if i1 <= i0:
            return None
        n = len(v.system)
        return n + i0 - start, n + i0 - was_start, i1 - i0

    def _same(
        self,
        v: TurnView,
        whole: Messages,
        start: int,
        edit: tuple[Messages, list[int]] | None,
    ) -> int | None:
        """PeerRequest.same of this request, whose messages are whole[start:], when the last request
        sent a whole conversation this one keeps most of: the last one with a few results newly
        cleared (the first of them is where the two part), or with messages appended. A message's
        Block is one object per hash (HistoryBlocks), so the same messages are the same Blocks. A
        window's request is not told (its start moves: the two part at once)."""
        last, self._sent = self._sent, (v.system, whole, start)
        if last is None or start or last[2]:
            return None
        system, was, _ = last
        touched = _kept(v, system, was, whole, edit)
        if touched is None:
            return None
        k = len(was)
        d = min((i for i in touched if i < k), default=k)
        if v.markers and k:
            d = min(d, k - 1)  # the last request's newest message went with a marker: another Block
        return len(v.system) + d


def _shifted(
    v: TurnView,
    req: Grown[Block] | Window[Block],
    blocks_of: list[Block],
    start: int,
    stretch: tuple[int, int, int],
) -> Window[Block] | None:
    """This request (the system Blocks, then blocks_of[start:], the newest marked) as a Window on the last
    request's run (engine/sim/grown.py shifted), when its `stretch` (PeerRequest.stretch: its Blocks
    [s, s + m) are the last request's [a, a + m)) lets it be one; None otherwise (made as a list).

    Past its window each request is the conversation from a start that moves on or back by a round or
    two: made as a list of ~4,800 Blocks a call (the stretch kept from the last request copied, the
    last request's list freed), it was per-call work that followed the window, not what changed."""
    s, a, m = stretch
    n = len(v.system)
    after = blocks_of[start + s + m - n :]
    if v.markers and not after:
        return None  # (the marker would be on the stretch's last Block, which is the last request's)
    fresh = blocks_of[start : start + s - n]
    return shifted(req, n, fresh, a, m, with_tail_marker(after, v.markers))


def _kept(
    v: TurnView,
    system: tuple[Block, ...],
    was: Messages,
    whole: Messages,
    edit: tuple[Messages, list[int]] | None,
) -> list[int] | None:
    """Where `whole` (this request's conversation) parts from `was` (the last request's), when it keeps
    it: the indices of the results newly cleared in it (`edit`: none when it only appended); None when
    the system Blocks differ or `whole` is neither `was` edited nor `was` extended."""
    if len(system) != len(v.system) or not all(map(is_, system, v.system)):
        return None
    if edit is not None and edit[0] is was:
        return edit[1]
    if whole is was or (len(whole) >= len(was) and v.history.extends(whole, was)):
        return []
    return None
