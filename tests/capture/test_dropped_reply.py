"""An agent that does not hand a reply back: mini-swe-agent answers a reply without a tool call with a
format-error user message and leaves the reply itself out of its next request (its history is the
request it sent, plus that message). The shadow history the tap (and the proxy, which journals through
it) had fed, with the reply last, was then no prefix of the next request, and the whole conversation was
fed to the engine again: every earlier message twice, and the engine's plan ("what ContextPipe would
send") about twice the size of what the agent sent, on every later turn.
Real openai SDK through the tap, and through the proxy, against the stand-in."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import openai

from engine.capture.tap import tap
from tests.capture.conftest import Proxied, errors, events_of, verify_ok
from tests.capture.standin import StandIn

TOOLS: list[Any] = [{"type": "function", "function": {
    "name": "bash", "description": "Run a command",
    "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}}]
FORMAT_ERROR = "Tool call error: no tool calls found in the response. Every response MUST call a tool."


def _mini_like(client: openai.OpenAI) -> list[dict[str, Any]]:
    """mini-swe-agent's loop: a reply with a tool call is kept with its result; one without is dropped
    and answered with a format error. The messages of the last request."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a careful coding agent."},
        {"role": "user", "content": "Look around, then finish."},
    ]
    for _ in range(4):
        r = client.chat.completions.create(model="gpt-4o", messages=messages, tools=TOOLS)  # type: ignore[arg-type]
        msg = r.choices[0].message
        if msg.tool_calls:
            messages.append(msg.model_dump(exclude_none=True))
            for call in msg.tool_calls:
                out = json.loads(call.function.arguments)["command"]  # type: ignore[union-attr]
                messages.append({"role": "tool", "tool_call_id": call.id, "content": f"ran: {out}"})
        else:
            messages.append({"role": "user", "content": FORMAT_ERROR})
    return messages


def _fed_once(path: Path, replies: int) -> None:
    evs = events_of(path)
    assistant = [e for e in evs if e["k"] == "msg" and e.get("role") == "assistant"]
    # each reply fed once (the dropped one included: the engine keeps what the model said), none again
    assert len(assistant) == replies, [e.get("parts") for e in assistant]
    calls = [p["id"] for e in assistant for p in e.get("parts") or [] if p.get("t") == "call"]
    assert len(calls) == len(set(calls)), calls
    assert not errors(path)
    verify_ok(path)


def test_a_dropped_reply_is_not_fed_twice_through_the_tap(standin: StandIn, tmp_path: Path) -> None:
    standin.script = [{"bash": "ls"}, "I will look at the files first.", {"bash": "cat a.py"}, {"bash": "echo done"}]
    rec = tmp_path / "t.cpsession"
    client = tap(openai.OpenAI(base_url=standin.url + "/v1", api_key="k", max_retries=0), record=rec)
    sent = _mini_like(client)
    t = client.contextpipe_tap
    assert t.pipe is not None
    # the engine's history: what the agent sent (less its system prompt), the dropped reply, the last reply
    assert len(t.pipe.history) <= len(sent) - 1 + 2, (len(t.pipe.history), len(sent))
    t.close()
    assert client.contextpipe_stats.errors == 0, client.contextpipe_stats.last_error
    _fed_once(rec, 4)


def test_a_dropped_reply_is_not_fed_twice_through_the_proxy(proxied: Proxied, standin: StandIn) -> None:
    standin.script = [{"bash": "ls"}, "I will look at the files first.", {"bash": "cat a.py"}, {"bash": "echo done"}]
    _mini_like(openai.OpenAI(base_url=proxied.url + "/v1", api_key="k", max_retries=0))
    (path,) = proxied.finish()
    _fed_once(path, 4)
