"""Which recorded conversation a captured request belongs to, when several share an opening.

The proxy keys a request by its opening (API, system prompt, first message: proxy/routes.session_key),
but one opening is often several conversations: the same agent run twice on one task through a
long-running proxy (a restart, a harness retrying the task), N attempts of it at once (best-of-n, a
batch runner's workers on one instance), or an agent that goes back to an earlier point and samples
that step again (a fork). Filed by the opening alone, all of them were one session, each new start a
"history rewrite" of the last. This index tells them apart by the messages each session already holds:

- a request that extends a session's known history (its last request and reply) belongs to it; the
  longest such history wins, so attempts whose requests interleave each keep their own session;
- a request equal to a session's first request while that session already has replies is a new
  session, noted "same opening as session N" (kind `same_opening`);
- a request equal to an earlier request of a session (or one followed by another reply than the one it
  got) is a new session, noted "forked from session N at message k" (kind `fork`): a recording is one
  line of calls, so the branch gets its own, starting with the shared messages;
- anything else that shares the opening is the agent rewriting its own history (it compacted: kept the
  system prompt and some messages, put a summary in place of others; it edited old outputs) and stays in
  its session, as the tap's `rewritten` describes: a request holding a session's last reply belongs to
  that session. Replies are matched without their reasoning, which agents leave out when they send a
  reply back (DeepSeek's reasoning_content), so such a reply is still the one the session got.
  A compaction right after a dropped reply holds no reply of the session (the one it got is the one it
  left out): it belongs to the session whose last request ended with a message it keeps and goes on
  past (the last tool result, or the complaint that answered an earlier dropped reply), before it is
  taken for another session's dropped reply on the strength of the opening alone.

Some requests fit several sessions equally: two attempts that both leave their first reply out ask the
same request (the opening and the same complaint), and a compaction that keeps only the opening and a
summary could be any attempt's. The index files such a request with the earliest of them and says so
(`Placement.ambiguous`: the others), for the trace's `conversation_ambiguous` and the notes, rather than
guess without a word.

Cost per request: one hash per message of the request (a chain: each digest covers every message
before it) and one dict look-up per message; no session's history is compared. Memory: a digest per
session per call. A session that is let go (the proxy's bound on live sessions) leaves the index, its
last digests kept a while so that its agent calling again is said to continue it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # (annotations only: the importers import this module, for claude-trace logs)
    from engine.importers.model import MessageRec

BRANCH_KEY = "conversation_branch"  # the trace key of a session's first turn when it branched from another
AMBIGUOUS_KEY = "conversation_ambiguous"  # the trace key of a turn that other sessions fit as well
SAME_OPENING = "same_opening"
FORK = "fork"
# Let-go sessions whose last digests are kept (so a call continuing one is said to): a few per live session.
MAX_GONE = 1024


@dataclass(frozen=True)
class Placement:
    """Where a request goes: an existing session (`session`), or a new one (`session` None), which
    `branch` says it branched from (the trace note) or `continues` names (a let-go session)."""

    session: int | None
    branch: dict[str, Any] | None = None
    continues: int | None = None
    # Other sessions the request fits as well as `session` (or the branch's session): see the docstring.
    ambiguous: tuple[int, ...] = ()


@dataclass
class _Known:
    """What the index holds of one session."""

    number: int
    family: str
    first: int | None = None  # the digest of its first request
    tip: int | None = None  # the digest of its whole known history (the last request, then its reply)
    before_reply: int | None = None  # the digest of that history without its last reply
    reply: int | None = None  # the `loose` hash of its last reply
    reply_bare: int | None = None  # the same without its tool calls, when it has both text and calls
    requests: list[int] = field(default_factory=list)  # the digests of its requests, in order
    replies: dict[int, int] = field(default_factory=dict)  # turn -> the `loose` hash of the reply it got
    last_turn: int | None = None
    asked_last: int | None = None  # the hash of its last request's last message, past its opening


def branch_note(branch: dict[str, Any]) -> str:
    """The branch note in words (the proxy's log, `cp-inspect explain`)."""
    if branch.get("kind") == SAME_OPENING:
        return (
            f"same opening as session {branch['session']}: a new conversation (a restart or another attempt "
            f"of the same task), not a rewrite of that one's history"
        )
    return (
        f"forked from session {branch['session']} at message {branch['at_message']} (the request of its turn "
        f"{branch['turn']} asked again, answered anew): its own conversation from there"
    )


def branch_short(branch: dict[str, Any]) -> str:
    """The branch note in a few words ("same opening as session 1", "forked from session 1 at message
    4"): the proxy's list of sessions, the inspector's Tier panel."""
    if branch.get("kind") == SAME_OPENING:
        return f"same opening as session {branch.get('session')}"
    return f"forked from session {branch.get('session')} at message {branch.get('at_message')}"


def _others(also: Sequence[int]) -> str:
    """"session 2" or "sessions 2, 3" (it read "session(s) 2 fit it")."""
    return f"{'session' if len(also) == 1 else 'sessions'} {', '.join(str(n) for n in also)}"


def ambiguous_note(where: Placement, number: int) -> str:
    """What the trace and the notes say of a request filed with session `number` that `where.ambiguous`
    fit as well."""
    fit = "fits" if len(where.ambiguous) == 1 else "fit"
    return (
        f"filed with session {number}, but {_others(where.ambiguous)} {fit} it as well (it holds no message "
        "only one of them has: an attempt that left its reply out, or a compaction that kept only the shared "
        "opening)"
    )


def ambiguous_short(unsure: dict[str, Any]) -> str:
    """The trace's AMBIGUOUS_KEY in a few words ("fits session 2 too (filed with 1)"): the Tier panel."""
    also = [n for n in unsure.get("also") or [] if isinstance(n, int)]
    return f"fits {_others(also)} too (filed with {unsure.get('session')})"


def _first_own(msgs: Sequence[MessageRec]) -> int:
    """The index of the first message past the system prompt (the opening's last: session_key)."""
    for i, m in enumerate(msgs):
        if m.role != "system":
            return i
    return len(msgs)


def loose(m: MessageRec) -> int:
    """A reply's hash without its reasoning, which agents often leave out when they send it back
    (DeepSeek asks for reasoning_content not to be sent; older thinking blocks are dropped)."""
    return hash((m.role, m.content, m.tool_calls))


def bare(m: MessageRec) -> int | None:
    """A reply's hash with its tool calls left out as well, for a reply that has text beside them: an agent
    that does not run a call it was given (a harness that takes only the text) sends the reply back as its
    text alone. None when there is no text or no call (`loose` then says it all)."""
    if not m.tool_calls or not m.content:
        return None
    return hash((m.role, m.content, ()))


def digests(family: str, msgs: Sequence[MessageRec]) -> list[int]:
    """The chain of a request: d[i] covers the family and msgs[:i] (d[0] the family alone)."""
    out = [hash(family)]
    for m in msgs:
        out.append(hash((out[-1], m)))
    return out


def _add(index: dict[int, list[int]], digest: int, number: int) -> None:
    index.setdefault(digest, []).append(number)


def _remove(index: dict[int, list[int]], digest: int | None, number: int) -> None:
    if digest is None:
        return
    held = index.get(digest)
    if held is None:
        return
    try:
        held.remove(number)
    except ValueError:
        return
    if not held:
        del index[digest]


class Lineage:
    """The index of every live session's known history (see the module docstring)."""

    def __init__(self, max_gone: int = MAX_GONE) -> None:
        self._known: dict[int, _Known] = {}
        self._tips: dict[int, list[int]] = {}  # digest of a whole known history -> sessions
        self._before_reply: dict[int, list[int]] = {}  # the same without the last reply -> sessions
        self._requests: dict[int, list[tuple[int, int]]] = {}  # digest of a request -> (session, turn)
        self._replies: dict[int, list[int]] = {}  # loose hash of a session's last reply -> sessions
        self._asked_last: dict[int, list[int]] = {}  # hash of the last message of a session's last request
        self._gone: OrderedDict[int, int] = OrderedDict()  # a let-go session's last digests -> its number
        self.max_gone = max_gone

    def place(self, family: str, msgs: Sequence[MessageRec], chain: Sequence[int]) -> Placement:
        """The session `msgs` (its `digests`) belongs to, or which new one. See the module docstring."""
        n = len(msgs)
        # 1. The longest known history the request extends.
        dropped: tuple[int, list[int]] | None = (
            None  # (its length, the sessions) of a history without its reply
        )
        for i in range(n, 0, -1):
            held = self._tips.get(chain[i])
            if held:
                if len(held) == 1:  # (every turn of a session: no sort, no tuple)
                    return Placement(held[0])
                return Placement(min(held), ambiguous=tuple(sorted(held))[1:])
            gone = self._gone.get(chain[i])
            if gone is not None:
                return Placement(None, continues=gone)
            if i < n and self._before_reply.get(chain[i]):
                # It leaves out a session's last reply and goes on (mini-swe-agent drops a reply without
                # a tool call and answers it with a format error: the tap takes that as going on), unless
                # it holds another session's last reply or a longer earlier request (below): a short
                # history (a session of one call, whose history without its reply is the opening) is
                # weak evidence.
                held = sorted(self._before_reply[chain[i]])
                if len(held) > 1 and msgs[i].role == "assistant":
                    # Several sessions' histories end there (attempts of one task, each at its first
                    # reply): the one whose reply this is with its tool calls left out is the one. Without
                    # this every such attempt went to the earliest (a request of another attempt's).
                    h = loose(msgs[i])
                    own = [x for x in held if self._known[x].reply_bare == h]
                    if len(own) == 1:
                        held = own
                dropped = (i, held)
                break
        # 2. A rewrite of a session's history: it holds that session's last reply (a compaction keeps
        # the last exchange and puts a summary before it; an edit of old tool outputs keeps everything).
        for m in reversed(msgs):
            if m.role != "assistant":
                continue
            for number in self._replies.get(loose(m), ()):
                if self._known[number].family == family:
                    return Placement(number)
        # 2b. A compaction after a dropped reply holds none of the session's replies: it belongs to the
        # session whose last request ended with a message it keeps and goes past (not its last message:
        # that request asked again is a fork, below), unless a longer history without its reply says
        # otherwise (a fork's dropped reply holds its parent's messages before the fork).
        start = _first_own(msgs) + 1
        low = dropped[0] if dropped is not None else start
        for p in range(n - 2, max(start, low) - 1, -1):
            m = msgs[p]
            if m.role == "assistant":
                continue
            held = [x for x in self._asked_last.get(hash(m), ()) if self._known[x].family == family]
            if held:
                held.sort()
                return Placement(held[0], ambiguous=tuple(held[1:]))
        # 3. An earlier request of a session again, alone or followed by another reply than it got.
        for k in range(n, 0, -1):
            asked = self._requests.get(chain[k])
            if not asked:
                continue
            if dropped is not None and dropped[0] >= k:
                break
            number, turn = min(asked)
            others = tuple(sorted({x for x, _ in asked} - {number}))
            known = self._known[number]
            if k < n and (msgs[k].role != "assistant" or loose(msgs[k]) == known.replies.get(turn)):
                # The agent's own version of the history after a prefix it kept (a summary; the reply it
                # got, edited, and what followed): a rewrite
                return Placement(number, ambiguous=others)
            kind = SAME_OPENING if chain[k] == known.first else FORK
            return Placement(None, {"kind": kind, "session": number, "turn": turn, "at_message": k})
        if dropped is not None:
            return Placement(dropped[1][0], ambiguous=tuple(dropped[1][1:]))
        return Placement(None)

    def journaled(
        self,
        number: int,
        family: str,
        turn: int,
        msgs: Sequence[MessageRec],
        chain: Sequence[int],
        fed: Sequence[MessageRec],
        reply_fed: bool,
    ) -> None:
        """Session `number` journaled the request `msgs` (`chain`: its digests) as `turn` and now knows
        `fed` (the tap's history: the request's messages, then the reply if `reply_fed`)."""
        known = self._known.get(number)
        if known is None:
            known = self._known[number] = _Known(number, family)
        self._drop_tip(known)
        n = len(msgs)
        req = chain[n]
        if known.first is None:
            known.first = req
        if known.last_turn != turn:  # (the tap tells of a turn twice: asked, then answered)
            known.requests.append(req)
            self._requests.setdefault(req, []).append((number, turn))
            _remove(self._asked_last, known.asked_last, number)
            known.asked_last = None
            if n - 1 > _first_own(msgs):  # (the opening's own messages are every attempt's)
                known.asked_last = hash(msgs[n - 1])
                _add(self._asked_last, known.asked_last, number)
        known.last_turn = turn
        # The tap's history begins with the request's own messages (the same objects): its digests go on
        # from the request's. A Responses request continued by previous_response_id holds the history
        # before them as well: digested whole.
        same = len(fed) >= n and (n == 0 or fed[n - 1] is msgs[n - 1])
        whole = list(chain[: n + 1]) if same else digests(family, fed[:0])
        for m in fed[len(whole) - 1 :]:
            whole.append(hash((whole[-1], m)))
        known.tip = whole[len(fed)]
        _add(self._tips, known.tip, number)
        if reply_fed and fed:
            known.before_reply = whole[len(fed) - 1]
            _add(self._before_reply, known.before_reply, number)
            known.reply = loose(fed[-1])
            _add(self._replies, known.reply, number)
            known.reply_bare = bare(fed[-1])
            known.replies[turn] = known.reply

    def _drop_tip(self, known: _Known) -> None:
        _remove(self._tips, known.tip, known.number)
        _remove(self._before_reply, known.before_reply, known.number)
        _remove(self._replies, known.reply, known.number)
        known.tip = known.before_reply = known.reply = known.reply_bare = None

    def forget(self, number: int) -> None:
        """A session let go: out of the index; its last digests are kept a while (see Placement.continues)."""
        known = self._known.pop(number, None)
        if known is None:
            return
        for digest in (known.tip, known.before_reply):
            if digest is not None:
                self._gone[digest] = number
                self._gone.move_to_end(digest)
        self._drop_tip(known)
        _remove(self._asked_last, known.asked_last, number)
        for req in known.requests:
            held = self._requests.get(req)
            if held is not None:
                held[:] = [x for x in held if x[0] != number]
                if not held:
                    del self._requests[req]
        while len(self._gone) > self.max_gone:
            self._gone.popitem(last=False)

    def __len__(self) -> int:
        return len(self._known)


def conversations(
    calls: Sequence[tuple[str, Sequence[MessageRec], MessageRec | None]],
    branches: dict[int, dict[str, Any]] | None = None,
    ambiguous: dict[int, Placement] | None = None,
) -> list[int]:
    """The conversation of each call of a log, in order (`(key, request messages, reply or None)`; `key`
    the opening's, routes.session_key): numbered from 1 as the proxy would have filed them live.
    `branches` receives each conversation's branch (lineage's `branch`, naming another conversation by
    its number) when it began as a restart or a fork of another; `ambiguous` the placement of each call
    (by its index) that other conversations fit as well (Placement.ambiguous)."""
    index = Lineage()
    family: dict[str, list[int]] = {}
    turns: dict[int, int] = {}
    out: list[int] = []
    for k, (key, msgs, reply) in enumerate(calls):
        chain = digests(key, msgs)
        where = index.place(key, msgs, chain)
        number = where.session
        if number is None and where.branch is None and family.get(key):
            number = family[key][-1]  # the agent's own version of its history: the latest conversation
        if number is None:
            number = len(turns) + 1
            family.setdefault(key, []).append(number)
            if where.branch is not None and branches is not None:
                branches[number] = where.branch
        if where.ambiguous and ambiguous is not None:
            ambiguous[k] = where
        turn = turns[number] = turns.get(number, -1) + 1
        fed = [*msgs, reply] if reply is not None else list(msgs)
        index.journaled(number, key, turn, msgs, chain, fed, reply is not None)
        out.append(number)
    return out
