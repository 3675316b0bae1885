"""Load an imported trajectory, engine messages or a `.cpsession` recording into a store, message by message."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from engine.store.errors import StoreError, StoreTextError
from engine.store.items import Kind, LinkKind, replace_surrogates
from engine.store.store import ContextStore

_KIND = {"system": Kind.SYSTEM, "user": Kind.USER, "assistant": Kind.ASSISTANT, "tool": Kind.TOOL_RESULT}


def _store_add(store: ContextStore, body: str, kind: Kind, **kw: Any) -> int:
    """store.add, keeping text the store cannot encode as U+FFFD: a trajectory's JSON may hold a lone
    surrogate escape (a tool's output cut mid-pair), and one such message must not fail the import
    half way. The file imported from stays the original."""
    try:
        return store.add(body, kind, **kw)
    except StoreTextError:
        source = kw.pop("source", None)
        source = replace_surrogates(source) if isinstance(source, str) else source
        return store.add(replace_surrogates(body), kind, source=source, **kw)


def message_text(m: Any) -> str:
    """A message's text as the model saw it: content plus its tool calls (name and JSON arguments)."""
    text = str(m.content or "")
    calls = tuple(getattr(m, "tool_calls", ()) or ())
    if calls:
        text = (text + "\n" if text else "") + "\n".join(f"{c.name}({c.arguments})" for c in calls)
    return text


def ingest_session(store: ContextStore, session: Any) -> list[int]:
    """Add the whole session (last prompt plus its response) in order, all or nothing. System prompt
    and the first user message (the task) are pinned; tool results link `replies_to` the call that asked
    for them. Each model call advances the store's turn, so recency matches the original run."""
    calls = [c for c in session.calls]
    if not calls:
        return []
    with store.batch():  # all of the session or none of it
        return _ingest_calls(store, calls)


def _ingest_calls(store: ContextStore, calls: list[Any]) -> list[int]:
    ids: list[int] = []
    owner: dict[str, int] = {}
    first_user_seen = False
    done = 0
    for call in calls:
        msgs = list(call.messages)
        for idx in range(done, len(msgs)):
            m = msgs[idx]
            ids.append(_add(store, m, idx, owner, pin_task=not first_user_seen))
            first_user_seen = first_user_seen or m.role == "user"
        done = max(done, len(msgs))
        store.advance_turn()
    last = calls[-1]
    if last.response is not None:
        ids.append(_add(store, last.response, done, owner, pin_task=False))
    return ids


def _add(store: ContextStore, m: Any, idx: int, owner: dict[str, int], pin_task: bool) -> int:
    kind = _KIND.get(m.role, Kind.USER)
    pin = (kind is Kind.SYSTEM and idx == 0) or (kind is Kind.USER and pin_task)
    links: list[tuple[LinkKind | str, int]] = []
    call_id = getattr(m, "tool_call_id", None)
    if kind is Kind.TOOL_RESULT and call_id in owner:
        links.append((LinkKind.REPLIES_TO, owner[call_id]))
    new_id = _store_add(store, message_text(m), kind, pin=pin, source=call_id, links=links)
    for c in getattr(m, "tool_calls", ()) or ():
        owner[c.id] = new_id
    return new_id


# ---- engine messages (Pipeline history, .cpsession journals) ---------------------------------------


class MessageFolder:
    """Adds engine `Message`s (engine.artifacts) to a store, one item per message or tool result.

    Assistant text plus its tool calls (``name(arguments)``) is one ASSISTANT item; every tool result
    is its own TOOL_RESULT item linked `replies_to` the assistant item that made the call; user text
    is a USER item. The first user text is the task: pinned when `pin_task`. Thinking and media parts
    are not context the agent re-reads and are skipped. Keeps its position, so `fold(history)` can be
    called every turn with the growing history and adds only what is new.
    """

    def __init__(self, store: ContextStore, *, pin_task: bool = True) -> None:
        self.store = store
        self.pin_task = pin_task
        self.owner: dict[str, int] = {}
        self.task_seen = False
        self.done = 0  # messages of the history already folded
        self.pending_done = 0  # parts of the not-yet-closed user message already folded
        self.ids: list[int] = []

    def fold(self, history: Sequence[Any], pending: Sequence[Any] = ()) -> list[int]:
        """Add the messages of `history` not folded yet, then `pending` parts (a Pipeline's tool results
        and user text not yet closed into a message). Pending parts added now are skipped when they
        reappear as the head of the next history message, so nothing is stored twice."""
        from engine.artifacts import Message

        new: list[int] = []
        for msg in history[self.done :]:
            skip, self.pending_done = self.pending_done, 0
            new.extend(self.add_message(msg, skip_parts=skip))
        self.done = max(self.done, len(history))
        rest = tuple(pending[self.pending_done :])
        if rest:
            new.extend(self.add_message(Message("user", rest)))
            self.pending_done = len(pending)
        return new

    def add_message(self, msg: Any, skip_parts: int = 0) -> list[int]:
        from engine.artifacts import Text, ToolCall, ToolResult

        out: list[int] = []
        if msg.role == "assistant":
            texts = [p.text for p in msg.parts if isinstance(p, Text)]
            calls = [p for p in msg.parts if isinstance(p, ToolCall)]
            body = "\n".join([*texts, *(f"{c.name}({c.arguments})" for c in calls)])
            if body:
                new_id = _store_add(self.store, body, Kind.ASSISTANT)
                for c in calls:
                    self.owner[c.id] = new_id
                out.append(new_id)
        else:
            texts = []
            for p in msg.parts[skip_parts:]:
                if isinstance(p, ToolResult):
                    links: list[tuple[LinkKind | str, int]] = []
                    if p.call_id in self.owner:
                        links.append((LinkKind.REPLIES_TO, self.owner[p.call_id]))
                    out.append(
                        _store_add(self.store, p.content, Kind.TOOL_RESULT, source=p.call_id, links=links)
                    )
                elif isinstance(p, Text):
                    texts.append(p.text)
            if texts:
                pin = self.pin_task and not self.task_seen
                self.task_seen = True
                out.append(
                    _store_add(self.store, "\n".join(texts), Kind.USER, pin=pin, importance=1.0 if pin else 0.0)
                )
        self.ids.extend(out)
        return out


def ingest_recording(store: ContextStore, path: str | Path) -> tuple[list[int], int]:
    """Fold a `.cpsession` recording's journal into the store; returns (item ids, requests seen). All
    or nothing: if reading or adding fails half way, nothing of the recording stays in the store.

    The fold mirrors Pipeline.fold for what the store needs: blobs by hash, `msg` events (a whole
    message), `part` events (tool results / user text pending until the next message or request,
    then closed into one user message), `source` events with static text for the identity,
    constraints and goal sections (pinned, as the system prompt is), and each `request` advancing
    the store's turn so recency matches the original run.
    """
    from engine.artifacts import Media, Message, Part, Text, Thinking, ToolCall, ToolResult
    from engine.recording.cpsession import RecordingReader
    from engine.recording.journal import unpack_event

    blobs: dict[str, str] = {}
    folder = MessageFolder(store)
    pending: list[Part] = []
    requests = 0
    pinned_kinds = ("identity", "constraints", "goal")

    def text(h: str) -> str:
        if h in blobs:
            return blobs[h]
        raise StoreError(f"{path}: event refers to blob {h[:12]} that the recording does not hold")

    def part(p: dict[str, Any]) -> Part:
        t = p.get("t")
        if t == "text":
            return Text(text(p["h"]))
        if t == "call":
            return ToolCall(p["id"], p["name"], text(p["h"]))
        if t == "result":
            return ToolResult(p["id"], text(p["h"]), bool(p.get("err")))
        if t == "thinking":
            return Thinking(text(p["h"]), p.get("sig", ""), redacted=bool(p.get("redacted")))
        return Media(str(p.get("media_type", "")), str(p.get("ref", "")), int(p.get("size", 0)))

    def close_pending() -> None:
        if pending:
            folder.add_message(Message("user", tuple(pending)))
            pending.clear()

    # One batch: a damaged frame (or Ctrl-C) half way through leaves the store as it was, not holding
    # the turns before the damage as if they were the whole session.
    with RecordingReader.open(path) as reader, store.batch():
        for raw in reader.events():
            ev = unpack_event(raw)
            k = ev.get("k")
            if k == "blob":
                data = ev["data"]
                blobs[ev["h"]] = data if isinstance(data, str) else bytes(data).decode("utf-8", "replace")
            elif k == "source" and ev.get("h") and ev.get("spec", {}).get("kind") in pinned_kinds:
                folder.ids.append(
                    _store_add(store, text(ev["h"]), Kind.SYSTEM, pin=True, source=str(ev["spec"]["id"]))
                )
            elif k == "msg":
                close_pending()
                folder.add_message(Message(ev["role"], tuple(part(p) for p in ev["parts"])))
            elif k == "part":
                pending.append(part(ev["part"]))
            elif k == "request":
                close_pending()
                requests += 1
                store.advance_turn()
        close_pending()
    return folder.ids, requests
