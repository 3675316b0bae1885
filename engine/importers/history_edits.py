"""An agent's edits of its own history where it stood, as a request or a recorded call shows them: which
messages were edited in place (`in_place`, `part_edits`), where each message fed to a Pipeline went in
its history (`Placed`, `feed_placed`), those edits made in the engine's history too (`apply_edits`:
Pipeline.edit_text, edit_part), and what a turn's trace and journal say of them (REWRITE_KEY,
`rewrite_event`, the cache break's cause: `rewrite_cause`). The capture tap's (engine.capture.tap_steps)
and the importers' (engine.importers.ingest: SWE-agent's history processors elide old outputs).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any, NamedTuple

from engine.artifacts import Text, ToolCall, ToolResult
from engine.importers.model import MessageRec

if TYPE_CHECKING:
    from engine.importers.ingest import _Feeder
    from engine.pipeline import Pipeline

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


def in_place_note(n: int, msgs: list[MessageRec], edited: int) -> dict[str, int]:
    """The REWRITE_KEY note of a request that holds the `n` messages fed in their places, `edited` of them
    edited there (in_place), then new ones: the engine keeps its history, the edits made in it."""
    return {"messages": len(msgs), "kept": n - edited, "replaced": edited, "dropped": edited,
            "new": len(msgs) - n, "edited": edited}


def feed_placed(pipe: Pipeline, feeder: _Feeder, m: MessageRec, turn: int | None) -> Placed | None:
    """Feed `m` to `pipe` (through `feeder`); where it went (a reply: `turn`, the turn it answered, None
    when the agent's own request brought it; a message of the agent's: the turn whose request sends it),
    so an edit of it later is the engine's edit of that message (apply_edits). None: a message the
    engine holds in no place of its own (the system prompt, a result that answers no call)."""
    waiting = len(pipe.pending)
    feeder.feed(m)
    hist = pipe.history
    if m.role == "assistant":
        parts = hist[len(hist) - 1].parts
        return Placed(len(hist) - 1, turn, tuple(j for j, p in enumerate(parts) if isinstance(p, ToolCall)))
    # (the agent's text or result: in the message its request closes, after what was waiting)
    kind = ToolResult if m.role == "tool" else Text
    for j in range(waiting, len(pipe.pending)):
        p = pipe.pending[j]
        if isinstance(p, kind) and (p.content if isinstance(p, ToolResult) else p.text) == m.content:
            return Placed(len(hist), pipe.turn, (j,))
    return None


def apply_edits(
    pipe: Pipeline, fed: list[MessageRec], fed_at: list[Placed | None], msgs: list[MessageRec]
) -> dict[str, Any]:
    """The messages of the request `msgs` the agent edited where they stood (in_place: `fed` were fed,
    each where `fed_at` says): each edit of a reply's text, a call's arguments, a user message's text or
    a tool result's content (part_edits; a message with more than that changed keeps its original) is
    made in the engine's history too (Pipeline.edit_text, edit_part: one `edit` event each), so its
    requests send what the agent's do. What the trace's REWRITE_KEY adds: how many the engine took
    (`applied`), the turns whose replies' texts they were (`edited_turns`; -1 for a reply the agent's own
    request brought) and every edit taken as [turn, what, how] (`edited_parts`: what "reply", "call",
    "user" or "result"; how "edited", or "truncated" for a result made shorter)."""
    applied, turns, parts = 0, [], []
    for i, (old, new) in enumerate(zip(fed, msgs, strict=False)):
        where = fed_at[i] if i < len(fed_at) else None
        if old == new or where is None:
            continue
        for what, k, was, now in part_edits(old, new) or ():
            if what == "reply":
                if not _holds(pipe, where.msg, None, was):
                    continue  # (not where it was placed: another message stands there)
                done = pipe.edit_text(where.msg, now)
            else:
                j = where.parts[k] if k < len(where.parts) else -1
                if not _holds(pipe, where.msg, j, was):
                    continue
                done = pipe.edit_part(where.msg, j, now)
            if not done:
                continue
            applied += 1
            turn = -1 if where.turn is None else where.turn
            if what == "reply":
                turns.append(turn)
            how = "truncated" if what == "result" and len(now) < len(was) else "edited"
            if [turn, what, how] not in parts:
                parts.append([turn, what, how])
    return {"applied": applied, "edited_turns": sorted(set(turns)), "edited_parts": sorted(parts)}


def _holds(pipe: Pipeline, i: int, j: int | None, text: str) -> bool:
    """Whether message `i` of the engine's history holds `text` where it was placed (checked before it is
    edited): a reply's text (`j` None), else part `j`'s text, arguments or content. One behind the cut,
    on disk, is not read."""
    hist = pipe.history
    if not 0 <= i < len(hist) or not hist.held(i):
        return False
    m = hist[i]
    if j is None:
        return m.role == "assistant" and "".join(p.text for p in m.parts if isinstance(p, Text)) == text
    if not 0 <= j < len(m.parts):
        return False
    p = m.parts[j]
    if isinstance(p, ToolCall):
        return p.arguments == text
    if isinstance(p, ToolResult):
        return p.content == text
    return isinstance(p, Text) and p.text == text


def name_edit_break(pipe: Pipeline, req: Any, note: dict[str, Any]) -> None:
    """The cache break the edits of `note` made at the turn of `req`, named for what made it: the agent,
    not a step of the engine."""
    brk = req.trace.get("cache_break") if req is not None else None
    if isinstance(brk, dict) and brk.get("section") == "history":
        pipe.annotate("cache_break", {**brk, "cause": rewrite_cause(note)})
