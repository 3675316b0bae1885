"""engine.request_diff: the first point two provider requests differ, and the cause, on real engine
requests of every provider shape and on hand-written bodies (OpenAI Responses, SDK-style dicts)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import Pipeline
from engine.request_diff import RequestDiffError, diff_requests, first_difference, parse_request

PARAMS = {"type": "object", "properties": {"cmd": {"type": "string"}}}


def build(
    provider: str = "anthropic",
    *,
    tools: tuple[str, ...] = ("bash", "read"),
    identity: str = "You are a careful coding agent. " * 60,
    desc: str = "Run a shell command",
    latch: str = "read-only",
    turns: int = 1,
    rewrite_first: bool = False,
) -> Any:
    p = Pipeline("claude-sonnet-4" if provider != "openai" else "gpt-4o", provider=provider, serve=False)
    p.identity(identity)
    p.constraints("Never push to main.")
    for t in tools:
        p.add_tool(t, desc if t == "bash" else f"The {t} tool", PARAMS)
    p.latch("permissions", latch)
    p.goal("Make the tests pass.")
    p.user("first question" if not rewrite_first else "first question, edited")
    req = p.next_request()
    for k in range(1, turns):
        p.record_usage({"input_tokens": 10, "output_tokens": 1})
        p.assistant(f"answer {k}")
        p.user(f"question {k}")
        req = p.next_request()
    p.close()
    return req


@pytest.mark.parametrize("provider", ["anthropic", "openai", "bedrock"])
def test_each_common_accident_is_named_with_its_section(provider: str) -> None:
    base = build(provider)
    assert diff_requests(base, build(provider)).cause == "identical"

    d = diff_requests(base, build(provider, tools=("read", "bash")))
    assert (d.cause, d.segment, d.unit) == ("tool_order", "tools", 0)

    d = diff_requests(base, build(provider, desc="Run any shell command"))
    assert (d.cause, d.section) == ("tool_description", "tools") and "bash" in d.detail

    d = diff_requests(base, build(provider, tools=("bash", "read", "grep")))
    assert d.cause == "tool_added" and "grep" in d.detail

    d = diff_requests(base, build(provider, tools=("bash",)))
    assert d.cause == "tool_removed" and "read" in d.detail

    d = diff_requests(base, build(provider, latch="read-write"))
    assert (d.cause, d.section) == ("latch_changed", "latches")
    assert "permissions: read-only" in d.detail and "permissions: read-write" in d.detail

    t1 = build(provider, identity="You are careful. Now: 2026-12-01T05:21:02Z. " * 40)
    t2 = build(provider, identity="You are careful. Now: 2026-12-01T05:22:40Z. " * 40)
    d = diff_requests(t1, t2)
    assert (d.cause, d.section, d.segment) == ("volatile", "identity", "system")
    assert "05:21:02" in d.detail and "05:22:40" in d.detail

    d = diff_requests(base, build(provider, identity="You are a sloppy coding agent. " * 60))
    assert (d.cause, d.section) == ("system_edited", "identity")
    for x in (d,):
        assert x.breaks_cache and x.before != x.after


@pytest.mark.parametrize("provider", ["anthropic", "openai", "bedrock"])
def test_consecutive_turns_append_and_a_rewritten_message_breaks(provider: str) -> None:
    t1, t2 = build(provider, turns=1), build(provider, turns=2)
    d = diff_requests(t1, t2)
    assert d.cause in ("appended", "marker_moved") or (d.cause == "message_rewritten" and provider != "x")
    # Anthropic/Bedrock move the conversation-tail marker; the content of turn 1 is still a prefix.
    if d.cause == "appended":
        assert not d.breaks_cache and d.offset == parse_request(t1).stream_length
    d = diff_requests(build(provider, turns=3), build(provider, turns=3, rewrite_first=True))
    assert d.cause == "message_rewritten" and d.segment == "messages" and d.label.startswith("message 0")
    d = diff_requests(t2, t1)
    assert d.cause == "truncated" and d.breaks_cache


def test_a_moved_marker_is_reported_and_does_not_break() -> None:
    body: dict[str, Any] = {
        "model": "claude-sonnet-4",
        "max_tokens": 10,
        "system": [{"type": "text", "text": "a" * 50, "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "q1"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "a1"}]},
        ],
    }
    moved = json.loads(json.dumps(body))
    del moved["system"][0]["cache_control"]
    moved["messages"][1]["content"][0]["cache_control"] = {"type": "ephemeral"}
    d = diff_requests(body, moved)
    assert d.cause == "marker_moved" and not d.breaks_cache
    assert d.markers == ((0,), (2,)) and d.unit == 0
    # Bedrock: the cachePoint element marks the element before it.
    bed = {
        "modelId": "m",
        "system": [{"text": "s"}, {"cachePoint": {"type": "default"}}],
        "messages": [{"role": "user", "content": [{"text": "q"}]}],
    }
    bed2 = {
        **bed,
        "system": [{"text": "s"}],
        "messages": [{"role": "user", "content": [{"text": "q"}, {"cachePoint": {"type": "default"}}]}],
    }
    d = diff_requests(bed, bed2)
    assert d.cause == "marker_moved" and d.markers == ((0,), (1,))


def test_openai_responses_shape_and_params() -> None:
    a = {
        "model": "gpt-4.1",
        "instructions": "Be brief.",
        "tools": [{"type": "function", "name": "f", "description": "d", "parameters": PARAMS}],
        "input": [{"role": "user", "content": "hi"}],
        "temperature": 0,
    }
    assert parse_request(a).shape == "responses"
    b = {**a, "temperature": 1}
    d = diff_requests(a, b)
    assert d.cause == "params_changed" and not d.breaks_cache and d.params == {"temperature": [0, 1]}
    c = {**a, "instructions": "Be brief. Today is 2026-12-01."}
    d = diff_requests(a, c)
    assert d.cause == "system_edited" and d.segment == "system"
    d = diff_requests(a, {**a, "model": "gpt-4o"})
    assert d.cause == "model_changed" and d.breaks_cache
    e = {**a, "tools": [{"type": "function", "name": "f", "description": "d2", "parameters": PARAMS}]}
    assert diff_requests(a, e).cause == "tool_description"


def test_the_content_block_inside_a_message_is_named() -> None:
    m = [{"type": "tool_result", "tool_use_id": "c1", "content": "x"}, {"type": "text", "text": "go"}]
    a = {"model": "m", "system": "s", "messages": [{"role": "user", "content": m}]}
    b = json.loads(json.dumps(a))
    b["messages"][0]["content"][1]["text"] = "stop"
    d = diff_requests(a, b)
    assert d.cause == "message_rewritten" and d.block == 1 and d.label == "message 0 (user)"


def test_bad_input_is_one_clear_error() -> None:
    with pytest.raises(RequestDiffError, match="not JSON"):
        diff_requests(b"{not json", b"{}")
    with pytest.raises(RequestDiffError, match="JSON object"):
        diff_requests([1, 2], {})


# ------------------------------------------------------------------------------------------ properties

texts = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=30)
tool = st.builds(
    lambda n, d: {"name": n, "description": d, "input_schema": {"type": "object"}},
    st.sampled_from(["a", "b", "c", "d"]),
    texts,
)
msg = st.builds(
    lambda r, t: {"role": r, "content": [{"type": "text", "text": t}]},
    st.sampled_from(["user", "assistant"]),
    texts,
)
request = st.builds(
    lambda tools, system, msgs: {
        "model": "claude-sonnet-4",
        "max_tokens": 5,
        "tools": tools,
        "system": [{"type": "text", "text": s} for s in system],
        "messages": msgs,
    },
    st.lists(tool, max_size=3),
    st.lists(texts, max_size=3),
    st.lists(msg, max_size=4),
)


@settings(max_examples=200, deadline=None)
@given(request)
def test_a_request_never_differs_from_itself(a: dict[str, Any]) -> None:
    d = diff_requests(a, json.loads(json.dumps(a)))
    assert d.identical and not d.breaks_cache and d.offset == parse_request(a).stream_length


@settings(max_examples=300, deadline=None)
@given(request, request)
def test_the_reported_offset_is_where_the_prefix_bytes_first_differ(
    a: dict[str, Any], b: dict[str, Any]
) -> None:
    d = diff_requests(a, b)
    sa, sb = parse_request(a).stream(), parse_request(b).stream()
    off = d.offset
    assert sa[:off] == sb[:off]
    if sa != sb:
        assert off == min(len(sa), len(sb)) or sa[off] != sb[off]
        assert first_difference(sa, sb) == off
    else:
        assert d.cause in ("identical", "marker_moved", "params_changed")
    if d.unit is not None and d.cause not in ("appended", "truncated", "marker_moved", "model_changed"):
        ua, ub = parse_request(a).units[d.unit], parse_request(b).units[d.unit]
        assert ua.content != ub.content
        assert ua.content[: d.unit_offset] == ub.content[: d.unit_offset]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"system": 5, "messages": []}, "system"),
        ({"tools": 5}, "tools"),
        ({"messages": 5}, "messages"),
        ({"input": 5, "instructions": "x"}, "input"),
        ({"modelId": "m", "toolConfig": 5}, "toolConfig"),
        ({"modelId": "m", "toolConfig": {"tools": 3}}, "toolConfig.tools"),
    ],
)
def test_a_body_of_the_wrong_shape_is_a_request_diff_error_naming_the_field(body: dict, field: str) -> None:
    """validate_spawn and diff_requests take raw bodies from the caller: a field of the wrong type was a
    TypeError or AttributeError from inside the parser, not the module's RequestDiffError."""
    from engine.fork import validate_spawn

    good = {"system": "You are terse.", "messages": [{"role": "user", "content": "hi"}]}
    for call in (lambda: diff_requests(good, body), lambda: validate_spawn(body, good)):
        with pytest.raises(RequestDiffError, match=f"request field '{field}' must be"):
            call()
