"""The OpenAI Responses API in Chat Completions terms, so one journaling path records both.

Request: `instructions` -> a system message; `input` (a string, or a list of items) -> messages:
`message` items by role (text parts joined), calls -> an assistant message's tool calls (the calls
that follow an assistant message or each other merged into it, as Chat Completions has them and
response_to_chat records the reply), their outputs -> tool messages,
`reasoning` summaries -> the next assistant message's reasoning. Calls are `function_call` (arguments),
`custom_tool_call` (a freeform tool's raw `input`, e.g. Codex's apply_patch patches) and
`local_shell_call` (its `action`); outputs are the matching `*_output` items, text or content parts.
Tools: the flat `{"type": "function", "name", "parameters"}` form -> Chat's nested one; a `custom`
(freeform) tool keeps its description, with its `format` (the grammar the model writes to) as its
parameters; built-in tools (web search, file search, local shell) carry no schema and are skipped.
`previous_response_id` is kept (the server holds the conversation so far; the journal puts it back).
Response: `output` items -> one assistant message, with its `id`; usage as sent (`input_tokens`, cached
included, with `input_tokens_details.cached_tokens` / `cache_write_tokens`), read by
engine.feedback.normalize_usage; why it stopped (`status`, or an incomplete reply's
`incomplete_details.reason`) -> the choice's `finish_reason` (engine.feedback.responses_stop).
"""

from __future__ import annotations

import json
from typing import Any

from engine.feedback import responses_stop


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    out = []
    # A list of parts, as the API takes; anything else (true, 5: a request the API refuses) has no text.
    # It raised TypeError from the recorder's session key, and the call was not recorded at all.
    for part in content if isinstance(content, list) else ():
        if isinstance(part, dict):
            if isinstance(part.get("text"), str):
                out.append(part["text"])
            elif part.get("type") in ("input_image", "input_file"):
                out.append(f"[{part['type'][6:]}]")
    return "\n".join(out)


# Items the model emits to call a tool, and the items that carry their results back.
_CALLS = ("function_call", "custom_tool_call", "local_shell_call")
_OUTPUTS = ("function_call_output", "custom_tool_call_output", "local_shell_call_output")


def _call(item: dict[str, Any]) -> dict[str, Any]:
    """A call item as a Chat tool call: what the model wrote is the call's arguments (a function's JSON,
    a freeform tool's raw input, the local shell's action), so it is counted and shown as sent."""
    kind = item.get("type")
    if kind == "custom_tool_call":
        name, args = str(item.get("name", "")), str(item.get("input", ""))
    elif kind == "local_shell_call":
        name, args = "local_shell", json.dumps(item.get("action") or {})
    else:
        name, args = str(item.get("name", "")), str(item.get("arguments", ""))
    return {
        "id": str(item.get("call_id") or item.get("id") or ""),
        "type": "function",
        "function": {"name": name, "arguments": args},
    }


def request_to_chat(body: dict[str, Any]) -> dict[str, Any]:
    msgs: list[dict[str, Any]] = []
    if isinstance(body.get("instructions"), str):
        msgs.append({"role": "system", "content": body["instructions"]})
    inp = body.get("input")
    items = [{"type": "message", "role": "user", "content": inp}] if isinstance(inp, str) else inp
    if not isinstance(items, list):
        items = []  # (an input that is a number or a map: no items, as for none)
    reasoning: list[str] = []
    for item in items:
        if not isinstance(item, dict):
            continue
        kind = item.get("type", "message")
        if kind == "message":
            role = item.get("role", "user")
            m: dict[str, Any] = {
                "role": "system" if role == "developer" else role,
                "content": _text(item.get("content")),
            }
            if role == "assistant" and reasoning:
                m["reasoning_content"], reasoning = "\n".join(reasoning), []
            msgs.append(m)
        elif kind in _CALLS:
            call = _call(item)
            last = msgs[-1] if msgs else None
            if last is not None and last["role"] == "assistant" and not reasoning:
                # The calls after the reply's text are the same reply (its output items, handed back as
                # they came): one assistant message, as response_to_chat recorded it. Split in two, the
                # next request no longer continued the history the tap had fed, and all of it was fed again.
                last.setdefault("tool_calls", []).append(call)
            else:
                m = {"role": "assistant", "content": None, "tool_calls": [call]}
                if reasoning:
                    m["reasoning_content"], reasoning = "\n".join(reasoning), []
                msgs.append(m)
        elif kind in _OUTPUTS:
            out = item.get("output")
            msgs.append(
                {
                    "role": "tool",
                    "tool_call_id": str(item.get("call_id") or item.get("id") or ""),
                    # content parts (input_text, input_image...) as the model reads them, not their JSON
                    "content": out
                    if isinstance(out, str)
                    else _text(out)
                    if isinstance(out, list)
                    else json.dumps(out),
                }
            )
        elif kind == "reasoning":
            # Each item's summary as it came (response_to_chat's way, so the reply the tap fed and the
            # request that hands it back agree to the byte): split into lines and joined again, a
            # summary's trailing newline was lost, and the request no longer continued the fed history.
            summary = _text(item.get("summary"))
            if summary:
                reasoning.append(summary)
    tools = []
    given = body.get("tools")
    for t in given if isinstance(given, list) else ():
        if isinstance(t, dict) and t.get("type") == "custom":
            fmt = t.get("format")
            tools.append(
                {
                    "type": "function",
                    "function": {
                        "name": t.get("name", ""),
                        "description": t.get("description") or "",
                        "parameters": {"format": fmt} if isinstance(fmt, dict) else {},
                    },
                }
            )
        elif isinstance(t, dict) and t.get("type") == "function":
            tools.append(
                {
                    "type": "function",
                    "function": {
                        "name": t.get("name", ""),
                        "description": t.get("description") or "",
                        "parameters": t.get("parameters") or {},
                    },
                }
            )
    out_body: dict[str, Any] = {"model": body.get("model"), "messages": msgs}
    if tools:
        out_body["tools"] = tools
    if isinstance(body.get("previous_response_id"), str):
        # The conversation so far is held by the server: the journal puts it back (Tap._parse_request)
        out_body["previous_response_id"] = body["previous_response_id"]
    for key in ("max_output_tokens", "temperature", "top_p", "stream", "text"):
        if key in body:  # the request's settings, which the turn's trace keeps (tap.request_params)
            out_body[key] = body[key]
    return out_body


def why_failed(resp: Any) -> str:
    """Why a `failed` response failed, in the API's words (its `error`: code and message): what a
    stream that ended with `response.failed` is journaled with, by the proxy and the tap alike."""
    err = resp.get("error") if isinstance(resp, dict) else None
    if isinstance(err, dict):
        said = ": ".join(str(err[k]) for k in ("code", "message") if err.get(k))
    else:
        said = str(err) if err else ""
    return f"the response failed ({said[:500]})" if said else "the response failed (no error given)"


def response_to_chat(resp: dict[str, Any]) -> dict[str, Any]:
    if resp.get("error") and not resp.get("output"):
        return {"error": resp["error"]}
    texts, calls, reasoning = [], [], []
    output = resp.get("output")
    for item in output if isinstance(output, list) else ():  # (a number there raised from the recorder)
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind == "message":
            texts.append(_text(item.get("content")))
        elif kind in _CALLS:
            calls.append(_call(item))
        elif kind == "reasoning":
            summary = _text(item.get("summary"))
            if summary:  # an item with no summary adds nothing (not an empty line)
                reasoning.append(summary)
    msg: dict[str, Any] = {"role": "assistant", "content": "\n".join(texts) if texts else None}
    if calls:
        msg["tool_calls"] = calls
    if reasoning:
        msg["reasoning_content"] = "\n".join(reasoning)
    choice: dict[str, Any] = {"index": 0, "message": msg}
    reason = responses_stop(resp)  # the body is a Responses one, whether it says `object` or not
    if reason is not None:
        choice["finish_reason"] = reason  # the usage event keeps it (engine.feedback.reply_diagnostics)
    out: dict[str, Any] = {"model": resp.get("model"), "choices": [choice]}
    if isinstance(resp.get("id"), str):
        out["id"] = resp["id"]  # what a next request's previous_response_id names
    u = resp.get("usage")
    if isinstance(u, dict):
        # Kept as the API sent it: the one normaliser (engine.feedback.normalize_usage) reads the Responses
        # shape (input_tokens with input_tokens_details.cached_tokens and cache_write_tokens) directly.
        out["usage"] = u
    return out
