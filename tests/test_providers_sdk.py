"""The engine's request bodies against the real `anthropic` and `openai` SDKs. No network.

Two independent checks per provider:

1. Typed: the body is checked against the SDK's own request TypedDicts
   (`anthropic.types.message_create_params.MessageCreateParamsNonStreaming`,
   `openai.types.chat.completion_create_params.CompletionCreateParamsNonStreaming`), walking their
   annotations strictly: required keys present, no unknown keys, literals and unions respected.
   (pydantic's TypeAdapter is not used: the SDK types use `Iterable[...]`, which pydantic validates
   lazily, so a wrong role inside `messages` would pass.)
2. Wire: the real SDK client sends `client.messages.create(**body)` through an httpx.MockTransport;
   the JSON it would have put on the wire must equal our body, and the SDK's parsed response usage
   feeds back into the pipeline.
"""

from __future__ import annotations

import collections.abc
import json
import sys
import types
import typing
from typing import Any

import pytest

from engine.artifacts import ToolCall
from engine.pipeline import Pipeline, Request
from engine.tokens import CharTokenizer, TokenCounter

anthropic = pytest.importorskip("anthropic")
openai = pytest.importorskip("openai")
from anthropic.types.message_create_params import MessageCreateParamsNonStreaming  # noqa: E402
from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming  # noqa: E402

from .test_engine_properties import check_pairing  # noqa: E402

JSON = dict[str, Any]


# ----------------------------------------------------------------------------- strict TypedDict check
def _is_typeddict(tp: Any) -> bool:
    return (
        isinstance(tp, type)
        and issubclass(tp, dict)
        and hasattr(tp, "__annotations__")
        and hasattr(tp, "__total__")
    )


def _strip(tp: Any) -> tuple[Any, bool | None]:
    """(inner type, required?) for Required[...]/NotRequired[...]/Annotated[...] wrappers."""
    required: bool | None = None
    while True:
        origin = typing.get_origin(tp)
        if origin is typing.Required:
            required, tp = True, typing.get_args(tp)[0]
        elif origin is typing.NotRequired:
            required, tp = False, typing.get_args(tp)[0]
        elif origin is typing.Annotated:
            tp = typing.get_args(tp)[0]
        else:
            return tp, required


def type_errors(value: Any, tp: Any, path: str = "$") -> list[str]:
    """Why `value` does not fit `tp` ([] when it does). Unknown keys in a TypedDict are errors."""
    tp, _ = _strip(tp)
    if tp is Any or tp is object:
        return []
    if tp is None or tp is type(None):
        return [] if value is None else [f"{path}: expected null"]
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Union or origin is types.UnionType:
        errs: list[str] = []
        for option in args:
            e = type_errors(value, option, path)
            if not e:
                return []
            errs.append(e[0])
        return [f"{path}: fits no option of the union ({'; '.join(sorted(set(errs))[:4])})"]
    if origin is typing.Literal:
        return [] if value in args else [f"{path}: {value!r} is not one of {args}"]
    if _is_typeddict(tp):
        if not isinstance(value, dict):
            return [f"{path}: expected an object for {tp.__name__}"]
        hints = typing.get_type_hints(tp, include_extras=True)
        errs = [f"{path}.{k}: unknown key for {tp.__name__}" for k in value if k not in hints]
        for k, hint in hints.items():
            inner, req = _strip(hint)
            if req is None:
                req = bool(tp.__total__)
            if k not in value:
                if req:
                    errs.append(f"{path}.{k}: required by {tp.__name__}")
                continue
            errs += type_errors(value[k], inner, f"{path}.{k}")
        return errs
    if origin in (list, collections.abc.Iterable, collections.abc.Sequence, typing.Iterable, typing.Sequence):
        if not isinstance(value, list):
            return [f"{path}: expected an array"]
        return [
            e for i, v in enumerate(value) for e in type_errors(v, args[0] if args else Any, f"{path}[{i}]")
        ]
    if origin in (dict, collections.abc.Mapping, typing.Dict):  # noqa: UP006
        if not isinstance(value, dict):
            return [f"{path}: expected an object"]
        return [e for k, v in value.items() for e in type_errors(v, args[1] if args else Any, f"{path}.{k}")]
    if tp is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        return [] if ok else [f"{path}: expected a number"]
    if tp is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
        return [] if ok else [f"{path}: expected an integer"]
    if isinstance(tp, type):
        return (
            [] if isinstance(value, tp) else [f"{path}: expected {tp.__name__}, got {type(value).__name__}"]
        )
    raise AssertionError(f"{path}: the checker does not know the type {tp!r}")


def test_the_checker_rejects_what_the_sdk_types_reject() -> None:
    good: JSON = {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}
    assert type_errors(good, MessageCreateParamsNonStreaming) == []
    bad_role = {**good, "messages": [{"role": "robot", "content": "hi"}]}
    assert type_errors(bad_role, MessageCreateParamsNonStreaming)
    extra = {**good, "temperature_typo": 1}
    assert any("unknown key" in e for e in type_errors(extra, MessageCreateParamsNonStreaming))
    missing = {"model": "m", "messages": []}
    assert any("max_tokens: required" in e for e in type_errors(missing, MessageCreateParamsNonStreaming))
    bad_block = {**good, "messages": [{"role": "user", "content": [{"type": "tool_result"}]}]}
    assert type_errors(bad_block, MessageCreateParamsNonStreaming)
    oa: JSON = {"model": "m", "messages": [{"role": "tool", "content": "x"}]}
    assert any(
        "tool_call_id" in e or "union" in e for e in type_errors(oa, CompletionCreateParamsNonStreaming)
    )


# ----------------------------------------------------------------------------- a session to serialize
def session(provider: str, window: int = 200_000, spill: bool = True) -> list[Request]:
    """A session that exercises every artifact the serializers emit: anchors, sources, tools, latches,
    emergent items, parallel calls, error results, malformed call arguments, thinking, cleared and
    spilled results, cache markers and (at a small window) dropped rounds."""
    pipe = Pipeline(
        "claude-sonnet-4-6" if provider == "anthropic" else "gpt-4o",
        provider,
        window,
        counter=TokenCounter(CharTokenizer()),
        serve=False,
        default_response_reserve=0,
    )
    pipe.identity("You are a careful coding agent. " * 200)
    pipe.constraints("Never push to main. Run the tests before you finish.")
    pipe.goal("Make tests/test_io.py pass.")
    pipe.add_source("repo_map", "context", text="src/\n  io.py\n  util.py\ntests/\n  test_io.py")
    pipe.latch("cwd", "/repo")
    pipe.add_tool(
        "bash",
        "Run a shell command",
        {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]},
    )
    pipe.add_tool(
        "edit",
        "Replace text in a file",
        {
            "type": "object",
            "properties": {"path": {"type": "string"}, "old": {"type": "string"}, "new": {"type": "string"}},
        },
    )
    pipe.user("Fix the failing test in tests/test_io.py")
    reqs: list[Request] = []
    for k in range(14):
        reqs.append(pipe.next_request())
        pipe.record_usage({"input_tokens": reqs[-1].trace["final_tokens"], "output_tokens": 50})
        calls = [ToolCall(f"toolu_{k:02d}_a", "bash", json.dumps({"command": f"pytest -k case{k}"}))]
        if k % 3 == 1:
            calls.append(
                ToolCall(f"toolu_{k:02d}_b", "edit", '{"path": "src/io.py", "old": "a"')
            )  # malformed
        thinking = f"Step {k}: think first." if k % 4 == 2 and provider != "anthropic" else None
        pipe.assistant(f"Running step {k}.", calls, thinking=thinking)
        big = spill and k == 5
        for c in reversed(calls):
            out = ("E" * 60_000) if big else f"== {c.name} output {k} ==\n" + "line of output\n" * 40
            pipe.tool_result(c.id, out, is_error=(k % 5 == 4))
        if k % 4 == 3:
            pipe.user(f"Note from the user at step {k}.")
        if k == 8:
            pipe.latch("cwd", "/repo/src")
        if k % 3 == 0:
            pipe.emerge("todo", f"re-run case{k} later")
    reqs.append(pipe.next_request())
    return reqs


def anthropic_response(body: JSON) -> JSON:
    return {
        "id": "msg_test",
        "type": "message",
        "role": "assistant",
        "model": body["model"],
        "content": [{"type": "text", "text": "done"}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": 100,
            "output_tokens": 7,
            "cache_read_input_tokens": 2_000,
            "cache_creation_input_tokens": 50,
        },
    }


def openai_response(body: JSON) -> JSON:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": body["model"],
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": "done"},
            }
        ],
        "usage": {
            "prompt_tokens": 2_150,
            "completion_tokens": 7,
            "total_tokens": 2_157,
            "prompt_tokens_details": {"cached_tokens": 2_000},
        },
    }


def http_lib(sdk: Any) -> Any:
    """The HTTP library the SDK is built on (httpx, or its fork httpx2 in newer SDKs): its own
    MockTransport is what the client accepts."""
    base = next(c for c in sdk.DefaultHttpxClient.__mro__[1:] if c.__name__ == "Client")
    return sys.modules[base.__module__.partition(".")[0]]


def capture(sdk: Any, respond: Any, *, asynchronous: bool = False) -> tuple[Any, list[Any]]:
    """An SDK-compatible HTTP client whose transport records each request and answers `respond(body)`."""
    lib = http_lib(sdk)
    seen: list[Any] = []

    def handler(request: Any) -> Any:
        seen.append(request)
        return lib.Response(200, json=respond(json.loads(request.content)))

    cls = lib.AsyncClient if asynchronous else lib.Client
    return cls(transport=lib.MockTransport(handler)), seen


# ----------------------------------------------------------------------------- anthropic
@pytest.fixture(scope="module")
def anthropic_requests() -> list[Request]:
    return session("anthropic") + session("anthropic", window=5_000, spill=False)[-6:]


def test_anthropic_bodies_fit_the_sdk_request_type(anthropic_requests: list[Request]) -> None:
    kinds: set[str] = set()
    for req in anthropic_requests:
        errs = type_errors(req.body, MessageCreateParamsNonStreaming)
        assert errs == [], f"turn {req.turn}: {errs[:5]}"
        check_pairing(req.body, "anthropic")
        kinds |= {b["type"] for m in req.body["messages"] for b in m["content"]}
    assert {"text", "tool_use", "tool_result"} <= kinds
    assert any(b"cache_control" in r.bytes for r in anthropic_requests)
    assert any(b"[spilled" in r.bytes for r in anthropic_requests)
    assert any(b"tool result cleared" in r.bytes or b"rounds dropped" in r.bytes for r in anthropic_requests)


def test_anthropic_sdk_sends_our_body_unchanged(anthropic_requests: list[Request]) -> None:
    http, seen = capture(anthropic, anthropic_response)
    client = anthropic.Anthropic(
        api_key="test-key", base_url="http://anthropic.test", http_client=http, max_retries=0
    )
    pipe = Pipeline(
        "claude-sonnet-4-6", "anthropic", 200_000, counter=TokenCounter(CharTokenizer()), serve=False
    )
    for req in anthropic_requests[-4:]:
        resp = client.messages.create(**req.body)
        sent = seen[-1]
        assert sent.url.path == "/v1/messages" and sent.method == "POST"
        assert json.loads(sent.content) == req.body
        assert resp.content[0].text == "done"
    # The SDK's typed usage object feeds back as is (cache reads/writes added to the input total).
    pipe.identity("x")
    pipe.user("task")
    pipe.next_request()
    u = pipe.record_usage(resp.usage)
    assert (u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_write_tokens) == (
        2_150,
        7,
        2_000,
        50,
    )


# ----------------------------------------------------------------------------- openai
@pytest.fixture(scope="module")
def openai_requests() -> list[Request]:
    return session("openai") + session("openai", window=5_000, spill=False)[-6:]


def test_openai_bodies_fit_the_sdk_request_type(openai_requests: list[Request]) -> None:
    roles: set[str] = set()
    for req in openai_requests:
        errs = type_errors(req.body, CompletionCreateParamsNonStreaming)
        assert errs == [], f"turn {req.turn}: {errs[:5]}"
        check_pairing(req.body, "openai")
        roles |= {m["role"] for m in req.body["messages"]}
        assert b"cache_control" not in req.bytes
    assert roles == {"system", "user", "assistant", "tool"}


def test_openai_sdk_sends_our_body_unchanged(openai_requests: list[Request]) -> None:
    http, seen = capture(openai, openai_response)
    client = openai.OpenAI(
        api_key="test-key", base_url="http://openai.test/v1", http_client=http, max_retries=0
    )
    for req in openai_requests[-4:]:
        resp = client.chat.completions.create(**req.body)
        sent = seen[-1]
        assert sent.url.path == "/v1/chat/completions"
        assert json.loads(sent.content) == req.body
    pipe = Pipeline("gpt-4o", "openai", 128_000, counter=TokenCounter(CharTokenizer()), serve=False)
    pipe.identity("x")
    pipe.user("task")
    pipe.next_request()
    u = pipe.record_usage(resp.usage)
    assert (u.input_tokens, u.output_tokens, u.cache_read_tokens) == (2_150, 7, 2_000)


async def test_async_sdk_clients_send_our_body_unchanged(
    anthropic_requests: list[Request], openai_requests: list[Request]
) -> None:
    ahttp, aseen = capture(anthropic, anthropic_response, asynchronous=True)
    ohttp, oseen = capture(openai, openai_response, asynchronous=True)
    a = anthropic.AsyncAnthropic(
        api_key="k", base_url="http://anthropic.test", http_client=ahttp, max_retries=0
    )
    o = openai.AsyncOpenAI(api_key="k", base_url="http://openai.test/v1", http_client=ohttp, max_retries=0)
    await a.messages.create(**anthropic_requests[-1].body)
    await o.chat.completions.create(**openai_requests[-1].body)
    assert json.loads(aseen[0].content) == anthropic_requests[-1].body
    assert json.loads(oseen[0].content) == openai_requests[-1].body
    await a.close()
    await o.close()


# ----------------------------------------------------------------------------- bedrock
def test_bedrock_bodies_fit_botocores_converse_input_shape() -> None:
    """Bedrock Converse bodies against botocore's own service model (the shapes boto3 validates a
    `converse(**body)` call with before it sends anything), cachePoint blocks included."""
    botocore_session = pytest.importorskip("botocore.session")
    from botocore.validate import ParamValidator

    op = botocore_session.get_session().get_service_model("bedrock-runtime").operation_model("Converse")
    reqs = session("bedrock") + session("bedrock", window=5_000, spill=False)[-6:]
    for req in reqs:
        report = ParamValidator().validate(req.body, op.input_shape)
        assert not report.has_errors(), f"turn {req.turn}: {report.generate_report()[:1000]}"
        check_pairing(req.body, "bedrock")
        assert req.bytes.count(b'"cachePoint"') <= 4
    assert any(b"cachePoint" in r.bytes for r in reqs)
