"""What an agent edits of its own history besides a reply's text reaches the engine's history too: a
tool result it truncated, a tool call whose arguments it rewrote, a user message it reworded, each where
it stood. The real openai and anthropic SDKs (sync, async, streamed) through the proxy and a tapped
client. Before, the engine kept the original of each (its plan, its cache-break attribution and
simulate's what-if were of a conversation the agent no longer sent); now each is one `edit` event of
that part (Pipeline.edit_part), folded alike by a replay (`verify`), explain and simulate, and the cache
break it makes is named for it ("turn 1's tool result truncated").
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import anthropic
import openai
from typer.testing import CliRunner

from engine.capture.tap import tap
from engine.recording.journal import trace_of
from engine.recording.replay import Replayer
from engine.sim.simulate import simulate_file
from inspector.cli import app
from tests.capture.conftest import Proxied, errors, events_of, verify_ok
from tests.capture.edited_conversation import BIG, TRUNCATED, openai_truncated_result
from tests.capture.standin import StandIn

SYSTEM = "You are a careful coding agent. " * 300  # over the 1,024 tokens a cached prefix needs
CACHED = [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}]


def _engine_bodies(path: Path) -> list[bytes]:
    """The request the engine planned at each turn, rebuilt by a replay of the recording."""
    rep = Replayer(events_of(path))
    return [rep.replan(t).serialized.body for t in range(rep.turns)]


def _traces(path: Path) -> dict[int, dict[str, Any]]:
    return {e["turn"]: trace_of(e) for e in events_of(path) if e["k"] == "turn"}


def _check(path: Path, was: str | bytes, now: str | bytes, part: list[Any], at: int = 2) -> dict[int, dict[str, Any]]:
    """One edit (of `part`: [turn, what, how]) sent at turn `at` of three: the engine's requests sent
    `was` before it and `now` from it on (a text as a JSON string holds it; bytes as they are), a
    replay folds it, explain says it."""
    old, new = (json.dumps(t)[1:-1] if isinstance(t, str) else t.decode() for t in (was, now))
    evs = events_of(path)
    (edit,) = [e for e in evs if e["k"] == "edit"]
    assert edit["turn"] == at and "part" in edit, edit
    bodies = _engine_bodies(path)
    assert old.encode() in bodies[at - 1]
    for b in bodies[at:]:
        assert new.encode() in b and old.encode() not in b, b[-800:]
    traces = _traces(path)
    rw = traces[at]["history_rewrite"]
    assert rw["edited"] == 1 and rw["applied"] == 1 and rw["edited_parts"] == [part], rw
    assert verify_ok(path) == 3
    assert not errors(path)
    said = f"turn {part[0]}'s {part[1].replace('call', 'tool call').replace('result', 'tool result').replace('user', 'user message')} {part[2]}"
    res = CliRunner().invoke(app, ["explain", str(path), "--turn", str(at)])
    assert res.exit_code == 0, res.output
    assert f"the engine's history holds 1 edit ({said}), as the request sent them)" in res.stdout, res.stdout
    return traces


def test_a_truncated_tool_result_through_the_proxy_openai(proxied: Proxied, standin: StandIn) -> None:
    client = openai.OpenAI(base_url=proxied.url + "/v1", api_key="k", max_retries=0)
    openai_truncated_result(client, SYSTEM, standin)
    (path,) = proxied.finish()
    _check(path, BIG, TRUNCATED, [1, "result", "truncated"])


def test_the_requests_after_a_truncation_are_those_never_truncated(tmp_path: Path, standin: StandIn) -> None:
    """A tapped client: from the edit on, the engine's requests are byte for byte those of the same
    conversation whose result was the truncated text in the first place, and every simulate column alike."""
    edited, plain = tmp_path / "edited.cpsession", tmp_path / "plain.cpsession"
    for rec, how in ((edited, "edit"), (plain, "start")):
        standin.scripted_calls = 0  # (the same call id in both: the stand-in numbers its calls)
        client = tap(openai.OpenAI(base_url=standin.url + "/v1", api_key="k", max_retries=0), record=rec, serve=False)
        openai_truncated_result(client, SYSTEM, standin, how)
        client.contextpipe_tap.close()
    assert [e["k"] for e in events_of(plain)].count("edit") == 0
    a, b = _engine_bodies(edited), _engine_bodies(plain)
    assert a[2:] == b[2:] and a[1] != b[1]
    from engine.sim.simulate_settings import SimSettings

    settings = SimSettings(policies=("all",), calibrate=False)
    sa, sb = simulate_file(edited, settings), simulate_file(plain, settings)
    for name, col in sa.policies.items():
        other = sb.policies[name]
        assert col is not None and other is not None
        got = [t.to_json()["prompt_tokens"] for t in col.turns][2:]
        want = [t.to_json()["prompt_tokens"] for t in other.turns][2:]
        assert got == want, (name, got, want)


def test_a_rewritten_tool_call_through_the_proxy_anthropic(proxied: Proxied, standin: StandIn) -> None:
    """Turn 0's call sent back as it came at turn 1, then with its input rewritten (a secret taken out of
    the command) at turn 2: the engine's call holds the new input, and the cache break at turn 2 (the
    call was in turn 1's cached prefix) is the agent's, said so."""
    standin.script = [{"bash": "TOKEN=s3cr3t make"}, "Second answer.", "Third answer."]
    client = anthropic.Anthropic(base_url=proxied.url, api_key="k", max_retries=0)
    common: dict[str, Any] = {"model": "claude-sonnet-4", "max_tokens": 64, "system": CACHED}
    msgs: list[Any] = [{"role": "user", "content": "Build it."}]
    r = client.messages.create(messages=msgs, **common)
    blocks = [b.model_dump(exclude_none=True) for b in r.content]
    msgs += [
        {"role": "assistant", "content": blocks},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": blocks[1]["id"], "content": "built"}]},
    ]
    r = client.messages.create(messages=msgs, **common)
    msgs[1] = {"role": "assistant", "content": [blocks[0], {**blocks[1], "input": {"command": "make"}}]}
    msgs += [
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in r.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": r.content[1].id, "content": "ok 2"}]},  # type: ignore[union-attr]
    ]
    client.messages.create(messages=msgs, **common)
    (path,) = proxied.finish()
    traces = _check(path, "s3cr3t", b'"input":{"command":"make"}', [0, "call", "edited"])
    brk = traces[2]["cache_break"]
    assert brk is not None and brk["cause"] == "history rewritten by the agent: turn 0's tool call edited", brk
    pipeline = simulate_file(path).policies["pipeline"]
    assert pipeline is not None
    assert pipeline.cache_break_causes == {"history rewritten by the agent: turn 0's tool call edited": 1}


def test_a_reworded_user_message_async_streamed_openai_tapped(tmp_path: Path, standin: StandIn) -> None:
    """An async OpenAI client, every call streamed: the agent rewords its task where it stood."""
    standin.script = ["First answer.", "Second answer.", "Third answer."]
    rec = tmp_path / "u.cpsession"
    client = tap(openai.AsyncOpenAI(base_url=standin.url + "/v1", api_key="k", max_retries=0), record=rec, serve=False)

    async def run() -> None:
        async def call(msgs: list[Any]) -> str:
            stream = await client.chat.completions.create(
                model="gpt-4o", messages=msgs, stream=True, stream_options={"include_usage": True}
            )
            return "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])

        msgs: list[Any] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Fix the test."}]
        msgs += [{"role": "assistant", "content": await call(msgs)}, {"role": "user", "content": "Go on."}]
        msgs += [{"role": "assistant", "content": await call(msgs)}, {"role": "user", "content": "End."}]
        msgs[1] = {"role": "user", "content": "Fix the failing test in tests/test_io.py."}
        await call(msgs)
        await client.close()  # (on this loop: closed after it, httpx's close fails)

    asyncio.run(run())
    client.contextpipe_tap.close()
    _check(rec, "Fix the test.", "Fix the failing test in tests/test_io.py.", [0, "user", "edited"])


def test_a_truncated_tool_result_async_streamed_anthropic_through_the_proxy(
    proxied: Proxied, standin: StandIn
) -> None:
    """An async Anthropic client through the proxy, its later calls streamed: the result sent at turn 1
    truncated where it stood at turn 2."""
    standin.script = [{"bash": "make"}, "Second answer.", "Third answer."]
    client = anthropic.AsyncAnthropic(base_url=proxied.url, api_key="k", max_retries=0)
    common: dict[str, Any] = {"model": "claude-sonnet-4", "max_tokens": 64, "system": CACHED}

    async def run() -> None:
        msgs: list[Any] = [{"role": "user", "content": "Build it."}]
        r = await client.messages.create(messages=msgs, **common)  # (a scripted call is not streamed)
        blocks = [b.model_dump(exclude_none=True) for b in r.content]
        result = {"type": "tool_result", "tool_use_id": blocks[1]["id"], "content": BIG}
        msgs += [{"role": "assistant", "content": blocks}, {"role": "user", "content": [result]}]
        async with client.messages.stream(messages=msgs, **common) as s:
            reply = await s.get_final_message()
        msgs[2] = {"role": "user", "content": [{**result, "content": TRUNCATED}]}
        msgs += [
            {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in reply.content]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": reply.content[1].id, "content": "ok"}]},  # type: ignore[union-attr]
        ]
        async with client.messages.stream(messages=msgs, **common) as s:
            await s.get_final_message()
        await client.close()  # (on this loop: closed after it, httpx's close fails)

    asyncio.run(run())
    (path,) = proxied.finish()
    traces = _check(path, BIG[200:260], TRUNCATED, [1, "result", "truncated"])
    brk = traces[2]["cache_break"]
    assert brk is not None and brk["cause"] == "history rewritten by the agent: turn 1's tool result truncated", brk
    # simulate (and report, from it) names the engine's break the same way (the agent's own requests
    # cache only the system prompt: what it sent broke nothing cached)
    report = simulate_file(path)
    pipeline, sent = report.policies["pipeline"], report.policies["as_sent"]
    assert pipeline is not None and sent is not None
    assert pipeline.cache_break_causes == {"history rewritten by the agent: turn 1's tool result truncated": 1}
    assert sent.cache_break_causes == {}
