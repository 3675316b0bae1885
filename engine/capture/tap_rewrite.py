"""A request whose history does not extend the last one the tap fed: the agent rewrote its own history
(`rewritten`), and what the turn's trace says of it (REWRITE_KEY).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, NamedTuple

from engine.importers.model import MessageRec

REWRITE_KEY = "history_rewrite"  # the trace key of a turn whose request rewrote the agent's own history


# What an edit the engine took rewrote (the REWRITE_KEY note's `edited_parts`: [turn, what, how]), as
# the cache break's cause names it: "turn 3's tool result truncated"
_WHAT = {"reply": "reply", "call": "tool call", "user": "user message", "result": "tool result"}


class Placed(NamedTuple):
    """Where a message the tap fed is in the engine's history: message `msg`; `turn`, the turn whose reply
    it was (a reply) or whose request first sent it (the agent's own messages), None when its own
    request brought a reply; `parts`, the places in that message of a reply's tool calls (in order),
    or of the agent's text or tool result (one)."""

    msg: int
    turn: int | None
    parts: tuple[int, ...]


def edits_said(parts: list[Any]) -> str:
    """The edits the engine took (the note's `edited_parts`), said: "turn 0's reply edited, turn 1's tool
    result truncated" (an earlier reply the agent's own request brought: "an earlier reply edited")."""
    said: list[str] = []
    for p in parts:
        if not (isinstance(p, (list, tuple)) and len(p) == 3):
            continue
        turn, what, how = p
        name = _WHAT.get(str(what), str(what))
        s = f"turn {turn}'s {name} {how}" if isinstance(turn, int) and turn >= 0 else f"an earlier {name} {how}"
        if s not in said:
            said.append(s)
    return ", ".join(said)


def rewrite_cause(note: dict[str, Any]) -> str:
    """A cache break's cause at a turn whose request rewrote the agent's history (REWRITE_KEY's `note`):
    what the engine's history took of it, "history rewritten by the agent: turn 0's reply edited",
    "... turn 1's tool result truncated", "... turn 1's user message edited", "... turn 0's tool call
    edited" (`edited_parts`); else "... 1 earlier message edited" (edits it did not take, or a reply
    its own request brought), or "... by the agent: its own compaction" when it dropped or replaced
    messages other than in place."""
    if note.get("edited"):
        said = edits_said(note.get("edited_parts") or [])
        if said:
            return f"history rewritten by the agent: {said}"
        turns = [t for t in note.get("edited_turns") or () if isinstance(t, int) and t >= 0]
        if turns:
            said = ", ".join(f"turn {t}'s reply" for t in turns)
        else:  # (a reply the agent's own request brought, or a message of its own: its task, a summary)
            from engine.wording import counted

            said = counted(int(note["edited"]), "earlier message")
        return f"history rewritten by the agent: {said} edited"
    return "history rewritten by the agent: its own compaction"


def rewrite_event(turn: int, note: dict[str, Any]) -> dict[str, Any]:
    """The journal's note of a turn whose request rewrote the agent's history, for readers that do not
    open traces (simulate's index names the cache break it made): a `diag` event of kind REWRITE_KEY."""
    keep = ("edited", "applied", "edited_turns", "edited_parts")
    return {"k": "diag", "kind": REWRITE_KEY, "turn": turn, **{k: note[k] for k in keep if k in note}}


def rewritten(fed: list[MessageRec], msgs: list[MessageRec]) -> tuple[int, dict[str, int]]:
    """A request whose history does not extend the last one fed: the agent rewrote its own history (it
    compacted: dropped or summarized older turns, or edited old tool outputs). (Where the messages new
    to the engine begin in `msgs`, what the rewrite did.)

    The new messages are those after the last message the engine was already told of (the last reply,
    usually, which a compaction keeps with the turns around it): before it lies the agent's own version
    of the past (its summary, its edits), which the engine already holds in the original and keeps, as
    it keeps every message it was told of (its own policy decides what to send of it). Re-fed whole,
    the shadow history held every earlier message twice, and a summary besides. Messages after that
    point are fed even when unknown (a summary placed after the last message it kept is, for all the
    engine can tell, new), and the system prompt is never one of them: fed again it became user text.
    A request that holds every message fed in its place, some of them edited (a reworded reply: the
    same role, calls and call ids), is an edit in place (`edited` in the note): its new messages are
    those after them, and the engine keeps the originals, as it keeps a compacted history's."""
    edited = in_place(fed, msgs)
    if edited:
        # The agent (or its user) edited earlier messages where they were (a reply reworded before the
        # conversation is sent again): the request is the history the engine holds with those messages
        # replaced, then the new ones. Taken for new, each edit was fed after the messages the engine
        # already had, and the history held the original and the edited one both.
        n = len(fed)
        return n, {"messages": len(msgs), "kept": n - edited, "replaced": edited, "dropped": edited,
                   "new": len(msgs) - n, "edited": edited}
    last_at = {m: i for i, m in enumerate(msgs)}  # messages are frozen, hashable: each one's last place
    start = next((last_at[m] + 1 for m in reversed(fed) if m in last_at), 0)
    known, present = set(fed), set(msgs)
    if start == 0:
        # Nothing of the old history is left, the system prompt included: only a new system prompt is
        # not new conversation (fed, it would be user text); every other message is.
        while start < len(msgs) and msgs[start].role == "system":
            start += 1
    before = msgs[:start]
    note = {
        "messages": len(msgs),  # in the rewritten request
        "kept": sum(1 for m in before if m in known),  # of them, messages the engine already had
        "replaced": sum(1 for m in before if m not in known),  # the agent's own summaries and edits
        "dropped": sum(1 for m in fed if m not in present),  # of the last request and reply, left out
        "new": len(msgs) - start,  # fed to the engine as the turn's new messages
    }
    return start, note


def part_edits(old: MessageRec, new: MessageRec) -> list[tuple[str, int, str, str]] | None:
    """What the agent edited of message `old` where it stood (`new`, in_place's same place): each edit the
    engine's history can take, as (what, k, old text, new text): "reply" (its text), "call" (its k-th
    tool call's arguments), "user" (the text of a message of its own), "result" (a tool result's
    content). None when it changed anything else as well (a call's name, its thinking or images, a
    system prompt, a reply's or user message's text emptied): the engine keeps the original."""
    if old.media != new.media or old.name != new.name or old.role == "system":
        return None
    if old.role == "assistant":
        if old.thinking != new.thinking or old.thinking_blocks != new.thinking_blocks:
            return None
        if [c.name for c in old.tool_calls] != [c.name for c in new.tool_calls]:
            return None
        out: list[tuple[str, int, str, str]] = []
        if old.content != new.content:
            if not new.content:
                return None
            out.append(("reply", 0, old.content, new.content))
        for k, (a, b) in enumerate(zip(old.tool_calls, new.tool_calls, strict=True)):
            if a.arguments != b.arguments:
                if not b.arguments:
                    return None
                out.append(("call", k, a.arguments, b.arguments))
        return out
    if old.content == new.content:
        return []
    if old.role == "tool":
        return [("result", 0, old.content, new.content)]
    return [("user", 0, old.content, new.content)] if new.content else None


def _same_place(old: MessageRec, new: MessageRec) -> bool:
    """Whether `new` can stand where `old` stood: the same role and, for a reply, the same tool calls
    (by id) and for a tool result the same call it answers; only its text, thinking or images differ."""
    if old.role != new.role or old.tool_call_id != new.tool_call_id:
        return False
    return [c.id for c in old.tool_calls] == [c.id for c in new.tool_calls]


def in_place(fed: list[MessageRec], msgs: list[MessageRec]) -> int | None:
    """How many of the messages fed the request carries edited where they stood; 0 when each is there
    as fed but for a reply's reasoning left out (DeepSeek's reasoner refuses its reasoning_content sent
    back, so no request holds a reply as it came); None when it is not the history fed, in place (a
    compaction, a history dropped or reordered, a reply left out)."""
    n = len(fed)
    if n == 0 or len(msgs) < n:
        return None
    edited = 0
    for old, new in zip(fed, msgs[:n], strict=True):
        if old == new:
            continue
        if not _same_place(old, new):
            return None
        if replace(old, thinking=None, thinking_blocks=()) != replace(new, thinking=None, thinking_blocks=()):
            edited += 1
    return edited
