"""Tool call ids a provider takes: what each refuses, and the id a live call is sent with instead.

An agent's ids are not always ones its provider takes. Some agents number calls per turn (`call_0`,
`call_1` every turn), so an id comes back in a later message; some frameworks spell ids with '.', ':' or
'|' (Kimi's `functions.eval:301`); some make ids longer than OpenAI takes. What each API refuses:

- Anthropic Messages: a repeated `tool_use` id anywhere in the request ("messages.43.content.2:
  `tool_use` ids must be unique", 400), and an id outside ^[a-zA-Z0-9_-]+$ ("tool_use.id: String should
  match pattern"); no length limit documented, none imposed here.
- Bedrock Converse: toolUseId of 1 to 64 characters matching [a-zA-Z0-9_-]+ (the API reference's
  ToolUseBlock and ToolResultBlock); a repeat is Claude's refusal behind it, taken as Anthropic's.
- OpenAI chat completions: a tool call id longer than 40 characters ("Invalid
  'messages[N].tool_calls[0].id': string too long. Expected a string with maximum length 40"), and a
  repeated tool_call_id in one request ("Duplicate value for 'tool_call_id' of ... in messages[7] and
  messages[8]"; DeepSeek answers the same). Both are from the APIs' error messages as users report
  them, not from OpenAI's reference, which documents neither; characters are not restricted, so an id
  with '.' or ':' is sent as it came. The same rule for the generic prefix provider (OpenAI's format).
- OpenAI Responses (not a format the engine sends): call_id at most 64 characters, and a repeated item
  is refused ("Duplicate item found with id").

The live Pipeline gives each call the id its provider takes when the message is recorded: the agent's
own id when it is acceptable and no call of the session has had it, else the id spelled in the
characters the provider takes (each other one '_'), cut to its length, and `_rN` for the first N no
call of the session has. Decided once, journaled with the call (its `as` key holds the agent's id), so
the same call keeps the same id on every later turn (the prompt cache prefix does not move) and a
replay folds the same ids. The agent answers with its own id; the pipeline pairs it with that call.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import NamedTuple

from engine.artifacts import Message, Part, ToolCall, ToolResult
from engine.assembly import Assembly, Section
from engine.types import SectionKind
from engine.wording import counted


class IdRule(NamedTuple):
    """What a provider refuses in a tool call id."""

    name: str  # the provider, as the trace's note names it
    refused: re.Pattern[str] | None  # a character it refuses (None: any character is taken)
    max_len: int  # 0: no limit known
    why: str  # the API's refusal, for the trace's note


_NOT_WORD = re.compile(r"[^A-Za-z0-9_-]")
ANTHROPIC = IdRule(
    "Anthropic", _NOT_WORD, 0, "the Messages API refuses a repeated tool_use id and any but [A-Za-z0-9_-]"
)
BEDROCK = IdRule(
    "Bedrock", _NOT_WORD, 64, "Converse refuses a repeated toolUseId and any but 1-64 of [A-Za-z0-9_-]"
)
OPENAI = IdRule(
    "OpenAI", None, 40, "chat completions refuse a repeated tool_call_id and one over 40 characters"
)
RULES = {"anthropic": ANTHROPIC, "bedrock": BEDROCK, "openai": OPENAI, "prefix": OPENAI}

# Room kept for the `_rN` suffix when an id has to be cut: nine digits of N.
_SUFFIX_ROOM = 12


def acceptable(rule: IdRule, cid: str) -> bool:
    """True when the provider takes `cid` as a call id (repeats aside)."""
    if not cid:
        return False
    if rule.max_len and len(cid) > rule.max_len:
        return False
    return rule.refused is None or rule.refused.search(cid) is None


def _stem(rule: IdRule, cid: str) -> str:
    """`cid` in the characters the provider takes, with room for a suffix within its length."""
    s = rule.refused.sub("_", cid) if rule.refused is not None else cid
    if rule.max_len:
        s = s[: rule.max_len - _SUFFIX_ROOM]
    return s or "call"


_RENAMED = re.compile(r"(.+)_r([0-9]{1,9})")


class CallIds:
    """The call ids a session has sent, and the id the next message's calls go with (see the module's
    docstring). State of a fold: `add` takes every sent id as it is folded, so a replayed or forked
    pipeline decides as the live one did (both are functions of the ids folded, in order)."""

    __slots__ = ("_next", "sent")

    def __init__(self) -> None:
        self.sent: set[str] = set()
        # stem -> the highest N an id `{stem}_rN` sent has: the next search starts above it (an agent that
        # calls `call_0` every turn would otherwise try N = 1, 2, ... on each of them).
        self._next: dict[str, int] = {}

    def add(self, cid: str) -> None:
        self.sent.add(cid)
        if "_r" not in cid:  # (no `{stem}_rN` then: a substring test, not the pattern, on every call sent)
            return
        m = _RENAMED.fullmatch(cid)
        if m is not None:
            stem, n = m.group(1), int(m.group(2))
            if n > self._next.get(stem, 0):
                self._next[stem] = n

    def assign(self, rule: IdRule, ids: Sequence[str]) -> list[str]:
        """The ids one message's calls (their own ids `ids`, distinct) are sent with. An acceptable id no
        call of the session has stays as it is; the others get ids no call of the session, nor another
        of this message, has. Changes nothing: the ids are the session's once folded (`add`)."""
        sent = self.sent
        # Nearly every message's ids are all kept: found in a plain loop (a comprehension is a frame of
        # its own), the list of what to keep made only when one is not.
        for c in ids:
            if c in sent or not acceptable(rule, c):
                break
        else:
            return list(ids)
        keep = [acceptable(rule, c) and c not in sent for c in ids]
        taken = {c for c, k in zip(ids, keep, strict=True) if k}
        out = []
        for c, k in zip(ids, keep, strict=True):
            if k:
                out.append(c)
                continue
            stem = _stem(rule, c)
            # An id spelled anew but not cut goes without a suffix while that spelling is free ('a.b' ->
            # 'a_b'); a repeat, or an id cut to length, gets one.
            cut = rule.max_len != 0 and len(c) > rule.max_len
            if not cut and stem != c and stem not in sent and stem not in taken:
                new = stem
            else:
                n = self._next.get(stem, 0) + 1
                while f"{stem}_r{n}" in sent or f"{stem}_r{n}" in taken:
                    n += 1
                new = f"{stem}_r{n}"
            taken.add(new)
            out.append(new)
        return out


class AtProvider:
    """The ids a session's calls would have gone with at another provider than its own (a what-if at
    another provider: the inspector's what-if, `explain --provider`, a shadow or diff at another one):
    the agent's own ids (a call sent with another keeps the agent's in its `as`) through that provider's
    rule, in order, as a live session there would have assigned them. The session's ids are acceptable to
    its own provider, not always to another (Anthropic takes an id of any length, OpenAI 40 characters;
    OpenAI takes '.' and ':', Anthropic and Bedrock refuse them), so a what-if that reused them built a
    request the target refuses.

    Folded as the conversation grows (`extend` takes the messages not yet seen): a what-if on every turn
    pays for the new messages only. `renamed`: the session's sent id -> the id at the target, for the
    calls whose ids differ; `notes`: (message index, agent's id, id at the target) of every call sent
    with another id than the agent's there, as the pipeline's own note lists them."""

    __slots__ = ("rule", "_ids", "folded", "last", "_at", "renamed", "notes", "_seen")

    def __init__(self, rule: IdRule) -> None:
        self.rule = rule
        self._ids = CallIds()
        self.folded = 0  # messages of the conversation folded
        self.last: object = None  # the last of them (the caller checks it is its conversation's)
        self._at = 0  # entries of the session's own renamed list read
        self.renamed: dict[str, str] = {}
        self.notes: list[tuple[int, str, str]] = []
        self._seen: set[str] = set()  # the session's sent ids (an old recording may repeat one)

    def extend(
        self, messages: Sequence[Sequence[tuple[str, str]]], own: Sequence[tuple[int, str, str]]
    ) -> None:
        """Fold the next messages: each message's calls as (sent id) pairs `(id, name)` (an empty list for
        a message with none), `own` the session's whole renamed list ((message index, agent's id, sent
        id), in order)."""
        ids, sent_at, seen, rule, n_own = self._ids, self._ids.sent, self._seen, self.rule, len(own)
        for calls in messages:
            index = self.folded
            self.folded += 1
            if not calls:
                continue
            if len(calls) == 1 and (self._at >= n_own or own[self._at][0] > index):
                # A message with one call the session sent under the agent's own id, taken at the target
                # and new to both: it keeps that id there, as the loop below decides (every message of
                # most sessions; a first what-if at another provider folds thousands of them).
                c = calls[0][0]
                if c not in sent_at and c not in seen and acceptable(rule, c):
                    ids.add(c)
                    seen.add(c)
                    continue
            agent: dict[str, str] = {}
            while self._at < len(own) and own[self._at][0] <= index:
                i, mine, sent = own[self._at]
                if i == index:
                    agent[sent] = mine
                self._at += 1
            sent_ids = [c for c, _ in calls]
            mine_ids = [agent.get(c, c) for c in sent_ids]
            if len(set(mine_ids)) != len(mine_ids):  # (a message the pipeline would refuse: left as it is)
                continue
            there = self._ids.assign(self.rule, mine_ids)
            for sent, mine, new in zip(sent_ids, mine_ids, there, strict=True):
                self._ids.add(new)
                if new != mine:
                    self.notes.append((index, mine, new))
                if sent in self._seen:
                    # A repeated sent id (recordings from before call_ids.py): renaming it would rename
                    # every call that has it; it goes as the recording has it.
                    self.renamed.pop(sent, None)
                elif new != sent:
                    self.renamed[sent] = new
                self._seen.add(sent)

    def clone(self) -> AtProvider:
        """A copy to fold on apart (ids and names are shared strings; the sets, map and list copied)."""
        c = AtProvider(self.rule)
        c._ids.sent, c._ids._next = set(self._ids.sent), dict(self._ids._next)
        c.folded, c.last, c._at = self.folded, self.last, self._at
        c.renamed, c.notes, c._seen = dict(self.renamed), list(self.notes), set(self._seen)
        return c

    def note(self) -> str:
        """The history section's note at the target (the pipeline's _renamed_note in its words), '' when
        every call goes with the agent's own id there."""
        ren = self.notes
        if not ren:
            return ""
        newest = "; ".join(f"message {i}: {own!r} as {sent!r}" for i, own, sent in ren[-3:])
        return (
            f"{counted(len(ren), 'tool call')} of the conversation sent to {self.rule.name} with another id "
            f"than the agent gave ({newest}{'; and earlier ones' if len(ren) > 3 else ''}), since {self.rule.why}; their "
            "results go with them, and each keeps its id on every later turn"
        )


def rename_in(asm: Assembly, at: AtProvider, own_note: str) -> Assembly:
    """`asm` with its history's calls and results under the ids `at` gives them, and the history note
    saying the target's renames in place of the session's own (`own_note`). Messages without a renamed
    call or result are the same objects (their token counts stay memoized)."""
    out = list(asm)
    for k, sec in enumerate(asm):
        if sec.kind != SectionKind.HISTORY:
            continue
        ren = at.renamed
        items = list(sec.items)
        for j, m in enumerate(items):
            if not isinstance(m, Message) or not any(
                (type(p) is ToolCall and p.id in ren) or (type(p) is ToolResult and p.call_id in ren)
                for p in m.parts
            ):
                continue
            parts: list[Part] = []
            for p in m.parts:
                if type(p) is ToolCall and p.id in ren:
                    p = ToolCall(ren[p.id], p.name, p.arguments)
                elif type(p) is ToolResult and p.call_id in ren:
                    p = ToolResult(ren[p.call_id], p.content, p.is_error, p.form)
                parts.append(p)
            items[j] = Message(m.role, tuple(parts))
        note = sec.note
        if own_note:
            note = note.replace(f"; {own_note}", "").replace(own_note, "")
        said = at.note()
        if said:
            note = f"{note}; {said}" if note else said
        out[k] = Section(
            sec.id, sec.name, sec.kind, sec.scope, sec.priority, tuple(items), sec.form, sec.omitted, note
        )
    return tuple(out)
