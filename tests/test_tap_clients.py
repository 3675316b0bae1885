"""The tap over real client patterns: sync and async clients of both SDKs, streams (`stream=True` and the
stream helpers), `with_raw_response`, the Responses API, SDK objects in the history, and arguments the
tap must never trip on. The real anthropic/openai SDKs talk HTTP to the stand-in upstream (real wire
formats, SSE, usage fields) on loopback; every recording must verify and carry the right usage."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import pydantic
import pytest

from engine.capture.tap import tap
from engine.importers.ingest import actual_requests
from engine.recording.cpsession import RecordingReader
from engine.recording.journal import unpack_event
from engine.recording.replay import Replayer
from engine.sim.pricing import cost
from engine.sim.simulate import simulate_file
from tests.capture.standin import USAGE_OPENAI, USAGE_RESPONSES, StandIn

TOOLS_A = [{"name": "bash", "description": "Run a shell command", "input_schema": {"type": "object"}}]
TOOLS_O = [
    {
        "type": "function",
        "function": {"name": "bash", "description": "Run a shell command", "parameters": {"type": "object"}},
    }
]
# The stand-in's Anthropic usage: 21 uncached + 3400 read + 1200 written (1000 for 5 minutes, 200 for 1 hour)
A_USAGE = {
    "input_tokens": 21 + 3400 + 1200,
    "output_tokens": 17,
    "cache_read_tokens": 3400,
    "cache_write_tokens": 1200,
    "cache_write_1h_tokens": 200,
}


@pytest.fixture(scope="module")
def upstream() -> Iterator[StandIn]:
    s = StandIn().start()
    yield s
    s.stop()


def _events(path: Path) -> list[dict[str, Any]]:
    return [unpack_event(e) for e in RecordingReader.open(path).events()]


def _check(path: Path, turns: int) -> list[dict[str, Any]]:
    """Every call its own turn, the recording verifies; returns the events."""
    ev = _events(path)
    assert [e["turn"] for e in ev if e["k"] == "actual"] == list(range(turns))
    report = Replayer(ev).verify()
    assert report.ok, report.mismatches[:1]
    return ev


def _sent(ev: list[dict[str, Any]], turn: int) -> list[dict[str, Any]]:
    """The messages the agent actually sent at `turn`, from the recording (blobs resolved)."""
    blobs = {
        e["h"]: e["data"] if isinstance(e["data"], str) else e["data"].decode()
        for e in ev
        if e["k"] == "blob"
    }
    out = []
    for h in actual_requests(ev)[turn]:
        d = json.loads(blobs[h])
        d["content"] = blobs[d.pop("content_h")]
        for c in d.get("tool_calls", []):
            c["arguments"] = blobs[c.pop("arguments_h")]
        out.append(d)
    return out


def _usages(ev: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """Each turn's usage figures (the finish reason kept beside them is _reasons')."""
    return {e["turn"]: {k: v for k, v in e["usage"].items() if k != "finish_reason"} for e in ev if e["k"] == "usage"}


def _reasons(ev: list[dict[str, Any]]) -> dict[int, str | None]:
    """Each turn's finish reason as the reply gave it (kept with the usage for the OpenTelemetry export)."""
    return {e["turn"]: e["usage"].get("finish_reason") for e in ev if e["k"] == "usage"}


def _anthropic_history(resp_content: Any) -> list[dict[str, Any]]:
    # The SDK's own content blocks go back into the history, as Anthropic's docs show
    return [
        {"role": "user", "content": "List the files."},
        {"role": "assistant", "content": resp_content},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.py"}]},
    ]


# ------------------------------------------------------------------------------------------ Anthropic


def test_anthropic_sync_every_pattern(upstream: StandIn, tmp_path: Path) -> None:
    rec = tmp_path / "a.cpsession"
    client = tap(anthropic.Anthropic(api_key="k", base_url=upstream.url, max_retries=0), record=rec, split=False)
    kw: dict[str, Any] = {
        "model": "claude-sonnet-4",
        "max_tokens": 100,
        "system": "Be terse.",
        "tools": TOOLS_A,
    }
    r0 = client.messages.create(messages=[{"role": "user", "content": "List the files."}], **kw)
    assert isinstance(r0, anthropic.types.Message)  # the agent gets the SDK's own object back
    msgs = _anthropic_history(r0.content)
    # stream=True: every event reaches the agent unchanged; the tap reassembles the message
    with client.messages.create(messages=msgs, stream=True, **kw) as stream:
        kinds = [e.type for e in stream]
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    # the .stream() helper
    with client.messages.stream(messages=msgs, **kw) as s:
        final = s.get_final_message()
    assert final.stop_reason == "tool_use"
    # with_raw_response: the agent's parse() still works
    raw = client.messages.with_raw_response.create(messages=msgs, **kw)
    assert raw.parse().content[0].type == "text"
    # arguments the tap must not trip on (bytes keys in extra_query / extra_headers)
    client.messages.create(messages=msgs, extra_query={"q": "1"}, extra_headers={"x-agent": "t"}, **kw)
    stats = client.contextpipe_stats
    assert stats.errors == 0, stats.last_error
    client.contextpipe_tap.close()
    ev = _check(rec, 5)
    u = _usages(ev)
    assert [u[t] for t in range(5)] == [A_USAGE] * 5  # streamed calls too: usage from the final events
    assert all(_reasons(ev)[t] for t in range(5)), _reasons(ev)  # and why each reply stopped
    sim = simulate_file(rec)
    actual = sim.policies["actual"]
    assert actual is not None
    one = (21 * 3.0 + 3400 * 0.3 + 1000 * 3.75 + 200 * 6.0 + 17 * 15.0) / 1e6  # 1h writes at 2x input
    assert actual.cost_usd == pytest.approx(5 * one)
    assert cost("claude-sonnet-4", actual.totals, actual.output_tokens) == pytest.approx(5 * one)


def test_tap_never_raises_into_the_agent(upstream: StandIn, tmp_path: Path) -> None:
    plain = anthropic.Anthropic(api_key="k", base_url=upstream.url, max_retries=0)
    client = tap(
        anthropic.Anthropic(api_key="k", base_url=upstream.url, max_retries=0),
        record=tmp_path / "e.cpsession",
        split=False,
    )
    kw: dict[str, Any] = {"model": "claude-sonnet-4", "max_tokens": 10}

    def outcome(c: Any, **extra: Any) -> str:
        try:
            c.messages.create(messages=[{"role": "user", "content": "hi"}], **kw, **extra)
            return "ok"
        except Exception as exc:
            return type(exc).__name__

    # Whatever the SDK itself does with bytes keys, the tapped client does the same (issue 10 item 10)
    for extra in ({"extra_query": {b"q": "1"}}, {"extra_headers": {b"x-b": "1"}}, {"extra_body": {b"k": 1}}):
        assert outcome(client, **extra) == outcome(plain, **extra), extra
    # A history the tap cannot read (a one-shot generator): the call still goes through, unread by the tap
    gen = (m for m in [{"role": "user", "content": "hi"}])
    out = client.messages.create(messages=gen, **kw)
    assert out.content[0].type == "text"
    assert client.contextpipe_stats.errors >= 1 and "one-shot" in (client.contextpipe_stats.last_error or "")
    # A provider error reaches the agent as the SDK's own exception, and is journaled
    with pytest.raises(anthropic.RateLimitError):
        client.messages.create(
            messages=[{"role": "user", "content": "hi"}], model="claude-sonnet-4-error429", max_tokens=5
        )
    client.contextpipe_tap.close()
    ev = _events(tmp_path / "e.cpsession")
    diags = [e for e in ev if e["k"] == "diag"]
    assert (
        diags and diags[-1]["kind"] == "tap_error" and diags[-1]["count"] == client.contextpipe_stats.errors
    )
    assert any(e["k"] == "error" for e in ev)
    assert Replayer(ev).verify().ok


async def test_anthropic_async_every_pattern(upstream: StandIn, tmp_path: Path) -> None:
    rec = tmp_path / "aa.cpsession"
    client = tap(anthropic.AsyncAnthropic(api_key="k", base_url=upstream.url, max_retries=0), record=rec, split=False)
    kw: dict[str, Any] = {
        "model": "claude-sonnet-4",
        "max_tokens": 100,
        "system": "Be terse.",
        "tools": TOOLS_A,
    }
    r0 = await client.messages.create(messages=[{"role": "user", "content": "List the files."}], **kw)
    msgs = _anthropic_history(r0.content)
    stream = await client.messages.create(messages=msgs, stream=True, **kw)
    n = 0
    async for _ in stream:
        n += 1
    assert n > 5
    async with client.messages.stream(messages=msgs, **kw) as s:
        text = [t async for t in s.text_stream]
    assert "".join(text).strip() == "Hello from the stand-in."
    raw = await client.messages.with_raw_response.create(messages=msgs, **kw)
    assert (await raw.parse()).stop_reason == "tool_use"
    assert client.contextpipe_stats.errors == 0, client.contextpipe_stats.last_error
    client.contextpipe_tap.close()
    u = _usages(_check(rec, 4))
    assert [u[t] for t in range(4)] == [A_USAGE] * 4


# ------------------------------------------------------------------------------------------ OpenAI

O_USAGE = {"input_tokens": 2048, "output_tokens": 12, "cache_read_tokens": 1920, "cache_write_tokens": 0}


def test_openai_sync_every_pattern(upstream: StandIn, tmp_path: Path) -> None:
    rec = tmp_path / "o.cpsession"
    client = tap(openai.OpenAI(api_key="k", base_url=upstream.url, max_retries=0), record=rec, split=False)
    msgs: list[Any] = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]
    r0 = client.chat.completions.create(
        model="gpt-4o", messages=msgs, tools=TOOLS_O, prompt_cache_key="agent-7"
    )
    msgs.append(r0.choices[0].message)  # the idiom from OpenAI's docs: the SDK object in the history
    # tool calls in the OpenAI wire format, then their results
    msgs.append(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "bash", "arguments": '{"cmd":"ls"}'},
                }
            ],
        }
    )
    msgs.append({"role": "tool", "tool_call_id": "call_1", "content": "a.py"})
    chunks = list(
        client.chat.completions.create(
            model="gpt-4o", messages=msgs, tools=TOOLS_O, stream=True, stream_options={"include_usage": True}
        )
    )
    assert chunks[-1].usage is not None
    # a stream without include_usage: the tap does not ask for usage behind the agent's back
    no_usage = list(client.chat.completions.create(model="gpt-4o", messages=msgs, tools=TOOLS_O, stream=True))
    assert all(c.usage is None for c in no_usage)
    with client.chat.completions.stream(
        model="gpt-4o", messages=msgs, tools=TOOLS_O, stream_options={"include_usage": True}
    ) as s:
        for _ in s:
            pass
    raw = client.chat.completions.with_raw_response.create(model="gpt-4o", messages=msgs, tools=TOOLS_O)
    assert raw.parse().choices[0].message.content
    r = client.responses.create(
        model="gpt-4o", instructions="Be brief.", input="hi", prompt_cache_key="agent-7"
    )
    assert r.output_text
    rs = list(client.responses.create(model="gpt-4o", instructions="Be brief.", input="hi", stream=True))
    assert rs[-1].type == "response.completed"
    assert client.contextpipe_stats.errors == 0, client.contextpipe_stats.last_error
    assert client.contextpipe_stats.streams_without_usage == 1
    client.contextpipe_tap.close()
    ev = _check(rec, 7)
    u = _usages(ev)
    assert u[0] == {**O_USAGE, "prompt_cache_key": "agent-7"}
    assert u[1] == O_USAGE and u[3] == O_USAGE and u[4] == O_USAGE
    assert 2 not in u  # no usage was sent for that stream, and none is invented
    r_usage = {"input_tokens": 1500, "output_tokens": 9, "cache_read_tokens": 1024, "cache_write_tokens": 0}
    assert u[5] == {**r_usage, "prompt_cache_key": "agent-7"} and u[6] == r_usage
    assert USAGE_RESPONSES["input_tokens"] == 1500 and USAGE_OPENAI["prompt_tokens"] == 2048
    # the SDK message object was recorded as the assistant turn it is, not as its str()
    sent = _sent(ev, 1)
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "assistant", "tool"]
    assert sent[2]["content"] == "Hello from the stand-in." and "tool_calls" not in sent[2]
    assert sent[3]["tool_calls"][0]["arguments"] == '{"cmd":"ls"}' and sent[4]["content"] == "a.py"


async def test_openai_async_every_pattern(upstream: StandIn, tmp_path: Path) -> None:
    rec = tmp_path / "oa.cpsession"
    client = tap(openai.AsyncOpenAI(api_key="k", base_url=upstream.url, max_retries=0), record=rec, split=False)
    msgs: list[Any] = [{"role": "user", "content": "hi"}]
    r0 = await client.chat.completions.create(model="gpt-4o", messages=msgs)
    msgs.append(r0.choices[0].message)
    msgs.append({"role": "user", "content": "more"})
    stream = await client.chat.completions.create(
        model="gpt-4o", messages=msgs, stream=True, stream_options={"include_usage": True}
    )
    async with stream:
        async for _ in stream:
            pass
    r = await client.responses.create(model="gpt-4o", input="hi")
    assert r.output_text
    raw = await client.chat.completions.with_raw_response.create(model="gpt-4o", messages=msgs)
    assert raw.parse().choices  # openai's async raw response parses synchronously
    assert client.contextpipe_stats.errors == 0, client.contextpipe_stats.last_error
    client.contextpipe_tap.close()
    u = _usages(_check(rec, 4))
    assert u[0] == O_USAGE and u[1] == O_USAGE and u[3] == O_USAGE
    assert u[2]["cache_read_tokens"] == 1024


def test_abandoned_stream_is_its_own_turn_and_journaled_incomplete(upstream: StandIn, tmp_path: Path) -> None:
    rec = tmp_path / "ab.cpsession"
    client = tap(openai.OpenAI(api_key="k", base_url=upstream.url, max_retries=0), record=rec)
    s = client.chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "hi"}], stream=True
    )
    next(iter(s))
    s.close()  # the agent stops reading
    client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "again"}])
    client.contextpipe_tap.close()
    ev = _check(rec, 2)
    errs = [e for e in ev if e["k"] == "error"]
    assert errs and errs[0]["kind"] == "incomplete_stream" and errs[0]["turn"] == 0
    assert _usages(ev)[1] == O_USAGE


def test_tap_errors_reach_ps_and_the_trace(
    upstream: StandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from engine.probe.client import list_agents
    from inspector.cli import app

    rt = tmp_path / "rt"
    rt.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(rt))
    rec = tmp_path / "ps.cpsession"
    client = tap(openai.OpenAI(api_key="k", base_url=upstream.url, max_retries=0), record=rec, serve=True)
    try:
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
        # history the tap cannot read: counted, journaled, the call goes through
        client.chat.completions.create(model="gpt-4o", messages=iter([{"role": "user", "content": "x"}]))
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "again"}])
        agents = [a for a in list_agents() if a.pid == __import__("os").getpid()]
        assert agents and agents[0].tap_errors == 1
        out = CliRunner().invoke(app, ["ps"])
        assert "[1 tap errors]" in out.output
    finally:
        client.contextpipe_tap.close()
    traces = [e for e in _events(rec) if e["k"] == "turn"]
    from engine.recording.journal import trace_of

    assert [trace_of(t).get("tap_errors") for t in traces] == [None, 1]


def test_chat_stream_tool_calls_and_reasoning_reassembled() -> None:
    from engine.capture.tap_streams import ChatAccumulator

    acc = ChatAccumulator()
    chunks: list[dict[str, Any]] = [
        {"id": "c", "model": "deepseek-reasoner", "choices": [{"index": 0, "delta": {"role": "assistant"}}]},
        {"choices": [{"index": 0, "delta": {"reasoning_content": "Look "}}]},
        {"choices": [{"index": 0, "delta": {"reasoning_content": "first."}}]},
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "tool_calls": [
                            {"index": 0, "id": "call_a", "function": {"name": "bash", "arguments": '{"cm'}}
                        ]
                    },
                }
            ]
        },
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "tool_calls": [
                            {"index": 1, "id": "call_b", "function": {"name": "read", "arguments": "{}"}}
                        ]
                    },
                }
            ]
        },
        {
            "choices": [
                {"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": 'd": "ls"}'}}]}}
            ]
        },
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
        {
            "choices": [],
            "usage": {"prompt_tokens": 900, "completion_tokens": 30, "prompt_cache_hit_tokens": 640},
        },
    ]
    for c in chunks:
        acc.feed(c)
    r = acc.result()
    msg = r["choices"][0]["message"]
    assert acc.complete and msg["reasoning_content"] == "Look first."
    assert [(t["id"], t["function"]["name"], t["function"]["arguments"]) for t in msg["tool_calls"]] == [
        ("call_a", "bash", '{"cmd": "ls"}'),
        ("call_b", "read", "{}"),
    ]
    assert r["usage"]["prompt_cache_hit_tokens"] == 640


def test_openai_responses_stream_helper(upstream: StandIn, tmp_path: Path) -> None:
    rec = tmp_path / "rs.cpsession"
    client = tap(openai.OpenAI(api_key="k", base_url=upstream.url, max_retries=0), record=rec)
    with client.responses.stream(model="gpt-4o", input="hi") as s:
        for _ in s:
            pass
        final = s.get_final_response()
    assert final.output_text
    assert client.contextpipe_stats.errors == 0, client.contextpipe_stats.last_error
    client.contextpipe_tap.close()
    u = _usages(_check(rec, 1))
    assert u[0] == {
        "input_tokens": 1500,
        "output_tokens": 9,
        "cache_read_tokens": 1024,
        "cache_write_tokens": 0,
    }


def test_with_streaming_response_is_journaled_unobserved(upstream: StandIn, tmp_path: Path) -> None:
    rec = tmp_path / "sr.cpsession"
    client = tap(openai.OpenAI(api_key="k", base_url=upstream.url, max_retries=0), record=rec)
    with client.chat.completions.with_streaming_response.create(
        model="gpt-4o", messages=[{"role": "user", "content": "hi"}]
    ) as r:
        assert r.parse().choices[0].message.content  # the agent reads its own body, untouched by the tap
    assert client.contextpipe_stats.unobserved == 1 and client.contextpipe_stats.errors == 0
    client.contextpipe_tap.close()
    ev = _check(rec, 1)
    assert [e["kind"] for e in ev if e["k"] == "error"] == ["unobserved"]


class _Answer(pydantic.BaseModel):
    answer: str


@pytest.mark.filterwarnings("error::UserWarning")  # what the tap reads must not warn in the agent's stderr
def test_openai_structured_outputs_parse_is_journaled(upstream: StandIn, tmp_path: Path) -> None:
    # parse() posts without calling create(): chat.completions.parse, its beta alias (where older agents
    # call it, an object of its own) and responses.parse are each an agent's model call like any other.
    rec = tmp_path / "parse.cpsession"
    client = tap(openai.OpenAI(api_key="k", base_url=upstream.url, max_retries=0), record=rec, split=False)
    upstream.script[:] = ['{"answer": "4"}'] * 4
    msgs: list[Any] = [{"role": "user", "content": "2+2?"}]
    strict = [{"type": "function", "function": {**TOOLS_O[0]["function"], "strict": True}}]  # parse wants it
    r = client.chat.completions.parse(model="gpt-4o", messages=msgs, tools=strict, response_format=_Answer)
    assert r.choices[0].message.parsed == _Answer(answer="4")
    # (the reply as a dict: the SDK itself warns when it re-sends its own parsed message object)
    reply = {"role": "assistant", "content": r.choices[0].message.content}
    msgs += [reply, {"role": "user", "content": "3+3?"}]
    r1 = client.beta.chat.completions.parse(model="gpt-4o", messages=msgs, response_format=_Answer)
    assert r1.choices[0].message.parsed == _Answer(answer="4")
    raw = client.chat.completions.with_raw_response.parse(
        model="gpt-4o", messages=msgs, response_format=_Answer
    )
    assert raw.parse().choices[0].message.parsed == _Answer(answer="4")
    r3 = client.responses.parse(model="gpt-4o", input="2+2?", text_format=_Answer)
    assert r3.output_parsed == _Answer(answer="4")
    assert client.contextpipe_stats.calls == 4
    assert client.contextpipe_stats.errors == 0, client.contextpipe_stats.last_error
    client.contextpipe_tap.close()
    ev = _check(rec, 4)
    u = _usages(ev)
    assert u[0] == u[1] == u[2] == O_USAGE and u[3]["input_tokens"] == 1500
    sent = _sent(ev, 1)
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assert sent[1]["content"] == '{"answer": "4"}'
    tools = next(e for e in ev if e["k"] == "actual")["tool_names"]
    assert tools == ["bash"]


def test_openai_file_parts_refusals_and_custom_tools_keep_the_session(
    upstream: StandIn, tmp_path: Path
) -> None:
    # Content the Chat Completions API takes beyond text and images (a PDF `file` part, an assistant's
    # `refusal` part) and GPT-5's custom (freeform) tools, whose calls carry raw `input`: each request
    # must be journaled, with what was sent; before, such a call was dropped, and every later one too.
    rec = tmp_path / "custom.cpsession"
    client = tap(openai.OpenAI(api_key="k", base_url=upstream.url, max_retries=0), record=rec)
    grammar = {"type": "grammar", "grammar": {"syntax": "lark", "definition": "start: /.+/"}}
    tools: Any = [
        {"type": "custom", "custom": {"name": "apply_patch", "description": "Edit files.", "format": grammar}}
    ]
    pdf = {
        "type": "file",
        "file": {"filename": "spec.pdf", "file_data": "data:application/pdf;base64,JVBERi0x"},
    }
    msgs: list[Any] = [{"role": "user", "content": [{"type": "text", "text": "Apply the spec."}, pdf]}]
    client.chat.completions.create(model="gpt-5", messages=msgs, tools=tools)
    call = {"id": "call_p", "type": "custom", "custom": {"name": "apply_patch", "input": "*** Begin Patch"}}
    msgs += [
        {"role": "assistant", "content": [{"type": "refusal", "refusal": "Not that file."}]},
        {"role": "user", "content": "Then the other one."},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_p", "content": "Done."},
    ]
    client.chat.completions.create(model="gpt-5", messages=msgs, tools=tools)
    assert client.contextpipe_stats.errors == 0, client.contextpipe_stats.last_error
    client.contextpipe_tap.close()
    ev = _check(rec, 2)
    assert _usages(ev)[1] == O_USAGE
    sent = _sent(ev, 1)
    assert [(m["role"], m["content"]) for m in sent] == [
        ("user", "Apply the spec.\n[file]"),
        ("assistant", "Not that file."),
        ("user", "Then the other one."),
        ("assistant", ""),
        ("tool", "Done."),
    ]
    assert [(c["name"], c["arguments"]) for c in sent[3]["tool_calls"]] == [
        ("apply_patch", "*** Begin Patch")
    ]
    actual = next(e for e in ev if e["k"] == "actual")
    assert actual["tool_names"] == ["apply_patch"]


def test_openai_responses_previous_response_id_keeps_the_conversation(
    upstream: StandIn, tmp_path: Path
) -> None:
    # The request holds only the new input; the model reads the server's copy of the conversation
    # before it: the turn's as-sent request is that whole conversation, as it is billed.
    rec = tmp_path / "prev.cpsession"
    client = tap(openai.OpenAI(api_key="k", base_url=upstream.url, max_retries=0), record=rec)
    r = client.responses.create(model="gpt-4o", instructions="S", input="Task")
    client.responses.create(model="gpt-4o", instructions="S", previous_response_id=r.id, input="more")
    assert client.contextpipe_stats.errors == 0, client.contextpipe_stats.last_error
    client.contextpipe_tap.close()
    sent = _sent(_check(rec, 2), 1)
    assert [(m["role"], m["content"]) for m in sent] == [
        ("system", "S"),
        ("user", "Task"),
        ("assistant", "Hello from the stand-in."),
        ("user", "more"),
    ]


def test_a_stream_helper_that_fails_says_why(upstream: StandIn, tmp_path: Path) -> None:
    # Anthropic answers 200 and may break the stream off with an error event (overloaded): the SDK's
    # stream helper raises it, and the turn's error must say which error it was, as for create().
    rec = tmp_path / "overloaded.cpsession"
    client = tap(anthropic.Anthropic(api_key="k", base_url=upstream.url, max_retries=0), record=rec)
    kw: Any = {
        "model": "claude-x-overloaded",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": "hi"}],
    }
    with pytest.raises(anthropic.APIStatusError, match="overloaded"):
        with client.messages.stream(**kw) as s:
            s.get_final_message()
    client.contextpipe_tap.close()
    (err,) = [e for e in _check(rec, 1) if e["k"] == "error"]
    assert err["kind"] == "incomplete_stream" and "overloaded_error" in err["message"], err
