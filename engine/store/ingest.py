"""Load an imported trajectory (engine.importers.ImportedSession) into a store, message by message."""

from __future__ import annotations

from typing import Any

from .items import Kind, LinkKind
from .store import ContextStore

_KIND = {"system": Kind.SYSTEM, "user": Kind.USER, "assistant": Kind.ASSISTANT, "tool": Kind.TOOL_RESULT}


def message_text(m: Any) -> str:
    """A message's text as the model saw it: content plus its tool calls (name and JSON arguments)."""
    text = str(m.content or "")
    calls = tuple(getattr(m, "tool_calls", ()) or ())
    if calls:
        text = (text + "\n" if text else "") + "\n".join(f"{c.name}({c.arguments})" for c in calls)
    return text


def ingest_session(store: ContextStore, session: Any) -> list[int]:
    """Add the whole session (last prompt plus its response) in order. System prompt and the first
    user message (the task) are pinned; tool results link `replies_to` the call that asked for them.
    Each model call advances the store's turn, so recency matches the original run."""
    calls = [c for c in session.calls]
    if not calls:
        return []
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
    new_id = store.add(message_text(m), kind, pin=pin, source=call_id, links=links)
    for c in getattr(m, "tool_calls", ()) or ():
        owner[c.id] = new_id
    return new_id
