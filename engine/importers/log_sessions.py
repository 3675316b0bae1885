"""A request log's calls as sessions: told apart by conversation as the proxy files them
(`file_conversations`, engine.capture.lineage), one chosen (`one_conversation`) and the others listed
(`describe_conversations`), and a set of calls priced and simulated as one model via one provider
(`session_of`). The proxy-JSONL and claude-trace importers read their logs into these.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engine.capture.lineage import SAME_OPENING, Placement, conversations
from engine.importers._common import Ctx
from engine.importers.model import CallRec, ImportedSession, NoSuchConversation
from engine.wording import counted


def session_of(fmt: str, path: str, calls: list[CallRec], providers: list[str], ctx: Ctx) -> ImportedSession:
    if not calls:
        ctx.fail("", "file has no model calls")
    # One model and provider price and simulate the whole session: the model most calls used (the
    # first named on a tie) and the provider that served it. The provider used to be the commonest
    # over every call, whatever its model: a log of one gpt-4o call and one Claude call came out as
    # "gpt-4o via anthropic" (Anthropic cache rules at OpenAI prices) without a word.
    # Calls that got a reply name the served model (a dated snapshot); a failed call only the one asked
    # for, which would read as a second model.
    models = [c.model for c in calls if c.model and c.response is not None] or [
        c.model for c in calls if c.model
    ]
    model = max(dict.fromkeys(models), key=models.count) if models else "unknown"
    known = [p for c, p in zip(calls, providers, strict=True) if p != "unknown" and c.model in (model, None)]
    # sorted() first so that a tie resolves the same way on every run (set order is hash-seeded)
    provider = max(sorted(set(known)), key=known.count) if known else "unknown"
    meta: dict[str, Any] = {"providers_per_call": providers, "notes": []}
    if len(set(models)) > 1 or len({p for p in providers if p != "unknown"}) > 1:
        mix = ", ".join(
            f"{m} ({models.count(m)})" for m in sorted(set(models), key=lambda m: (-models.count(m), m))
        )
        provs = ", ".join(sorted({p for p in providers if p != "unknown"}))
        meta["notes"].append(
            f"the calls use more than one model or provider ({mix}; providers {provs}): the whole session "
            f"is imported, simulated and priced as {model} via {provider}; import each part on its own "
            "(or name one with --model/--provider) to price it as what served it"
        )
    return ImportedSession(format=fmt, source=path, model=model, provider=provider, calls=calls, meta=meta)


@dataclass
class Conversation:
    """One conversation of a log: its calls (each with its provider), the number lineage gave it (the
    order conversations began in), how it began when it shares another's opening (lineage's branch,
    naming the other by that number) and the calls of it other conversations fit as well."""

    calls: list[tuple[CallRec, str]]
    number: int
    branch: dict[str, Any] | None = None
    ambiguous: list[tuple[int, tuple[int, ...]]] = field(default_factory=list)  # (call in it, others)


def file_conversations(
    keyed: list[tuple[str, CallRec, str]], chained: list[tuple[str | None, str | None]]
) -> list[Conversation]:
    """The calls of a log by conversation, the largest first: `keyed` each call with its opening's key
    (routes.session_key) and provider; `chained` each call's (previous_response_id, own response id).

    One opening may be several conversations (the agent run twice on one task through the logging proxy,
    attempts at once, a step sampled again): told apart by the messages each already holds, as the
    proxy files them live (engine.capture.lineage). A Responses request continued by
    previous_response_id holds only what is new this turn: it goes with the call whose response it
    names, as the proxy's `_continued` files it."""
    by_response: dict[str, int] = {}  # a response id -> the index of its call
    owner: list[int] = []  # each call's index in `keyed`, or of the call it continues
    free: list[int] = []  # the calls lineage places
    for i, (prev, rid) in enumerate(chained):
        first = by_response.get(prev) if prev is not None else None
        owner.append(owner[first] if first is not None else i)
        if first is None:
            free.append(i)
        if rid is not None:
            by_response[rid] = i
    branches: dict[int, dict[str, Any]] = {}
    unsure: dict[int, Placement] = {}  # by index in `free`
    numbers = conversations(
        [(keyed[i][0], keyed[i][1].messages, keyed[i][1].response) for i in free], branches, unsure
    )
    number = dict(zip(free, numbers, strict=True))
    unsure_at = {free[k]: w.ambiguous for k, w in unsure.items()}
    groups: dict[int, Conversation] = {}
    for i, (_, call, provider) in enumerate(keyed):
        n = number[owner[i]]
        conv = groups.get(n)
        if conv is None:
            conv = groups[n] = Conversation([], n, branches.get(n))
        if i in unsure_at:
            conv.ambiguous.append((len(conv.calls), unsure_at[i]))
        conv.calls.append((call, provider))
    # sorted() is stable: conversations of one size stay in the order they began
    return sorted(groups.values(), key=lambda g: -len(g.calls))


def _preview(conv: Conversation) -> str:
    """The first message past the system prompt of a conversation's first call, short, on one line."""
    msgs = conv.calls[0][0].messages
    text = next((m.content for m in msgs if m.role != "system" and m.content.strip()), "")
    one = " ".join(text.split())
    return repr(one if len(one) <= 48 else one[:45] + "...") if one else "(no message)"


def _begins(conv: Conversation, rank: dict[int, int]) -> str:
    """How a conversation began, by the others' numbers in the listing ('' for a conversation of its own)."""
    b = conv.branch
    if b is None or b.get("session") not in rank:
        return ""
    other = rank[b["session"]]
    if b.get("kind") == SAME_OPENING:
        return f"same opening as {other}: a restart or another attempt"
    return f"forked from {other} at message {b.get('at_message')}"


def describe_conversations(ranked: list[Conversation]) -> list[str]:
    """One line per conversation, numbered as --conversation takes them: its calls, model, first message,
    and whether it is a restart or a fork of another."""
    rank = {c.number: k + 1 for k, c in enumerate(ranked)}
    out = []
    for k, c in enumerate(ranked, start=1):
        model = c.calls[0][0].model or "an unnamed model"
        began = _begins(c, rank)
        out.append(
            f"{k}: {counted(len(c.calls), 'call')} on {model}, {_preview(c)}"
            + (f" ({began})" if began else "")
        )
    return out


def one_conversation(
    fmt: str, path: str, ranked: list[Conversation], conversation: int, ctx: Ctx
) -> ImportedSession:
    """Conversation `conversation` (1 = the largest) of `ranked` as the session; the notes name the others,
    and which is a restart or a fork of which."""
    listing = describe_conversations(ranked)
    if not 1 <= conversation <= len(ranked):
        raise NoSuchConversation(
            fmt,
            path,
            "",
            f"has {counted(len(ranked), 'conversation')}; conversation {conversation} does not exist (give 1 to "
            f"{len(ranked)})",
            listing,
        )
    chosen = ranked[conversation - 1]
    session = session_of(fmt, path, [c for c, _ in chosen.calls], [p for _, p in chosen.calls], ctx)
    session.meta["conversations"] = [len(g.calls) for g in ranked]
    session.meta["conversation_list"] = listing
    session.meta.setdefault("notes", [])
    notes = session.meta["notes"]
    if len(ranked) > 1:
        rank = {c.number: k + 1 for k, c in enumerate(ranked)}
        others = [line for k, line in enumerate(listing) if k != conversation - 1]
        more = f"; and {len(others) - 6} more" if len(others) > 6 else ""
        own = _begins(chosen, rank)
        notes.append(
            f"imported conversation {conversation} of {len(ranked)} ({counted(len(chosen.calls), 'call')}"
            f"{', ' + own if own else ''}); the others: {'; '.join(others[:6])}{more}; import another with "
            "--conversation N"
        )
    if chosen.ambiguous:
        rank = {c.number: k + 1 for k, c in enumerate(ranked)}
        calls = ", ".join(str(k) for k, _ in chosen.ambiguous[:6])
        also = sorted({rank.get(n, n) for _, ns in chosen.ambiguous for n in ns})
        one = len(chosen.ambiguous) == 1  # "call 1 ... fits conversation 2", not "call(s) 1 ... fit"
        notes.append(
            f"{'call' if one else 'calls'} {calls}{' and more' if len(chosen.ambiguous) > 6 else ''} of this "
            f"conversation {'fits' if one else 'fit'} {'conversation' if len(also) == 1 else 'conversations'} "
            f"{', '.join(map(str, also))} as well (an attempt that left its reply out, or a compaction that kept "
            f"only the shared opening): filed with this one, the earliest {'it fits' if one else 'they fit'}"
        )
    return session
