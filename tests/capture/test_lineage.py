"""engine.capture.lineage on its own: many attempts of one task, interleaved at random, some compacting
their history, some restarted, one forked; every request must be filed where the agent meant it. The
index is fed as the proxy feeds it (the request's messages, then its reply)."""

from __future__ import annotations

import random
from typing import Any

from engine.capture.lineage import FORK, SAME_OPENING, Lineage, conversations, digests
from engine.importers.model import MessageRec, ToolCallRec

KEY = "p:opening"
OPENING = [MessageRec("system", "You are an agent."), MessageRec("user", "Fix the failing test.")]


class Attempt:
    def __init__(self, name: str) -> None:
        self.name, self.msgs, self.turn, self.session = name, list(OPENING), 0, None
        self.asked: list[list[MessageRec]] = []  # its requests so far (a fork asks one of them again)
        self.drop = False  # its next reply is left out of its history (mini-swe-agent's format error)

    def reply(self) -> MessageRec:
        call = ToolCallRec(f"call_{self.name}_{self.turn}", "bash", '{"cmd": "ls"}')
        return MessageRec("assistant", f"Step {self.turn}.", (call,))

    def compact(self) -> None:
        # keeps the opening and the last exchange, a summary in place of the rest (capture26's case)
        self.msgs = [*OPENING, MessageRec("user", f"Summary of {self.name}."), *self.msgs[-2:]]


def _ask(index: Lineage, a: Attempt, sessions: list[int], kind: str = SAME_OPENING) -> None:
    chain = digests(KEY, a.msgs)
    where = index.place(KEY, a.msgs, chain)
    if a.session is None:
        assert where.session is None, (a.name, where)
        if sessions:
            assert where.branch is not None and where.branch["kind"] == kind, where
        a.session = len(sessions) + 1
        sessions.append(a.session)
    else:
        assert where.session == a.session, (a.name, a.turn, where)
    r = a.reply()
    index.journaled(a.session, KEY, a.turn, a.msgs, chain, [*a.msgs, r], True)
    a.asked.append(a.msgs)
    if a.drop:
        a.msgs, a.drop = [*a.msgs, MessageRec("user", f"format error {a.name} {a.turn}")], False
    else:
        a.msgs = [*a.msgs, r, MessageRec("tool", f"out {a.name} {a.turn}", (), r.tool_calls[0].id)]
    a.turn += 1


def test_random_interleavings_file_every_request_with_its_attempt() -> None:
    for seed in range(30):
        rng = random.Random(seed)
        index = Lineage()
        sessions: list[int] = []
        attempts = [Attempt(str(i)) for i in range(rng.randint(2, 6))]
        for _ in range(60):
            a = rng.choice(attempts)
            if a.turn >= 3 and rng.random() < 0.1:
                a.compact()
            _ask(index, a, sessions)
        assert len(sessions) == len(attempts) == len(index)


def test_random_attempts_with_dropped_replies_restarts_and_forks() -> None:
    """As above, with replies left out of the history (mini-swe-agent's format errors), attempts started
    late (restarts), forks (an attempt's earlier request asked again, going on from there) and
    compactions."""
    for seed in range(30):
        rng = random.Random(1000 + seed)
        index = Lineage()
        sessions: list[int] = []
        attempts = [Attempt("0")]
        for step in range(80):
            roll = rng.random()
            if roll < 0.05:
                attempts.append(Attempt(str(len(attempts))))  # the task started again
                _ask(index, attempts[-1], sessions)
                continue
            a = rng.choice(attempts)
            if roll < 0.1 and len(a.asked) >= 2:
                k = rng.randrange(1, len(a.asked))
                fork = Attempt(f"{a.name}.{step}")
                fork.msgs, fork.turn = list(a.asked[k]), k
                _ask(index, fork, sessions, kind=FORK)
                attempts.append(fork)
                continue
            if roll < 0.15 and len(a.asked) >= 3 and a.msgs[-2].role == "assistant":
                # (keeping its last exchange, as capture26's agents do: kept messages a fork shares
                # with its parent alone could be either's)
                a.compact()
            elif roll < 0.25 and a.turn >= 1:
                # (not its first reply: two attempts that both leave their first reply out ask the same
                # request, the opening and the same complaint, which no index can tell apart)
                a.drop = True
            _ask(index, a, sessions)
        assert len(sessions) == len(attempts) == len(index)


def test_a_fork_and_conversations_of_a_log() -> None:
    index = Lineage()
    a = Attempt("a")
    for _ in range(3):
        _ask(index, a, [])
    # the request of turn 1 again (4 messages: the opening, the first reply, its output), answered anew
    again = a.msgs[:4]
    where = index.place(KEY, again, digests(KEY, again))
    assert where.session is None and where.branch == {"kind": FORK, "session": 1, "turn": 1, "at_message": 4}
    # the same calls as a log: the fork is a conversation of its own, the first one's calls stay together
    log = [(KEY, OPENING, a.reply()), (KEY, [*OPENING, MessageRec("user", "hm")], None)]
    assert conversations(log) == [1, 1]  # (a rewrite after the opening: the same conversation)
    assert conversations([(KEY, OPENING, MessageRec("assistant", "x")), (KEY, OPENING, None)]) == [1, 2]


def test_random_compactions_right_after_dropped_replies() -> None:
    """An attempt that leaves a reply out and compacts at once (the opening, a summary, its last tool
    result and the complaint): the request holds none of its replies, and its opening is every one-call
    attempt's history without its reply. It went to the earliest attempt of one call; it is filed with
    the attempt whose last request ended with the tool result it keeps."""
    for seed in range(40):
        rng = random.Random(2000 + seed)
        index = Lineage()
        sessions: list[int] = []
        attempts = [Attempt("0")]
        for _ in range(70):
            if rng.random() < 0.08:
                attempts.append(Attempt(str(len(attempts))))  # another attempt, often left at one call
                _ask(index, attempts[-1], sessions)
                continue
            a = rng.choice(attempts)
            if a.turn >= 2 and a.msgs[-1].role == "user" and rng.random() < 0.5:
                a.compact()  # right after a dropped reply: keeps its last tool result and the complaint
            elif a.turn >= 1 and rng.random() < 0.3:
                a.drop = True
            _ask(index, a, sessions)
        assert len(sessions) == len(attempts) == len(index)


def test_two_attempts_that_drop_their_first_reply_are_said_to_be_ambiguous() -> None:
    index = Lineage()
    sessions: list[int] = []
    a, b = Attempt("a"), Attempt("b")
    for x in (a, b):
        x.drop = True
        _ask(index, x, sessions)
    # the same complaint after the same opening: either attempt's second request
    same = [*OPENING, MessageRec("user", "format error")]
    where = index.place(KEY, same, digests(KEY, same))
    assert where.session == 1 and where.ambiguous == (2,)
    # a compaction that keeps only the shared opening and a summary could be any attempt's as well
    for x in (a, b):
        x.msgs = [*OPENING, MessageRec("user", f"format error {x.name}")]
        _ask(index, x, sessions)
    summary = [*OPENING, MessageRec("user", "Summary so far.")]
    where = index.place(KEY, summary, digests(KEY, summary))
    assert where.session == 1 and where.ambiguous == (2,)
    log = [(KEY, OPENING, a.reply()), (KEY, OPENING, b.reply()), (KEY, same, None)]
    found: dict[int, Any] = {}
    assert conversations(log, ambiguous=found) == [1, 2, 1]
    assert list(found) == [2] and found[2].ambiguous == (2,)


def test_attempts_that_send_back_only_their_replies_text_keep_their_own_sessions() -> None:
    # Three attempts at once, each answered with text and a tool call it does not run: each sends its
    # reply back as its text alone (the tapped async client's parallel attempts). Their histories without
    # the reply are all the opening; the text says whose reply it was (every one went to session 1).
    index = Lineage()
    replies = {}
    for number in (1, 2, 3):
        chain = digests(KEY, OPENING)
        where = index.place(KEY, OPENING, chain)
        assert where.session is None or number == 1 or where.branch is not None
        call = ToolCallRec(f"toolu_{number}", "bash", '{"cmd": "ls"}')
        replies[number] = MessageRec("assistant", f"Attempt {number} looks at the tests first.", (call,))
        index.journaled(number, KEY, 0, OPENING, chain, [*OPENING, replies[number]], True)
    for number in (3, 1, 2):
        msgs = [*OPENING, MessageRec("assistant", replies[number].content), MessageRec("user", "Go on (0).")]
        where = index.place(KEY, msgs, digests(KEY, msgs))
        assert where.session == number and where.ambiguous == (), (number, where)
