"""SWE-agent trajectories (`*.traj`).

Shape: `{history, trajectory, info, environment[, replay_config]}`. `history[]` holds every message the
agent ever produced or received (`role`, `content`, plus `thought`, `action`, `agent`, `is_demo`, ...).
Each assistant message is one model call.

What the prompt of call k was:
- Function-calling runs record, per trajectory step, `messages`: the history *after* that step as the
  history processors rendered it (e.g. `last_n_observations` replaces old outputs with
  "Old environment output: (N lines omitted)"). That is exactly the next query, so call k's prompt is
  `trajectory[k-1].messages` and call 0's is the history before the first assistant message. These
  prompts are not prefixes of each other once the processor starts eliding; that is what was sent.
- Older runs keep no per-step messages; the prompt is the history before the k-th assistant message
  (meta `prompt_source` says which one was used, since processors, if any, are not reflected).

Tool results are `user` messages in text-action runs (kept as user messages: that is what the model saw)
and `tool` messages with `tool_call_ids` (a list) in function-calling runs.
Usage: SWE-agent keeps only session totals (`info.model_stats`), so calls get `usage=None` and the totals
go to meta.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine.importers._common import (
    Ctx,
    join,
    openai_tool_calls,
    parse_listish,
    session_from_model,
    sub,
    thinking_blocks,
)
from engine.importers.model import ROLES, CallRec, ImportedSession, Interner, MessageRec

NAME = "swe-agent"


def sniff(data: Any) -> bool:
    return isinstance(data, dict) and isinstance(data.get("history"), list) and "trajectory" in data


def _message(m: Any, ctx: Ctx, where: str) -> MessageRec:
    m = ctx.obj(m, where)
    role = ctx.key(m, "role", where)
    if role not in ROLES:
        ctx.fail(join(where, "role"), f"is {role!r} (expected {'/'.join(ROLES)})")
    content = m.get("content")
    if isinstance(content, list):
        # newer SWE-agent stores content as [{type: text, text: ...}] for cache-control support
        parts = []
        for j, p in enumerate(content):
            pw = join(join(where, "content"), j)
            p = ctx.obj(p, pw)
            parts.append(ctx.text(p.get("text"), join(pw, "text")))
        text = "\n".join(parts)
    else:
        text = ctx.text(content, join(where, "content"))
    tool_call_id: str | None = None
    if role == "tool":
        single = m.get("tool_call_id")
        ids = (
            [single]
            if isinstance(single, str)
            else parse_listish(m.get("tool_call_ids"), ctx, join(where, "tool_call_ids"))
        )
        if len(ids) > 1:
            # SWE-agent allows one call per turn; a result answering several ids cannot be represented
            ctx.fail(join(where, "tool_call_ids"), f"lists {len(ids)} ids (expected one)")
        tool_call_id = ctx.text(ids[0], join(where, "tool_call_ids[0]")) if ids else None
    thinking, blocks = thinking_blocks(m.get("thinking_blocks"))
    return MessageRec(
        role=role,
        content=text,
        tool_calls=openai_tool_calls(m.get("tool_calls"), ctx, join(where, "tool_calls"))
        if role == "assistant"
        else (),
        tool_call_id=tool_call_id,
        name=None,
        thinking=thinking,
        thinking_blocks=blocks,
    )


def _model_name(top: dict[str, Any], path: str) -> tuple[str | None, str]:
    name = sub(sub(sub(top, "replay_config"), "agent"), "model").get("name")
    if isinstance(name, str) and name not in ("replay", "instant_empty_submit", "human"):
        return name, "replay_config.agent.model.name"
    # SWE-agent's own file names carry the model ("gpt4__swe-bench-...") and nothing inside does
    stem = Path(path).name.lower()
    if "gpt4" in stem or "gpt-4" in stem:
        return "gpt-4", "file name"
    return None, "none"


def parse(data: Any, path: str) -> ImportedSession:
    ctx = Ctx(NAME, path)
    top = ctx.obj(data, "(top level)")
    hist_raw = ctx.lst(ctx.key(top, "history", ""), "history")
    traj = top.get("trajectory")
    traj = ctx.lst(traj, "trajectory") if traj is not None else []
    intern = Interner()
    history = [intern(_message(m, ctx, join("history", i))) for i, m in enumerate(hist_raw)]
    asst_idx = [i for i, m in enumerate(history) if m.role == "assistant"]

    # Per-step rendered prompts, used only when they line up with the history (one step per assistant
    # message and each step ending with that assistant message or its observation).
    step_msgs: list[list[MessageRec]] | None = None
    if traj and all(isinstance(s, dict) and isinstance(s.get("messages"), list) for s in traj):
        if len(traj) == len(asst_idx):
            step_msgs = []
            for k, s in enumerate(traj):
                sw = join(join("trajectory", k), "messages")
                step_msgs.append([intern(_message(m, ctx, join(sw, j))) for j, m in enumerate(s["messages"])])
            for k, ms in enumerate(step_msgs):
                if history[asst_idx[k]] not in ms:
                    step_msgs = None  # inconsistent: fall back to the raw history
                    break

    calls: list[CallRec] = []
    model, model_source = _model_name(top, path)
    for k, ai in enumerate(asst_idx):
        if k > 0 and step_msgs is not None:
            prompt = tuple(step_msgs[k - 1])
        else:
            prompt = tuple(history[:ai])
        calls.append(
            CallRec(messages=prompt, response=history[ai], tools=(), usage=None, timestamp=None, model=model)
        )

    info = sub(top, "info")
    meta: dict[str, Any] = {
        "prompt_source": "trajectory[k-1].messages (history processors applied)"
        if step_msgs is not None
        else "history prefix (history processors, if any, not reflected)",
        "usage_totals": info.get("model_stats"),
        "exit_status": info.get("exit_status"),
        "model_source": model_source,
        "demo_messages": sum(1 for m in hist_raw if isinstance(m, dict) and m.get("is_demo")),
        "function_calling": any(m.tool_calls for m in history),
    }
    return session_from_model(NAME, path, model, calls, meta)
