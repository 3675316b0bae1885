"""mini-swe-agent trajectories (`*.traj.json`, trajectory_format `mini-swe-agent-1.x`).

Shape: `{info, messages, trajectory_format, instance_id}`. `messages` is the agent's own OpenAI-style
history, in order; each assistant message is one model call and carries the raw provider response in
`extra.response` (usage, model, `created`) and `extra.timestamp`. The prompt of call k is every message
before the k-th assistant message (mini-swe-agent sends its whole history, no processors).

Quirks handled here:
- a final `role: "exit"` message closes the run; it is not a call. When the run died on a model call
  (`info.model_stats.api_calls` counts one more call than there are assistant messages, e.g. a DeepSeek
  server error), that failed call is kept as a `CallRec` with `response=None` and the exception text.
- `tool_calls` and `extra` have been seen written as `str()` of Python objects by some versions;
  they are read with json / ast.literal_eval, never eval.
- the tool schema is not in the file; in tool-calling runs it is mini-swe-agent's fixed `bash` tool,
  reconstructed below (meta `tools_source` says so).
"""

from __future__ import annotations

from typing import Any

from engine.feedback import reply_diagnostics
from engine.importers._common import (
    Ctx,
    guess_provider,
    join,
    openai_message,
    parse_dictish,
    strip_provider_prefix,
    sub,
    usage_rec,
)
from engine.importers.model import CallRec, ImportedSession, Interner, MessageRec, ToolSchemaRec, UsageRec

NAME = "mini-swe-agent"

# mini-swe-agent's BASH_TOOL (src/minisweagent/models/utils/actions_toolcall.py). Not recorded in the
# trajectory, but it was in every request of a tool-calling run, so prompt token counts include it.
BASH_TOOL = ToolSchemaRec(
    name="bash",
    description="Execute a bash command",
    parameters={
        "type": "object",
        "properties": {"command": {"type": "string", "description": "The bash command to execute"}},
        "required": ["command"],
    },
)

# Exit statuses that end a run normally; anything else with an exception text may be a failed call.
_NORMAL_EXITS = {"Submitted", "LimitsExceeded", "submitted", ""}


def sniff(data: Any) -> bool:
    return (
        isinstance(data, dict)
        and isinstance(data.get("trajectory_format"), str)
        and data["trajectory_format"].startswith("mini-swe-agent")
    )


def _usage(resp: dict[str, Any], ctx: Ctx, where: str) -> UsageRec | None:
    """litellm's usage as mini-swe-agent saved it: DeepSeek hit/miss tokens, OpenAI-style cached tokens,
    or, for Anthropic models, `cache_creation_input_tokens` / `cache_read_input_tokens` (cache writes are
    billed at 1.25x or 2x input: dropping them prices an Anthropic run low)."""
    u = resp.get("usage")
    if u is None:
        return None
    return usage_rec(u, ctx, join(where, "usage"), **reply_diagnostics(resp))


def parse(data: Any, path: str) -> ImportedSession:
    ctx = Ctx(NAME, path)
    top = ctx.obj(data, "(top level)")
    fmt = top.get("trajectory_format")
    if fmt is not None and not (isinstance(fmt, str) and fmt.startswith("mini-swe-agent")):
        ctx.fail("trajectory_format", f"is {fmt!r} (expected mini-swe-agent-1.x)")
    msgs = ctx.lst(ctx.key(top, "messages", ""), "messages")
    info = sub(top, "info")
    model_cfg = sub(sub(info, "config"), "model")
    cfg_model = model_cfg.get("model_name") if isinstance(model_cfg.get("model_name"), str) else None

    intern = Interner()
    history: list[MessageRec] = []
    calls: list[CallRec] = []
    exit_extra: dict[str, Any] | None = None
    exit_content = ""
    tool_mode = any(isinstance(m, dict) and m.get("tool_calls") for m in msgs)
    tools: tuple[ToolSchemaRec, ...] = (BASH_TOOL,) if tool_mode else ()

    for i, raw in enumerate(msgs):
        where = join("messages", i)
        m = ctx.obj(raw, where)
        role = m.get("role")
        if role == "exit":
            if i != len(msgs) - 1:
                ctx.fail(join(where, "role"), "is 'exit' but more messages follow (exit must be last)")
            exit_extra = parse_dictish(m.get("extra"), ctx, join(where, "extra"))
            exit_content = ctx.text(m.get("content"), join(where, "content"))
            break
        msg = intern(openai_message(m, ctx, where, extra_roles=("exit",)))
        if msg.role == "assistant":
            extra = parse_dictish(m.get("extra"), ctx, join(where, "extra"))
            ew = join(where, "extra")
            resp = extra.get("response")
            resp = parse_dictish(resp, ctx, join(ew, "response")) if resp is not None else {}
            ts = extra.get("timestamp")
            model = resp.get("model") if isinstance(resp.get("model"), str) else None
            calls.append(
                CallRec(
                    messages=tuple(history),
                    response=msg,
                    tools=tools,
                    usage=_usage(resp, ctx, join(ew, "response")),
                    timestamp=float(ts)
                    if isinstance(ts, (int, float)) and not isinstance(ts, bool)
                    else None,
                    model=model or (strip_provider_prefix(cfg_model) if cfg_model else None),
                    fingerprint=fp if isinstance(fp := resp.get("system_fingerprint"), str) else None,
                )
            )
        history.append(msg)

    stats = sub(info, "model_stats")
    api_calls = stats.get("api_calls")
    exit_status = (exit_extra or {}).get("exit_status", info.get("exit_status"))
    exc = (exit_extra or {}).get("exception_str") or info.get("exception_str")
    failed = 0
    notes: list[str] = []
    if isinstance(api_calls, int) and api_calls > len(calls) and exit_status in _NORMAL_EXITS:
        # A run that ended normally made no failed call: the messages were cut short (or edited). A
        # failed call used to be invented in their place, with the exit status ("Submitted") as its
        # error, and a file with no messages left imported as one failed turn.
        notes.append(
            f"info.model_stats.api_calls counts {api_calls} model calls but the messages hold "
            f"{len(calls)}: the rest are not in the file (cut short?) and are not imported"
        )
    elif isinstance(api_calls, int) and api_calls > len(calls):
        failed = api_calls - len(calls)
    elif (
        api_calls is None
        and exc
        and exit_status not in _NORMAL_EXITS
        and history
        and history[-1].role != "assistant"
    ):
        failed = 1
    if failed:
        # Only the last of them can be placed: earlier failures were retried inside the same step and
        # left no trace in the history. They are counted in meta.
        calls.append(
            CallRec(
                messages=tuple(history),
                response=None,
                tools=tools,
                usage=None,
                timestamp=None,
                model=calls[-1].model if calls else (strip_provider_prefix(cfg_model) if cfg_model else None),
                error=str(exc or exit_content or exit_status or "model call failed"),
            )
        )

    model = next((c.model for c in calls if c.model), None) or (
        strip_provider_prefix(cfg_model) if cfg_model else "unknown"
    )
    provider = guess_provider(cfg_model) if cfg_model else guess_provider(model)
    meta: dict[str, Any] = {
        "instance_id": top.get("instance_id"),
        "trajectory_format": fmt,
        "mini_version": info.get("mini_version"),
        "exit_status": exit_status,
        "model_stats": stats,
        "failed_calls": failed,
        "tools_source": "reconstructed: mini-swe-agent BASH_TOOL" if tool_mode else "none (text-based run)",
        "timestamp_meaning": "extra.timestamp: when the response was recorded",
        "notes": notes,
    }
    return ImportedSession(format=NAME, source=path, model=model, provider=provider, calls=calls, meta=meta)
