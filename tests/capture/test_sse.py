"""SSE parsing and stream reassembly: the real event sequences, every truncation point, arbitrary bytes."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.capture.proxy.sse import (
    parse_sse,
    reassemble_anthropic,
    reassemble_openai_chat,
    reassemble_responses,
)
from tests.capture.standin import USAGE_ANTHROPIC, USAGE_DEEPSEEK, USAGE_OPENAI, USAGE_RESPONSES, StandIn

S = StandIn()
TEXT = "The quick brown fox."


def test_parse_sse_line_endings_comments_multiline() -> None:
    raw = b": comment\r\nevent: a\r\ndata: 1\r\ndata: 2\r\n\r\nevent:b\rdata:x\r\rdata: tail"
    events, clean = parse_sse(raw)
    assert [(e.event, e.data) for e in events] == [("a", "1\n2"), ("b", "x")]
    assert clean is False  # the last event never got its blank line


def test_anthropic_stream_reassembles_message_and_cache_usage() -> None:
    raw = b"".join(S.anthropic_stream("claude-sonnet-4", TEXT))
    r = reassemble_anthropic(raw)
    assert r.complete, r.reason
    assert r.body is not None
    want = S.anthropic_message("claude-sonnet-4", TEXT)
    assert r.body["content"][0]["text"].strip() == TEXT
    assert r.body["content"][1] == want["content"][1]  # tool input rebuilt from input_json_delta
    assert r.body["stop_reason"] == "tool_use"
    assert r.body["usage"] == USAGE_ANTHROPIC  # cache reads, writes and the 5m/1h breakdown kept


def test_openai_stream_reassembles_with_include_usage() -> None:
    raw = b"".join(S.chat_stream("gpt-4o", TEXT, include_usage=True))
    r = reassemble_openai_chat(raw)
    assert r.complete and r.body is not None
    assert r.body["choices"][0]["message"]["content"] == TEXT
    assert r.body["choices"][0]["finish_reason"] == "stop"
    assert r.body["usage"] == USAGE_OPENAI
    assert r.body["system_fingerprint"] == "fp_standin"


def test_deepseek_stream_keeps_reasoning_and_hit_miss_tokens() -> None:
    r = reassemble_openai_chat(b"".join(S.chat_stream("deepseek-reasoner", TEXT, include_usage=True)))
    assert r.complete and r.body is not None
    assert r.body["choices"][0]["message"]["reasoning_content"] == "Think first."
    assert r.body["usage"]["prompt_cache_hit_tokens"] == USAGE_DEEPSEEK["prompt_cache_hit_tokens"]


def test_openai_tool_call_deltas_merge() -> None:
    base = {"id": "c", "object": "chat.completion.chunk", "model": "gpt-4o"}
    chunks = [
        {
            **base,
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "role": "assistant",
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": "call_1",
                                "type": "function",
                                "function": {"name": "bash", "arguments": ""},
                            }
                        ],
                    },
                }
            ],
        },
        {
            **base,
            "choices": [
                {"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": '{"cmd": '}}]}}
            ],
        },
        {
            **base,
            "choices": [
                {
                    "index": 0,
                    "delta": {"tool_calls": [{"index": 0, "function": {"arguments": '"ls"}'}}]},
                    "finish_reason": "tool_calls",
                }
            ],
        },
    ]
    raw = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"
    r = reassemble_openai_chat(raw)
    assert r.complete and r.body is not None
    calls = r.body["choices"][0]["message"]["tool_calls"]
    assert calls == [
        {"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": '{"cmd": "ls"}'}}
    ]
    assert r.body["usage"] is None  # no include_usage: the stream carried none


def test_responses_stream_final_event_wins() -> None:
    r = reassemble_responses(b"".join(S.responses_stream("gpt-4.1", TEXT)))
    assert r.complete and r.body is not None
    assert r.body["usage"] == USAGE_RESPONSES
    assert r.body["output"][0]["content"][0]["text"] == TEXT


def test_every_truncation_point_is_incomplete_and_never_raises() -> None:
    cases = [
        (b"".join(S.anthropic_stream("claude-sonnet-4", TEXT)), reassemble_anthropic),
        (b"".join(S.chat_stream("gpt-4o", TEXT, include_usage=True)), reassemble_openai_chat),
        (b"".join(S.responses_stream("gpt-4.1", TEXT)), reassemble_responses),
    ]
    for raw, fn in cases:
        for cut in range(0, len(raw)):
            r = fn(raw[:cut])
            # The terminator is the last thing in each stream, so any cut before it is incomplete.
            assert not r.complete, (fn.__name__, cut)
        assert fn(raw).complete


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=2000))
def test_arbitrary_bytes_never_raise(raw: bytes) -> None:
    parse_sse(raw)
    for fn in (reassemble_anthropic, reassemble_openai_chat, reassemble_responses):
        fn(raw)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                b"event: message_start\n",
                b"data: {}\n",
                b"data: [DONE]\n",
                b"\n",
                b"\r\n",
                b": c\n",
                b'data: {"type": "message_stop"}\n',
                b'data: {"x\n',
            ]
        ),
        max_size=40,
    )
)
def test_sse_like_fragments_never_raise(parts: list[bytes]) -> None:
    raw = b"".join(parts)
    for fn in (reassemble_anthropic, reassemble_openai_chat, reassemble_responses):
        fn(raw)


def test_an_error_event_mid_stream_says_which_error() -> None:
    # Anthropic answers 200 and may then send `event: error` (overloaded); OpenAI-compatible streams and
    # the Responses API have their own: the recording must say which error the agent's SDK raised.
    events = S.anthropic_stream("claude-sonnet-4", TEXT)[:4]
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    r = reassemble_anthropic(b"".join(events) + f"event: error\ndata: {json.dumps(overloaded)}\n\n".encode())
    assert not r.complete and r.reason == "the stream carried an error (overloaded_error: Overloaded)"
    chat = S.chat_stream("gpt-4o", TEXT, include_usage=False)[:2]
    err = {"error": {"message": "The server had an error", "type": "server_error", "code": None}}
    r = reassemble_openai_chat(b"".join(chat) + f"data: {json.dumps(err)}\n\n".encode())
    assert r.reason == "the stream carried an error (server_error: The server had an error)"
    resp = S.responses_stream("gpt-4.1", TEXT)[:2]
    rerr = {"type": "error", "code": "rate_limit_exceeded", "message": "Slow down", "sequence_number": 2}
    r = reassemble_responses(b"".join(resp) + f"event: error\ndata: {json.dumps(rerr)}\n\n".encode())
    assert r.reason == "the stream carried an error (rate_limit_exceeded: Slow down)"
