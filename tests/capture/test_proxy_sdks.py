"""The real anthropic and openai SDKs (sync, async, streamed and not) through the proxy to the stand-in.

Each test checks what the agent got (the SDK parsed it as from the real API) and what was recorded:
one session per conversation, one turn per call, the provider's usage with cache reads and writes,
and a recording that `verify` accepts. The API key reaches the upstream untouched and appears nowhere
in the recording or on the probe.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import anthropic
import openai

from engine.importers.ingest import actual_requests
from engine.probe.client import ProbeClient, list_agents
from tests.capture.conftest import Proxied, errors, events_of, finish_reasons, usages, verify_ok
from tests.capture.standin import USAGE_ANTHROPIC, USAGE_DEEPSEEK, USAGE_OPENAI, USAGE_RESPONSES, StandIn

KEY_A = "sk-ant-api03-SECRETSECRET-anthropic-key"
KEY_O = "sk-proj-SECRETSECRET-openai-key"
SYSTEM = "You are a careful coding agent."
TOOLS = [
    {
        "name": "bash",
        "description": "Run a command",
        "input_schema": {"type": "object", "properties": {"cmd": {"type": "string"}}},
    }
]
ANTHROPIC_TOTAL = (
    USAGE_ANTHROPIC["input_tokens"]
    + USAGE_ANTHROPIC["cache_read_input_tokens"]
    + USAGE_ANTHROPIC["cache_creation_input_tokens"]
)


def _anthropic_messages(turn: int) -> list[dict[str, object]]:
    msgs: list[dict[str, object]] = [{"role": "user", "content": "List the files."}]
    for i in range(turn):
        msgs.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": f"Looking {i}."},
                    {"type": "tool_use", "id": f"toolu_{i}", "name": "bash", "input": {"cmd": "ls"}},
                ],
            }
        )
        msgs.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": f"README.md {i}"}
                ],
            }
        )
    return msgs


def _assert_no_key(paths: list[Path], *keys: str) -> None:
    for p in paths:
        data = p.read_bytes()
        for k in keys:
            assert k.encode() not in data and b"SECRETSECRET" not in data, f"key recorded in {p}"


def test_anthropic_sdk_sync_async_stream(proxied: Proxied, standin: StandIn) -> None:
    client = anthropic.Anthropic(base_url=proxied.url, api_key=KEY_A, max_retries=0)
    common = {"model": "claude-sonnet-4", "max_tokens": 256, "system": SYSTEM, "tools": TOOLS}
    r0 = client.messages.create(messages=_anthropic_messages(0), **common)  # type: ignore[arg-type]
    assert r0.content[1].type == "tool_use" and r0.usage.cache_read_input_tokens == 3400
    with client.messages.stream(messages=_anthropic_messages(1), **common) as s:  # type: ignore[arg-type]
        text = "".join(s.text_stream)
        final = s.get_final_message()
    assert text.strip() == "Hello from the stand-in."
    assert final.usage.cache_creation_input_tokens == 1200

    async def run_async() -> None:
        ac = anthropic.AsyncAnthropic(base_url=proxied.url, api_key=KEY_A, max_retries=0)
        r = await ac.messages.create(messages=_anthropic_messages(2), **common)  # type: ignore[arg-type]
        assert r.stop_reason == "tool_use"
        stream = await ac.messages.create(messages=_anthropic_messages(3), stream=True, **common)  # type: ignore[arg-type]
        kinds = [ev.type async for ev in stream]
        assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
        await ac.close()

    asyncio.run(run_async())
    # The key went to the upstream exactly as the SDK sent it.
    seen = [h for path, h, _ in standin.requests[-4:]]
    # (this SDK version sends it as x-api-key or as a bearer token; either way, byte for byte)
    assert all(h.get("x-api-key") == KEY_A or h.get("authorization") == f"Bearer {KEY_A}" for h in seen)
    assert proxied.recorder.flush(60)
    live = [a for a in list_agents() if a.session is not None]
    assert [a.target for a in live] == [
        proxied.recorder.sessions[k][0].target for k in proxied.recorder.sessions
    ]
    with ProbeClient.connect(live[0].pid, session=live[0].session, timeout=10) as pc:
        assert pc.hello["model"] == "claude-sonnet-4" and pc.hello["turns"] == 4
    paths = proxied.finish()
    assert len(paths) == 1, "one conversation, one session"
    us = usages(paths[0])
    assert len(us) == 4
    assert all(finish_reasons(paths[0])), finish_reasons(paths[0])  # streamed ones too: from message_delta
    for u in us:
        assert u == {
            "input_tokens": ANTHROPIC_TOTAL,
            "output_tokens": 17,
            "cache_read_tokens": 3400,
            "cache_write_tokens": 1200,
            "cache_write_1h_tokens": 200,  # the stand-in's 5m/1h split, priced at their own rates
        }
    assert verify_ok(paths[0]) == 4
    actual = [e for e in events_of(paths[0]) if e.get("k") == "actual"]
    assert [len(a["add"]) + a["base"] for a in actual] == [2, 4, 6, 8]  # system + the growing history
    _assert_no_key(paths, KEY_A)


def test_openai_sdk_chat_and_responses(proxied: Proxied, standin: StandIn) -> None:
    client = openai.OpenAI(base_url=proxied.url + "/v1", api_key=KEY_O, max_retries=0)
    history: list[dict[str, object]] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Say hello."},
    ]
    r = client.chat.completions.create(model="gpt-4o", messages=history)  # type: ignore[arg-type]
    history.append(r.choices[0].message.model_dump(exclude_none=True))
    history.append({"role": "user", "content": "Again, streamed."})
    stream = client.chat.completions.create(
        model="gpt-4o",
        messages=history,
        stream=True,  # type: ignore[arg-type]
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    assert chunks[-1].usage is not None and chunks[-1].usage.prompt_tokens_details.cached_tokens == 1920
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    history.append({"role": "assistant", "content": text})
    history.append({"role": "user", "content": "Async now."})

    async def run_async() -> None:
        ac = openai.AsyncOpenAI(base_url=proxied.url + "/v1", api_key=KEY_O, max_retries=0)
        r2 = await ac.chat.completions.create(model="gpt-4o", messages=history)  # type: ignore[arg-type]
        assert r2.usage is not None and r2.usage.prompt_tokens == 2048
        s = await ac.chat.completions.create(
            model="gpt-4o",
            messages=history
            + [  # type: ignore[arg-type]
                {"role": "assistant", "content": r2.choices[0].message.content},
                {"role": "user", "content": "And streamed."},
            ],
            stream=True,
            stream_options={"include_usage": True},
        )
        assert [c async for c in s][-1].usage is not None
        await ac.close()

    asyncio.run(run_async())
    resp = client.responses.create(model="gpt-4.1", instructions=SYSTEM, input="Hi via Responses.")
    assert resp.output_text == "Hello from the stand-in."
    with client.responses.stream(
        model="gpt-4.1",
        instructions=SYSTEM,
        input=[
            {"role": "user", "content": "Hi via Responses."},
            {"role": "assistant", "content": resp.output_text},
            {"role": "user", "content": "Streamed this time."},
        ],
    ) as rs:
        final = rs.get_final_response()
    assert final.usage is not None and final.usage.input_tokens_details.cached_tokens == 1024
    assert all(h.get("authorization") == f"Bearer {KEY_O}" for _, h, _ in standin.requests[-6:])
    paths = proxied.finish()
    assert len(paths) == 2  # chat and responses: two conversations
    chat, responses = paths
    assert (
        usages(chat)
        == [{"input_tokens": 2048, "output_tokens": 12, "cache_read_tokens": 1920, "cache_write_tokens": 0}]
        * 4
    )
    assert (
        usages(responses)
        == [{"input_tokens": 1500, "output_tokens": 9, "cache_read_tokens": 1024, "cache_write_tokens": 0}]
        * 2
    )
    assert USAGE_OPENAI["prompt_tokens"] == 2048 and USAGE_RESPONSES["input_tokens"] == 1500
    assert verify_ok(chat) == 4 and verify_ok(responses) == 2
    _assert_no_key(paths, KEY_O)


def test_deepseek_prefix_route(proxied: Proxied, standin: StandIn) -> None:
    client = openai.OpenAI(base_url=proxied.url + "/deepseek", api_key=KEY_O, max_retries=0)
    msgs = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Reason."}]
    r = client.chat.completions.create(model="deepseek-reasoner", messages=msgs)  # type: ignore[arg-type]
    assert r.choices[0].message.content == "Hello from the stand-in."
    s = client.chat.completions.create(
        model="deepseek-reasoner",
        messages=msgs,
        stream=True,  # type: ignore[arg-type]
        stream_options={"include_usage": True},
    )
    list(s)
    assert [p for p, _, _ in standin.requests[-2:]] == ["/chat/completions"] * 2  # prefix stripped
    paths = proxied.finish()
    hit = USAGE_DEEPSEEK["prompt_cache_hit_tokens"]
    reasoning = USAGE_DEEPSEEK["completion_tokens_details"]["reasoning_tokens"]  # kept for the export
    # (the same opening asked twice: two conversations, engine.capture.lineage)
    assert [usages(p) for p in paths] == [[
        {"input_tokens": 900, "output_tokens": 30, "cache_read_tokens": hit, "cache_write_tokens": 0,
         "reasoning_tokens": reasoning}
    ]] * 2
    assert [verify_ok(p) for p in paths] == [1, 1]


def test_session_header_and_tasks_split_sessions(proxied: Proxied) -> None:
    client = openai.OpenAI(base_url=proxied.url + "/v1", api_key=KEY_O, max_retries=0)
    for task in ("Task A", "Task B", "Task A"):
        client.chat.completions.create(
            model="gpt-4o",
            messages=[  # type: ignore[list-item]
                {"role": "system", "content": SYSTEM},
                {"role": "user", "content": task},
            ],
        )
    tagged = openai.OpenAI(
        base_url=proxied.url + "/v1",
        api_key=KEY_O,
        max_retries=0,
        default_headers={"X-ContextPipe-Session": "my-agent"},
    )
    tagged.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "Task A"}])
    paths = proxied.finish()
    # Task A asked again after its reply: the same opening, another conversation (engine.capture.lineage)
    assert len(paths) == 4
    assert [len(usages(p)) for p in paths] == [1, 1, 1, 1]
    assert [k for k in proxied.recorder.sessions][3] == "h:my-agent"
    assert [i.branch for i, _ in proxied.recorder.sessions.values()][2] == {
        "kind": "same_opening", "session": 1, "turn": 0, "at_message": 2}
    for p in paths:
        verify_ok(p)
    assert not any(errors(p) for p in paths)


def test_anthropic_beta_endpoint_and_concurrent_calls(proxied: Proxied, standin: StandIn) -> None:
    """`client.beta.messages` posts to /v1/messages?beta=true with the anthropic-beta header: forwarded
    with its query and header, recorded like /v1/messages. Concurrent calls of one conversation's
    session each keep their own usage (the stand-in answers `[standin tokens=N delay=S]` with N output
    tokens, S seconds late: the first started finishes last)."""
    seen = len(standin.requests)
    common = {"model": "claude-sonnet-4", "max_tokens": 256, "system": SYSTEM, "tools": TOOLS}

    async def run() -> list[int]:
        ac = anthropic.AsyncAnthropic(base_url=proxied.url, api_key=KEY_A, max_retries=0)

        async def one(k: int) -> int:
            msgs = _anthropic_messages(0) + [
                {"role": "assistant", "content": "ok"},
                {"role": "user", "content": f"part {k} [standin tokens={10 + k} delay={0.1 * (4 - k):.1f}]"},
            ]
            r = await ac.beta.messages.create(
                messages=msgs, betas=["context-management-2025-06-27"], **common
            )  # type: ignore[arg-type]
            return r.usage.output_tokens

        return await asyncio.gather(*(one(k) for k in range(4)))

    assert asyncio.run(run()) == [10, 11, 12, 13]
    sent = standin.requests[seen:]
    assert (
        all(h.get("anthropic-beta") == "context-management-2025-06-27" for _, h, _ in sent) and len(sent) == 4
    )
    (path,) = proxied.finish()
    outs = [u["output_tokens"] for u in usages(path)]
    assert sorted(outs) == [10, 11, 12, 13]
    assert verify_ok(path) == 4
    # each turn's usage is its own request's: the request's text names the tokens it asked for
    ev = events_of(path)
    blobs = {
        e["h"]: e["data"] if isinstance(e["data"], str) else e["data"].decode()
        for e in ev
        if e["k"] == "blob"
    }
    per_turn = {e["turn"]: e["usage"]["output_tokens"] for e in ev if e["k"] == "usage"}
    for turn, hashes in actual_requests(ev).items():
        last = json.loads(blobs[hashes[-1]])
        asked = re.search(r"tokens=(\d+)", blobs[last["content_h"]])
        assert asked is not None and per_turn[turn] == int(asked.group(1))
