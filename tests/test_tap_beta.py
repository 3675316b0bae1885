"""The tap over the Anthropic SDK's beta endpoint (`client.beta.messages`): what agents using betas
(context editing, compaction, the beta tool runner) call. The real `anthropic` SDK talks HTTP to the
stand-in upstream on loopback (it posts to `/v1/messages?beta=true` with the `anthropic-beta` header);
every call must be journaled as its own turn, with its usage, and the recording must verify."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import pytest
from anthropic.lib.tools import beta_async_tool, beta_tool

from engine.capture.tap import tap
from tests.capture.standin import StandIn
from tests.test_tap_clients import A_USAGE, TOOLS_A, _anthropic_history, _check, _sent, _usages

BETAS = ["context-management-2025-06-27"]
# A context-editing request as the beta documents it: the server clears old tool results.
EDITS = {"edits": [{"type": "clear_tool_uses_20250919", "keep": {"type": "tool_uses", "value": 3}}]}


@pytest.fixture(scope="module")
def upstream() -> Iterator[StandIn]:
    s = StandIn().start()
    yield s
    s.stop()


def _beta_requests(upstream: StandIn, since: int) -> list[tuple[str, dict[str, str], bytes]]:
    return [r for r in upstream.requests[since:] if r[0] == "/v1/messages"]


def test_beta_messages_sync_every_pattern(upstream: StandIn, tmp_path: Path) -> None:
    rec = tmp_path / "beta.cpsession"
    seen = len(upstream.requests)
    client = tap(anthropic.Anthropic(api_key="k", base_url=upstream.url, max_retries=0), record=rec, split=False)
    kw: dict[str, Any] = {
        "model": "claude-sonnet-4",
        "max_tokens": 100,
        "system": "Be terse.",
        "tools": TOOLS_A,
        "betas": BETAS,
        "context_management": EDITS,
    }
    r0 = client.beta.messages.create(messages=[{"role": "user", "content": "List the files."}], **kw)
    assert isinstance(r0, anthropic.types.beta.BetaMessage)  # the agent gets the SDK's own object
    msgs = _anthropic_history(r0.content)
    with client.beta.messages.create(messages=msgs, stream=True, **kw) as stream:
        kinds = [e.type for e in stream]
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    with client.beta.messages.stream(messages=msgs, **kw) as s:
        assert s.get_final_message().stop_reason == "tool_use"
    raw = client.beta.messages.with_raw_response.create(messages=msgs, **kw)
    assert raw.parse().content[0].type == "text"
    parsed = client.beta.messages.parse(messages=msgs, **kw)
    assert parsed.stop_reason == "tool_use"
    stats = client.contextpipe_stats
    assert stats.errors == 0 and stats.calls == 5, stats.last_error
    client.contextpipe_tap.close()
    # every call really went to the beta endpoint, with the betas header
    sent = _beta_requests(upstream, seen)
    assert len(sent) == 5 and all(h.get("anthropic-beta") == BETAS[0] for _, h, _ in sent)
    ev = _check(rec, 5)
    u = _usages(ev)
    assert [u[t] for t in range(5)] == [A_USAGE] * 5
    # the history the agent sent (SDK beta content blocks in it) is the turn's actual request
    assert [m["role"] for m in _sent(ev, 4)] == ["system", "user", "assistant", "tool"]


def test_beta_tool_runner_is_captured(upstream: StandIn, tmp_path: Path) -> None:
    """The SDK's beta tool runner (it calls beta.messages.parse itself, then runs the tool)."""
    rec = tmp_path / "runner.cpsession"
    client = tap(anthropic.Anthropic(api_key="k", base_url=upstream.url, max_retries=0), record=rec)
    ran: list[str] = []

    @beta_tool
    def bash(cmd: str) -> str:
        """Run a shell command."""
        ran.append(cmd)
        return "a.py"

    runner = client.beta.messages.tool_runner(
        model="claude-sonnet-4",
        max_tokens=100,
        messages=[{"role": "user", "content": "List the files."}],
        tools=[bash],
        betas=BETAS,
        max_iterations=3,
    )
    replies = list(runner)
    assert len(replies) == 3 and ran == ["ls -la"] * 3  # the stand-in always asks for the tool
    assert client.contextpipe_stats.errors == 0, client.contextpipe_stats.last_error
    client.contextpipe_tap.close()
    ev = _check(rec, 3)
    assert [len(_sent(ev, t)) for t in range(3)] == [1, 3, 5]  # the runner's growing history, as sent
    assert _sent(ev, 2)[-1]["role"] == "tool"
    assert all(u == A_USAGE for u in _usages(ev).values()) and len(_usages(ev)) == 3


async def test_beta_messages_async_every_pattern(upstream: StandIn, tmp_path: Path) -> None:
    rec = tmp_path / "abeta.cpsession"
    client = tap(anthropic.AsyncAnthropic(api_key="k", base_url=upstream.url, max_retries=0), record=rec, split=False)
    kw: dict[str, Any] = {"model": "claude-sonnet-4", "max_tokens": 100, "tools": TOOLS_A, "betas": BETAS}
    r0 = await client.beta.messages.create(messages=[{"role": "user", "content": "List the files."}], **kw)
    msgs = _anthropic_history(r0.content)
    stream = await client.beta.messages.create(messages=msgs, stream=True, **kw)
    assert len([e async for e in stream]) > 5
    async with client.beta.messages.stream(messages=msgs, **kw) as s:
        text = [t async for t in s.text_stream]
    assert "".join(text).strip() == "Hello from the stand-in."
    raw = await client.beta.messages.with_raw_response.create(messages=msgs, **kw)
    assert (await raw.parse()).stop_reason == "tool_use"
    assert (await client.beta.messages.parse(messages=msgs, **kw)).stop_reason == "tool_use"

    @beta_async_tool
    async def bash(cmd: str) -> str:
        """Run a shell command."""
        return "a.py"

    runner = client.beta.messages.tool_runner(
        messages=msgs[:1], tools=[bash], max_iterations=2, **{k: v for k, v in kw.items() if k != "tools"}
    )
    assert len([m async for m in runner]) == 2
    assert client.contextpipe_stats.errors == 0, client.contextpipe_stats.last_error
    client.contextpipe_tap.close()
    u = _usages(_check(rec, 7))
    assert [u[t] for t in range(7)] == [A_USAGE] * 7


def test_plain_and_beta_calls_share_one_session(upstream: StandIn, tmp_path: Path) -> None:
    """An agent that switches to the beta endpoint mid-run (to turn on a beta) stays one recording."""
    rec = tmp_path / "mixed.cpsession"
    client = tap(anthropic.Anthropic(api_key="k", base_url=upstream.url, max_retries=0), record=rec)
    kw: dict[str, Any] = {"model": "claude-sonnet-4", "max_tokens": 100, "tools": TOOLS_A}
    r0 = client.messages.create(messages=[{"role": "user", "content": "List the files."}], **kw)
    client.beta.messages.create(messages=_anthropic_history(r0.content), betas=BETAS, **kw)
    client.contextpipe_tap.close()
    ev = _check(rec, 2)
    assert len(_sent(ev, 1)) == 3
