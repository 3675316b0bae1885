"""Text-embedded function calls (the SWE-smith records from agent-data-protocol).

Shape: `{messages, model, patch, instance_id, traj_id, resolved, id}`; messages have only `role` and
`content`. The model (Claude) wrote its calls inline:

    prose...
    <function=str_replace_editor>
    <parameter=command>view</parameter>
    <parameter=path>/testbed/x.py</parameter>
    </function>

and the result came back as the next `user` message, normally starting with `OBSERVATION:` (but e.g.
"Your command ran successfully and did not produce any output." has no prefix).

Conversion: each assistant message is one call. Its calls become `ToolCallRec`s with deterministic ids
`call_<turn>_<n>` and JSON arguments (all values strings, as written); its `content` keeps the prose with
the function blocks removed; the verbatim text is in `meta["original_text"][turn]`. A user message that
directly follows an assistant message with a call becomes a `tool` message answering the first call,
content unchanged (it is what the model read). Closing tags are optional: a block or parameter ends at
its closing tag, the next opening tag, or the end of the message.
"""

from __future__ import annotations

import json
import re
from typing import Any

from engine.importers._common import Ctx, join, session_from_model
from engine.importers.model import CallRec, ImportedSession, Interner, MessageRec, ToolCallRec

NAME = "swe-smith"

_FN_OPEN = re.compile(r"<function=([^>\s]+)>")
_FN_CLOSE = "</function>"
_PARAM_OPEN = re.compile(r"<parameter=([^>\s]+)>")
_PARAM_CLOSE = "</parameter>"
_ROLES = ("system", "user", "assistant")


def sniff(data: Any) -> bool:
    if not (isinstance(data, dict) and isinstance(data.get("messages"), list)):
        return False
    msgs = data["messages"]
    return any(
        isinstance(m, dict) and m.get("role") == "assistant" and "<function=" in str(m.get("content", ""))
        for m in msgs
    ) and not any(isinstance(m, dict) and (m.get("role") == "tool" or m.get("tool_calls")) for m in msgs)


def _strip_one_newline(s: str) -> str:
    # Writers put values on their own lines; one newline each side is layout, the rest is content
    # (file text, indentation of new_str) and must survive.
    if s.startswith("\n"):
        s = s[1:]
    if s.endswith("\n"):
        s = s[:-1]
    return s


def parse_function_calls(text: str, turn: int) -> tuple[str, list[ToolCallRec]]:
    """Split assistant text into (prose, calls). Deterministic ids: call_<turn>_<n>."""
    calls: list[ToolCallRec] = []
    prose: list[str] = []
    pos = 0
    while True:
        m = _FN_OPEN.search(text, pos)
        if m is None:
            prose.append(text[pos:])
            break
        prose.append(text[pos : m.start()])
        body_start = m.end()
        nxt = _FN_OPEN.search(text, body_start)
        close = text.find(_FN_CLOSE, body_start)
        end_candidates = [x for x in (close, nxt.start() if nxt else -1) if x >= 0]
        body_end = min(end_candidates) if end_candidates else len(text)
        body = text[body_start:body_end]
        pos = body_end + len(_FN_CLOSE) if body_end == close else body_end
        params: dict[str, str] = {}
        p = 0
        while (pm := _PARAM_OPEN.search(body, p)) is not None:
            vstart = pm.end()
            pnext = _PARAM_OPEN.search(body, vstart)
            pclose = body.find(_PARAM_CLOSE, vstart)
            ends = [x for x in (pclose, pnext.start() if pnext else -1) if x >= 0]
            vend = min(ends) if ends else len(body)
            params[pm.group(1)] = _strip_one_newline(body[vstart:vend])
            p = vend + len(_PARAM_CLOSE) if vend == pclose else vend
        calls.append(
            ToolCallRec(
                id=f"call_{turn}_{len(calls)}",
                name=m.group(1),
                arguments=json.dumps(params, ensure_ascii=False),
            )
        )
    return "".join(prose).strip(), calls


def parse(data: Any, path: str) -> ImportedSession:
    ctx = Ctx(NAME, path)
    top = ctx.obj(data, "(top level)")
    msgs = ctx.lst(ctx.key(top, "messages", ""), "messages")
    model = top.get("model") if isinstance(top.get("model"), str) else None

    intern = Interner()
    history: list[MessageRec] = []
    calls: list[CallRec] = []
    original: dict[int, str] = {}
    pending: ToolCallRec | None = None  # the call the next user message answers
    no_prefix = 0
    for i, raw in enumerate(msgs):
        where = join("messages", i)
        m = ctx.obj(raw, where)
        role = ctx.key(m, "role", where)
        if role not in _ROLES:
            ctx.fail(join(where, "role"), f"is {role!r} (expected {'/'.join(_ROLES)})")
        content = ctx.text(m.get("content"), join(where, "content"))
        if role == "assistant":
            turn = len(calls)
            prose, tcs = parse_function_calls(content, turn)
            if tcs:
                original[turn] = content
            msg = intern(
                MessageRec(role="assistant", content=prose if tcs else content, tool_calls=tuple(tcs))
            )
            calls.append(
                CallRec(
                    messages=tuple(history), response=msg, tools=(), usage=None, timestamp=None, model=model
                )
            )
            pending = tcs[0] if tcs else None
        elif role == "user" and pending is not None:
            if not content.startswith("OBSERVATION:"):
                no_prefix += 1
            msg = intern(MessageRec(role="tool", content=content, tool_call_id=pending.id, name=pending.name))
            pending = None
        else:
            msg = intern(MessageRec(role=role, content=content))
            pending = None
        history.append(msg)

    meta: dict[str, Any] = {
        "instance_id": top.get("instance_id"),
        "traj_id": top.get("traj_id"),
        "resolved": top.get("resolved"),
        "original_text": original,
        "observations_without_prefix": no_prefix,
        "tool_call_ids": "synthetic: call_<turn>_<n>",
    }
    return session_from_model(NAME, path, model, calls, meta)
