"""The public Pipeline API as a hostile (or careless) user drives it: wrong types, None, NaN, empty
text, bad tool schemas and tool-call arguments, callbacks that call back in, threads sharing one pipeline.

Each must fail at the call that is wrong, with an error saying what was wrong and what to do, leaving
nothing journaled and the pipeline usable; or work. Never a state that breaks every later request, and
never a request the provider refuses a model call later.
"""

from __future__ import annotations

import asyncio
import json
import math
import sys
import threading
from typing import Any

import pytest

from engine import ConfigError, ContentError, Pipeline, ReentrantCallError
from engine.importers.ingest import IngestReport, _Feeder
from engine.plan import Thresholds
from engine.recording.replay import Replayer
from engine.tokens import CharTokenizer, TokenCounter

anthropic = pytest.importorskip("anthropic")
from anthropic.types.message_create_params import MessageCreateParamsNonStreaming  # noqa: E402

from .test_providers_sdk import type_errors  # noqa: E402

BASH = {"type": "object", "properties": {"command": {"type": "string"}}}


def _pipe(provider: str = "anthropic", **kw: Any) -> Pipeline:
    pipe = Pipeline("claude-sonnet-4", provider, 200_000, serve=False, counter=TokenCounter(CharTokenizer()), **kw)
    pipe.identity("You are a careful coding agent.")
    pipe.user("List the files.")
    return pipe


def _strict_json(raw: bytes) -> Any:
    """The body as a strict JSON parser reads it (Python's json.loads takes NaN and Infinity)."""

    def refuse(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")

    return json.loads(raw, parse_constant=refuse)


# ----------------------------------------------------------------------------- tools
@pytest.mark.parametrize(
    ("args", "needle"),
    [
        ((None, "d", BASH), "tool name must be a non-empty str"),
        (("", "d", BASH), "tool name must be a non-empty str"),
        (("bash", None, BASH), "description must be a str"),
        (("bash", "d", json.dumps(BASH)), r"parse it first: json.loads"),
        (("bash", "d", [BASH]), "JSON Schema as a dict, got list"),
        (("bash", "d", {"type": "array"}), "input as an object"),
        (("bash", "d", {"type": "object", "maximum": math.nan}), "not JSON"),
        (("bash", "d", {"type": "object", "maximum": math.inf}), "not JSON"),
        (("bash", "d", {"type": "object", "enum": {1, 2}}), "not JSON"),
    ],
)
@pytest.mark.parametrize("provider", ["anthropic", "openai", "bedrock"])
def test_a_bad_tool_is_refused_before_it_reaches_every_request(
    args: tuple[Any, Any, Any], needle: str, provider: str
) -> None:
    """A tool named None or described None was journaled and then failed every later request in the
    serializer (TypeError); parameters given as a JSON string, a list or with NaN went out as an
    input_schema the provider refuses (or as a body that is not JSON)."""
    pipe = _pipe(provider)
    n = len(pipe.journal.events)
    with pytest.raises(ConfigError, match=needle):
        pipe.add_tool(*args)
    assert len(pipe.journal.events) == n  # nothing journaled
    assert pipe.tools == []
    req = pipe.next_request()  # the session goes on
    _strict_json(req.bytes)
    pipe.add_tool("bash", "Run a shell command", BASH)
    assert b'"bash"' in pipe.next_request(explain_only=True).bytes


# ----------------------------------------------------------------------------- settings
@pytest.mark.parametrize(
    ("kw", "needle"),
    [
        ({"model": 5}, "model must be a non-empty string"),
        ({"provider": None}, "provider must be a str"),
        ({"margin": None}, "margin must be a number"),
        ({"margin": "0.1"}, "margin must be a number"),
        ({"query_source": None}, "query_source must be a str"),
        ({"thresholds": (0.5, 0.6, 0.7)}, r"thresholds must be a Thresholds \(engine.Thresholds\)"),
        ({"limits": {"spill": False}}, r"limits must be a OptimizeLimits"),
        ({"policy": 5}, r"policy must be a PolicySettings"),
        ({"max_output_tokens": True}, "max_output_tokens=True must be an integer"),
        ({"max_output_tokens": 0}, "asks for no reply"),
        ({"clock": None}, "clock must be a callable"),
        ({"tokenizer": "cl100k"}, "tokenizer must have a `name`"),
    ],
)
def test_settings_of_the_wrong_type_are_config_errors(kw: dict[str, Any], needle: str) -> None:
    """These raised AttributeError/TypeError from deep inside (provider None, margin None, a tuple of
    thresholds) or were accepted and sent (model=5 as the body's model, max_tokens 0, max_tokens true)."""
    args: dict[str, Any] = {"model": "m", "provider": "anthropic", "window": 10_000, "serve": False, **kw}
    with pytest.raises(ConfigError, match=needle):
        Pipeline(**args)


@pytest.mark.parametrize("timeout", [math.nan, math.inf, -1.0, "2"])
def test_a_binders_timeout_must_be_a_positive_finite_number(timeout: Any) -> None:
    """timeout_s=NaN passed the `<= 0` check: asyncio.wait_for(NaN) never times out, so a hung binder
    hung the turn."""
    pipe = _pipe()
    with pytest.raises(ConfigError, match="timeout_s must be a positive number"):
        pipe.add_source("ctx", "context", binder=lambda: "x", timeout_s=timeout)
    assert "ctx" not in pipe.binders or not any(s.id == "ctx" for s in pipe.specs)


def test_none_where_a_name_or_section_text_belongs_is_refused() -> None:
    """identity(None) re-registered the identity with no text and left the old one: a silent no-op.
    latch(None, ...) journaled a latch named None."""
    pipe = _pipe()
    n = len(pipe.journal.events)
    with pytest.raises(ContentError, match=r"identity\(None\)"):
        pipe.identity(None)  # type: ignore[arg-type]
    for call in (lambda: pipe.latch(None, "v"), lambda: pipe.emerge(None, "v")):  # type: ignore[arg-type]
        with pytest.raises(ConfigError, match="must be a non-empty str"):
            call()
    assert len(pipe.journal.events) == n


# ----------------------------------------------------------------------------- empty messages
@pytest.mark.parametrize("text", ["", " ", "\n\t "])
def test_an_empty_user_message_is_refused(text: str) -> None:
    """Sent as a text block of nothing, which Anthropic refuses ('text content blocks must be
    non-empty' / 'must contain non-whitespace text') a whole model call later."""
    pipe = _pipe()
    n = len(pipe.journal.events)
    with pytest.raises(ContentError, match="empty or only whitespace"):
        pipe.user(text)
    assert len(pipe.journal.events) == n
    assert b'"text":""' not in pipe.next_request().bytes


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_an_empty_assistant_message_is_refused_and_whitespace_beside_calls_dropped(provider: str) -> None:
    pipe = _pipe(provider)
    pipe.next_request()
    n = len(pipe.journal.events)
    for text in ("", None, "  \n"):
        with pytest.raises(ContentError, match="empty assistant message"):
            pipe.assistant(text)  # type: ignore[arg-type]
    assert len(pipe.journal.events) == n
    # OpenAI's message: content None, tool_calls None when the model made no call.
    assert pipe.assistant("Done.", None) == []
    pipe.user("And now?")
    pipe.next_request()
    calls = pipe.assistant("\n\n", [{"id": "c1", "name": "bash", "arguments": '{"command": "ls"}'}])
    pipe.tool_result(calls[0].id, "")
    body = pipe.next_request().body
    if provider == "anthropic":
        assert type_errors(body, MessageCreateParamsNonStreaming) == []
        texts = [b["text"] for m in body["messages"] for b in m["content"] if b["type"] == "text"]
        assert all(t.strip() for t in texts), texts
    else:
        assert body["messages"][-2]["content"] is None and body["messages"][-2]["tool_calls"]


def test_an_importer_keeps_an_empty_message_as_it_was_sent() -> None:
    """Importers rebuild another agent's conversation as sent (check_content off with check_pairing)."""
    pipe = Pipeline("m", "openai", 10_000, serve=False)
    _Feeder(pipe, IngestReport())
    pipe.user("")
    pipe.assistant("")
    assert len(pipe.history) == 2


# ----------------------------------------------------------------------------- tool-call arguments
@pytest.mark.parametrize("args", ["[1, 2]", "null", "3", '"text"', '{"a": NaN}', '{"a": 1e400}', "{bad"])
@pytest.mark.parametrize("provider", ["anthropic", "bedrock"])
def test_call_arguments_that_are_not_a_json_object_go_as_raw(args: str, provider: str) -> None:
    """A model's arguments that parse to a list, null or a number went out as tool_use `input` (the SDK
    type and the API want an object); NaN or 1e400 went out as NaN/Infinity, which is not JSON."""
    pipe = _pipe(provider)
    pipe.next_request()
    pipe.assistant("", [{"id": "c1", "name": "bash", "arguments": args}])
    pipe.tool_result("c1", "out")
    req = pipe.next_request()
    body = _strict_json(req.bytes)
    if provider == "anthropic":
        assert type_errors(body, MessageCreateParamsNonStreaming) == []
        use = next(b for m in body["messages"] for b in m["content"] if b["type"] == "tool_use")
    else:
        use = next(b["toolUse"] for m in body["messages"] for b in m["content"] if "toolUse" in b)
    assert use["input"] == {"_raw": args}
    assert Replayer(pipe.journal.events, counter=pipe.counter).verify().ok


# ----------------------------------------------------------------------------- callbacks and threads
def test_a_binder_that_calls_back_into_its_pipeline_degrades_its_section() -> None:
    """A binder calling next_request() recursed without end (each level a thread waiting on the next);
    one calling user() changed the request under construction. Now the call raises in the binder, whose
    section degrades with that error, and the turn goes on."""
    pipe = _pipe()
    seen: list[BaseException] = []

    def sync_binder() -> str:
        try:
            pipe.next_request()
        except ReentrantCallError as exc:
            seen.append(exc)
            raise
        return "unreachable"

    async def async_binder() -> str:
        pipe.user("from inside the binder")
        return "unreachable"

    pipe.add_source("a", "context", binder=sync_binder)
    pipe.add_source("b", "context", binder=async_binder)
    req = pipe.next_request()
    forms = {s["id"]: s for s in req.trace["sections"]}
    for sid in ("a", "b"):
        assert forms[sid]["form"] == "degraded"
        assert "ReentrantCallError" in forms[sid]["note"]
    assert seen and "Return the text from the binder" in str(seen[0])
    assert b"from inside the binder" not in req.bytes
    pipe.user("after the turn")  # outside a callback, the same call works
    assert Replayer(pipe.journal.events, counter=pipe.counter).verify().ok


def test_async_binder_calling_back_through_anext_request() -> None:
    pipe = _pipe()

    async def binder() -> str:
        await pipe.anext_request()
        return "unreachable"

    pipe.add_source("a", "context", binder=binder)

    async def main() -> Any:
        return await pipe.anext_request()

    req = asyncio.run(main())
    sec = next(s for s in req.trace["sections"] if s["id"] == "a")
    assert sec["form"] == "degraded" and "ReentrantCallError" in sec["note"]


def test_threads_recording_results_at_once_journal_what_they_fold() -> None:
    """Tool results recorded from a pool of worker threads (parallel calls run in parallel): _emit folds
    an event and then journals it, so two threads could fold A, B and journal B, A; the recording then
    replays the results in another order than the request sent (a replay mismatch). One public call at
    a time now: the journal's order is the folded order, every round."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible: the race shows within rounds
    try:
        pipe = Pipeline(
            "m", "anthropic", 10_000_000, serve=False, counter=TokenCounter(CharTokenizer()), journal_keep=None
        )
        pipe.identity("id")
        pipe.user("task")
        for rnd in range(300):
            pipe.next_request()
            calls = pipe.assistant(
                "x", [{"id": f"c{rnd}_{k}", "name": "bash", "arguments": "{}"} for k in range(16)]
            )
            n = len(pipe.journal.events)
            barrier = threading.Barrier(len(calls))

            def work(call_id: str, barrier: threading.Barrier = barrier) -> None:
                barrier.wait()
                pipe.tool_result(call_id, f"output of {call_id}")

            threads = [threading.Thread(target=work, args=(c.id,)) for c in calls]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            journaled = [e["part"]["id"] for e in pipe.journal.events[n:] if e["k"] == "part"]
            assert journaled == [r.call_id for r in pipe.pending], f"round {rnd}"
    finally:
        sys.setswitchinterval(old)


def test_a_thread_waits_for_a_request_in_progress_and_close_waits_too() -> None:
    """A call from another thread during a request (here: while a binder runs) waits for it, then runs."""
    pipe = _pipe()
    entered, release = threading.Event(), threading.Event()

    def binder() -> str:
        entered.set()
        release.wait(5)
        return "bound"

    pipe.add_source("ctx", "context", binder=binder, timeout_s=10)
    done: list[str] = []
    t = threading.Thread(target=lambda: (pipe.next_request(), done.append("request")))
    t.start()
    assert entered.wait(5)
    u = threading.Thread(target=lambda: (pipe.user("later"), done.append("user")))
    u.start()
    u.join(0.2)
    assert u.is_alive()  # waiting for the request
    release.set()
    t.join(5)
    u.join(5)
    assert done == ["request", "user"]
    pipe.close()


def test_thresholds_instance_still_accepted() -> None:
    pipe = Pipeline("m", "anthropic", 10_000, serve=False, thresholds=Thresholds(0.5, 0.6, 0.7))
    assert pipe.config.thresholds.trim_schemas == 0.5


# ----------------------------------------------------------------------------- cache markers
def test_a_marked_message_that_ends_in_thinking_carries_its_marker_elsewhere() -> None:
    """The tail breakpoint on an assistant message whose last block is thinking put cache_control on
    the thinking block, which the API refuses (the SDK's ThinkingBlockParam has no such key): it goes
    on the last block that is not thinking, and a message of thinking only carries none."""
    for text in ("hello", ""):
        pipe = Pipeline("claude-sonnet-4", "anthropic", 200_000, serve=False, counter=TokenCounter(CharTokenizer()))
        pipe.identity("You are an agent. " * 300)
        pipe.user("task " * 2_000)
        pipe.next_request()
        pipe.assistant(text, thinking={"thinking": "let me think", "signature": "c2ln"})
        req = pipe.next_request()
        assert type_errors(req.body, MessageCreateParamsNonStreaming) == []
        last = req.body["messages"][-1]["content"]
        assert "cache_control" not in last[0]
        if text:
            assert last[-1]["cache_control"] == {"type": "ephemeral"}
        assert req.bytes.count(b'"cache_control"') <= 4
        assert Replayer(pipe.journal.events, counter=pipe.counter).verify().ok


def test_a_summarizer_that_calls_back_fails_the_turn_and_leaves_the_state_as_it_was() -> None:
    """A summarizer calling pipe.user() slipped that text into the request being built, every turn it
    ran. Now the request raises ReentrantCallError, nothing of the turn is journaled, and the session
    goes on once the summarizer is fixed."""
    misbehave = [True]

    def summarize(texts: list[str]) -> str:
        if misbehave[0]:
            pipe.user("text from inside the summarizer")
        return f"summary of {len(texts)} messages"

    pipe = Pipeline(
        "m", "anthropic", 6_000, serve=False, counter=TokenCounter(CharTokenizer()), policy="wave1", summarizer=summarize
    )
    pipe.identity("id")
    pipe.user("task")
    failed = None
    for k in range(40):
        n = len(pipe.journal.events)
        try:
            pipe.next_request()
        except ReentrantCallError as exc:
            failed = (k, n, str(exc))
            break
        calls = pipe.assistant(f"step {k}", [{"id": f"c{k}", "name": "bash", "arguments": "{}"}])
        pipe.tool_result(calls[0].id, "out " * 200)
    assert failed is not None, "the summarizer never ran"
    k, n, msg = failed
    assert "summarizer" in msg
    assert not [e for e in pipe.journal.events[n:] if e["k"] in ("request", "part", "summary")]
    misbehave[0] = False
    req = pipe.next_request()
    assert b"text from inside the summarizer" not in req.bytes
    assert Replayer(pipe.journal.events, counter=pipe.counter).verify().ok


def test_record_error_of_the_wrong_type_says_so_and_journals_nothing() -> None:
    """record_error(kind=None) was journaled as an error of kind None; message=None raised TypeError
    from slicing it."""
    pipe = _pipe()
    pipe.next_request()
    n = len(pipe.journal.events)
    for kind, message in ((None, ""), ("error", None), ("", "x")):
        with pytest.raises(ConfigError, match="kind is a non-empty str"):
            pipe.record_error(kind, message)  # type: ignore[arg-type]
    assert len(pipe.journal.events) == n
    pipe.record_error("overloaded", "529")
    assert pipe.traces[-1]["error"].startswith("overloaded")


def test_what_the_agent_mutates_after_handing_it_over_does_not_reach_the_request() -> None:
    """Tool parameters, a call's input and a usage dict are read when handed over: changing them
    afterwards changes neither the request nor the journal."""
    params: dict[str, Any] = {"type": "object", "properties": {"command": {"type": "string"}}}
    pipe = _pipe()
    pipe.add_tool("bash", "Run a shell command", params)
    pipe.next_request()
    usage = {"input_tokens": 100, "output_tokens": 5}
    pipe.record_usage(usage)
    call: dict[str, Any] = {"id": "c1", "name": "bash", "input": {"command": "ls"}}
    pipe.assistant("Looking.", [call])
    pipe.tool_result("c1", "a\nb\n")
    before = pipe.next_request(explain_only=True).bytes
    params["properties"]["command"]["type"] = "integer"
    call["input"]["command"] = "rm -rf /"
    usage["input_tokens"] = -1
    req = pipe.next_request()
    assert req.bytes == before and b"rm -rf" not in req.bytes and b"integer" not in req.bytes
    assert Replayer(pipe.journal.events, counter=pipe.counter).verify().ok


# ----------------------------------------------------------------------------- thinking signatures
@pytest.mark.parametrize("provider", ["anthropic", "bedrock"])
def test_thinking_goes_back_with_its_signature_or_not_at_all(provider: str) -> None:
    """assistant(thinking=...) took text only, and the serializers sent it back with "signature": "",
    which the API refuses ("Invalid `signature` in `thinking` block"). The SDK's thinking block (or its
    dict) now goes in with its signature and back out with it; thinking given as text, which has none,
    is left out of the request."""
    from anthropic.types import ThinkingBlock

    pipe = _pipe(provider)
    pipe.next_request()
    block = ThinkingBlock(type="thinking", thinking="I should list the files.", signature="EqQBCkgIARABGAIiQ==")
    calls = pipe.assistant("Listing.", [{"id": "c1", "name": "bash", "arguments": "{}"}], thinking=block)
    pipe.tool_result(calls[0].id, "a\nb")
    calls = pipe.assistant(
        "Again.", [{"id": "c2", "name": "bash", "arguments": "{}"}], thinking={"thinking": "once more", "signature": "c2ln"}
    )
    pipe.tool_result(calls[0].id, "a\nb")
    calls = pipe.assistant("Plain.", [{"id": "c3", "name": "bash", "arguments": "{}"}], thinking="unsigned thoughts")
    pipe.tool_result(calls[0].id, "a\nb")
    req = pipe.next_request()
    assert b"unsigned thoughts" not in req.bytes
    msgs = [m for m in req.body["messages"] if m["role"] == "assistant"]
    if provider == "anthropic":
        assert type_errors(req.body, MessageCreateParamsNonStreaming) == []
        firsts = [m["content"][0] for m in msgs]
        assert firsts[0] == {"type": "thinking", "thinking": "I should list the files.", "signature": "EqQBCkgIARABGAIiQ=="}
        assert firsts[1]["signature"] == "c2ln"
        assert firsts[2] == {"type": "text", "text": "Plain."}
    else:
        firsts = [m["content"][0] for m in msgs]
        assert firsts[0]["reasoningContent"]["reasoningText"]["signature"] == "EqQBCkgIARABGAIiQ=="
        assert firsts[2] == {"text": "Plain."}
    assert Replayer(pipe.journal.events, counter=pipe.counter).verify().ok
    with pytest.raises(ContentError, match="neither text nor a thinking block"):
        pipe.assistant("x", thinking={"text": "wrong key"})


def test_an_openai_assistant_message_without_calls_has_string_content() -> None:
    """A thinking-only reply (DeepSeek's reasoning with no content) went out as content null with no
    tool_calls, which OpenAI refuses ("Invalid value for 'content': expected a string, got null");
    null stays for a message of tool calls only, as the API documents."""
    pipe = _pipe("openai")
    pipe.next_request()
    pipe.assistant("", thinking="reasoning only")
    pipe.user("Go on.")
    pipe.next_request()
    calls = pipe.assistant("", [{"id": "c1", "name": "bash", "arguments": "{}"}])
    pipe.tool_result(calls[0].id, "ok")
    body = pipe.next_request().body
    assistants = [m for m in body["messages"] if m["role"] == "assistant"]
    assert assistants[0] == {"role": "assistant", "content": ""}
    assert assistants[1]["content"] is None and assistants[1]["tool_calls"]
    # The direct fragment is the dict path's bytes.
    from engine.artifacts import Message, Thinking
    from engine.hashing import canonical_json
    from engine.providers import openai as oa

    assert oa.assistant_message(Message("assistant", (Thinking("t"),))) == canonical_json(
        {"role": "assistant", "content": ""}
    )
    assert Replayer(pipe.journal.events, counter=pipe.counter).verify().ok
