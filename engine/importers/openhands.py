"""OpenAI-style message lists with tool calls (the OpenHands records from agent-data-protocol).

Shape: `{messages, tools, instance_id, run_id, resolved, test_result}`; also accepted: a bare list of
messages. Every message carries all keys (`content`, `tool_calls`, `tool_call_id`, `name`,
`function_call`), null where unused. Assistant turns may make several parallel calls; results are
`role: tool` messages in call order; some assistant turns make no call (plain text); content may be
null or a list of parts. Each assistant message is one call whose prompt is everything before it.

No usage or timestamps in these files. The model is not a field: it is the prefix of `run_id`
(`gpt-4o-2024-08-06_maxiter_30_...`).
"""

from __future__ import annotations

import re
from typing import Any

from engine.importers._common import (
    Ctx,
    join,
    openai_message,
    openai_tools,
    session_from_model,
)
from engine.importers.model import CallRec, ImportedSession, Interner, MessageRec

NAME = "openhands"

_RUN_ID_MODEL = re.compile(r"^(?P<model>.+?)_maxiter_")


def sniff(data: Any) -> bool:
    if isinstance(data, list):
        msgs = data
    elif isinstance(data, dict) and isinstance(data.get("messages"), list):
        if "tools" in data:
            return True
        msgs = data["messages"]
    else:
        return False
    return (
        bool(msgs)
        and all(isinstance(m, dict) and "role" in m for m in msgs)
        and any(m.get("role") == "tool" or m.get("tool_calls") for m in msgs)
    )


def parse(data: Any, path: str) -> ImportedSession:
    ctx = Ctx(NAME, path)
    if isinstance(data, list):
        top: dict[str, Any] = {"messages": data}
        mpath = ""
    else:
        top = ctx.obj(data, "(top level)")
        mpath = "messages"
    msgs = ctx.lst(ctx.key(top, "messages", ""), mpath or "(top level)")
    tools = openai_tools(top.get("tools"), ctx, "tools")
    run_id = top.get("run_id")
    model: str | None = None
    if isinstance(top.get("model"), str):
        model = top["model"]
    elif isinstance(run_id, str) and (mm := _RUN_ID_MODEL.match(run_id)):
        model = mm.group("model")

    intern = Interner()
    history: list[MessageRec] = []
    calls: list[CallRec] = []
    for i, raw in enumerate(msgs):
        where = join(mpath, i) if mpath else f"[{i}]"
        msg = intern(openai_message(raw, ctx, where))
        if msg.role == "assistant":
            calls.append(
                CallRec(
                    messages=tuple(history),
                    response=msg,
                    tools=tools,
                    usage=None,
                    timestamp=None,
                    model=model,
                )
            )
        history.append(msg)

    meta: dict[str, Any] = {
        "instance_id": top.get("instance_id"),
        "run_id": run_id,
        "resolved": top.get("resolved"),
        "model_source": "model" if isinstance(top.get("model"), str) else ("run_id" if model else "none"),
    }
    return session_from_model(NAME, path, model, calls, meta)
