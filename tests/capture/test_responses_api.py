"""The OpenAI Responses API (`POST /v1/responses`) through both capture paths, the proxy and the tap, with
the real openai SDK's `responses.create` (sync and async, streamed and not) against the stand-in.

What must be recorded: the request's input items (instructions, messages, function_call and
function_call_output items, tools), the reply's output items (its text and its calls, fed to the
shadow history so the next request is seen as continuing it), the usage (input_tokens with
input_tokens_details.cached_tokens, output_tokens), and why the reply stopped: `status`, or for an
`incomplete` reply its `incomplete_details.reason` (kept as the usage event's finish_reason for the
OpenTelemetry export). A reply that stopped at its output limit is a finished, billed reply, streamed
(`response.incomplete`) or not: never an error.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from engine.capture.tap import tap
from engine.feedback import finish_reason_of
from engine.importers.ingest import actual_requests
from engine.importers.proxy_jsonl import every_call
from tests.capture.conftest import Proxied, errors, events_of, finish_reasons, usages, verify_ok
from tests.capture.standin import USAGE_RESPONSES, StandIn

SYSTEM = "You are a careful coding agent."
TOOLS: list[Any] = [
    {
        "type": "function",
        "name": "bash",
        "description": "Run a command",
        "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
    }
]
R_USAGE = {"input_tokens": 1500, "output_tokens": 9, "cache_read_tokens": 1024, "cache_write_tokens": 0}


class Capture:
    """Sync and async openai clients whose calls are captured (through the proxy, or tapped), and the
    recordings they made."""

    def __init__(
        self,
        sync: openai.OpenAI,
        make_async: Callable[[], openai.AsyncOpenAI],
        finish: Callable[[], list[Path]],
        pipes: Callable[[], list[Any]],
    ) -> None:
        self.sync, self.make_async, self.finish, self.pipes = sync, make_async, finish, pipes


@pytest.fixture(params=["proxy", "tap"])
def capture(request: pytest.FixtureRequest, standin: StandIn, tmp_path: Path) -> Iterator[Capture]:
    standin.script = []
    if request.param == "proxy":
        proxied: Proxied = request.getfixturevalue("proxied")
        url = proxied.url + "/v1"
        yield Capture(
            openai.OpenAI(base_url=url, api_key="k", max_retries=0),
            lambda: openai.AsyncOpenAI(base_url=url, api_key="k", max_retries=0),
            proxied.finish,
            lambda: [tap.pipe for _, tap in proxied.recorder.sessions.values()],
        )
        return
    recs: list[Path] = []
    clients: list[Any] = []

    def tapped(cls: Any) -> Any:
        recs.append(tmp_path / f"tap{len(recs)}.cpsession")
        clients.append(tap(cls(base_url=standin.url + "/v1", api_key="k", max_retries=0), record=recs[-1]))
        return clients[-1]

    def finish() -> list[Path]:
        for c in clients:
            assert c.contextpipe_stats.errors == 0, c.contextpipe_stats.last_error
            c.contextpipe_tap.close()
        # each client's recording, then its conversations with the same opening (engine.capture.lineage)
        return [p for r in recs for p in [r, *sorted(r.parent.glob(f"{r.stem}-s*{r.suffix}"), key=_number)]]

    yield Capture(
        tapped(openai.OpenAI), lambda: tapped(openai.AsyncOpenAI), finish, lambda: [c.contextpipe_tap.pipe for c in clients]
    )


def _number(p: Path) -> int:
    return int(p.stem.rpartition("-s")[2])


def _sent(path: Path, turn: int) -> list[dict[str, Any]]:
    """The messages of the request journaled at `turn` (blobs resolved)."""
    ev = events_of(path)
    blobs = {e["h"]: e["data"] if isinstance(e["data"], str) else e["data"].decode() for e in ev if e["k"] == "blob"}
    out = []
    for h in actual_requests(ev)[turn]:
        m = json.loads(blobs[h])
        m["content"] = blobs[m.pop("content_h")]
        for c in m.get("tool_calls", []):
            c["arguments"] = blobs[c.pop("arguments_h")]
        out.append(m)
    return out


def test_a_tool_call_conversation_is_recorded_item_for_item(capture: Capture, standin: StandIn) -> None:
    standin.script = [{"bash": "ls"}, {"bash": "cat README.md"}, "Done."]
    history: list[Any] = [{"role": "user", "content": "List the files."}]
    r0 = capture.sync.responses.create(model="gpt-4.1", instructions=SYSTEM, input=history, tools=TOOLS)
    call = r0.output[1]
    assert call.type == "function_call" and call.name == "bash" and json.loads(call.arguments) == {"command": "ls"}
    history += [o.model_dump(exclude_none=True) for o in r0.output]
    history.append({"type": "function_call_output", "call_id": call.call_id, "output": "README.md"})
    events = list(
        capture.sync.responses.create(model="gpt-4.1", instructions=SYSTEM, input=history, tools=TOOLS, stream=True)
    )
    assert events[-1].type == "response.completed"
    r1 = events[-1].response
    assert r1.output[1].type == "function_call"
    history += [o.model_dump(exclude_none=True) for o in r1.output]
    history.append({"type": "function_call_output", "call_id": r1.output[1].call_id, "output": "# Project"})

    async def run_async() -> None:
        ac = capture.make_async()
        r2 = await ac.responses.create(model="gpt-4.1", instructions=SYSTEM, input=history, tools=TOOLS)
        assert r2.output_text == "Done."
        await ac.close()

    asyncio.run(run_async())
    paths = capture.finish()
    us = [u for p in paths for u in usages(p)]
    assert us == [R_USAGE] * 3, us
    assert USAGE_RESPONSES["input_tokens_details"]["cached_tokens"] == 1024
    assert [r for p in paths for r in finish_reasons(p)] == ["completed"] * 3
    assert not [e for p in paths for e in errors(p)]
    # The history the capture fed its pipeline holds the conversation once (each request continued it):
    # the last request's messages and the reply to it, not the conversation again at every turn.
    for p, pipe in zip(paths, capture.pipes(), strict=True):
        last = len(actual_requests(events_of(p))) - 1
        said = [m for m in _sent(p, last) if m["role"] != "system"]
        assert len(pipe.history) == len(said) + 1, [m.role for m in pipe.history]
    # The request's items as the agent sent them, the reply's call as the next request carries it:
    # one assistant message with its text and its call, then the call's output.
    sent = _sent(paths[0], 1)
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool"], sent
    assert sent[0]["content"] == SYSTEM and sent[1]["content"] == "List the files."
    assert sent[2]["content"] == "I will run a command."
    assert [(c["id"], c["name"], json.loads(c["arguments"])) for c in sent[2]["tool_calls"]] == [
        (call.call_id, "bash", {"command": "ls"})
    ]
    assert sent[3]["content"] == "README.md" and sent[3]["tool_call_id"] == call.call_id
    for p in paths:
        verify_ok(p)


def test_a_reply_cut_at_its_output_limit_is_recorded_with_its_reason(capture: Capture) -> None:
    model = "gpt-4.1-incomplete"
    r = capture.sync.responses.create(model=model, instructions=SYSTEM, input="Write a long essay.")
    assert r.status == "incomplete" and r.incomplete_details is not None
    events = list(capture.sync.responses.create(model=model, instructions=SYSTEM, input="Write a long essay.",
                                                stream=True))
    assert events[-1].type == "response.incomplete"

    async def run_async() -> None:
        ac = capture.make_async()
        r2 = await ac.responses.create(model=model, instructions=SYSTEM, input="Write a long essay.")
        assert r2.incomplete_details is not None
        s = await ac.responses.create(model=model, instructions=SYSTEM, input="Write a long essay.", stream=True)
        assert [e.type async for e in s][-1] == "response.incomplete"
        await ac.close()

    asyncio.run(run_async())
    paths = capture.finish()
    assert not [e for p in paths for e in errors(p)], [e for p in paths for e in errors(p)]
    assert [u for p in paths for u in usages(p)] == [R_USAGE] * 4
    assert [r for p in paths for r in finish_reasons(p)] == ["max_output_tokens"] * 4
    for p in paths:
        verify_ok(p)


def test_a_proxy_log_of_responses_calls_imports_their_finish_reasons(tmp_path: Path) -> None:
    # The same reading for a logged exchange (proxy JSONL): a streamed incomplete reply is a reply.
    s = StandIn()
    req = {"model": "gpt-4.1", "instructions": SYSTEM, "input": "Write a long essay."}
    bodies = [
        json.dumps(s.response_obj("gpt-4.1", "Done.")),
        b"".join(s.responses_stream("gpt-4.1-incomplete", "An essay that")).decode(),
        json.dumps(s.response_obj("gpt-4.1-incomplete", "An essay that")),
        # a Responses-compatible server that leaves out `object: "response"`
        json.dumps({k: v for k, v in s.response_obj("gpt-4.1-incomplete", "An essay that").items() if k != "object"}),
    ]
    log = tmp_path / "proxy.jsonl"
    log.write_text("".join(json.dumps({"request": req, "response": b, "timestamp": 1700000000}) + "\n" for b in bodies))
    imp = every_call(log)  # (one request four times: four conversations, read as a set of calls)
    assert [c.error for c in imp.calls] == [None] * 4
    replies = [c.response.content if c.response else None for c in imp.calls]
    assert replies == ["Done.", "An essay that", "An essay that", "An essay that"]
    assert [c.usage.to_dict() if c.usage else None for c in imp.calls] == [
        {**R_USAGE, "finish_reason": "completed"},
        {**R_USAGE, "finish_reason": "max_output_tokens"},
        {**R_USAGE, "finish_reason": "max_output_tokens"},
        {**R_USAGE, "finish_reason": "max_output_tokens"},
    ]


def test_a_response_that_failed_mid_stream_says_why(capture: Capture) -> None:
    # `response.failed` ends the stream without an SDK exception: the agent read every event, and the
    # recording must say the model failed, in the API's words, not that the agent stopped reading.
    events = list(capture.sync.responses.create(model="gpt-4.1-failed", input="hi", stream=True))
    assert events[-1].type == "response.failed"

    async def run_async() -> None:
        ac = capture.make_async()
        s = await ac.responses.create(model="gpt-4.1-failed", input="hi", stream=True)
        assert [e.type async for e in s][-1] == "response.failed"
        await ac.close()

    asyncio.run(run_async())
    paths = capture.finish()
    errs = [e for p in paths for e in errors(p)]
    assert [e["kind"] for e in errs] == ["incomplete_stream"] * 2
    for e in errs:
        assert "the response failed (server_error: The model failed to generate a response.)" in e["message"], e
        assert "stopped reading" not in e["message"]
    assert not [u for p in paths for u in usages(p)]


def test_an_error_event_mid_stream_says_which_error(capture: Capture) -> None:
    # The Responses API's own `error` event ({"type": "error", "code", "message"}) is yielded by the SDK
    # as an event too: the recording says which error ended the stream, not that the agent stopped.
    events = list(capture.sync.responses.create(model="gpt-4.1-overloaded", input="hi", stream=True))
    assert events[-1].type == "error"
    (path,) = capture.finish()
    (err,) = errors(path)
    assert err["kind"] == "incomplete_stream", err
    assert "the stream carried an error (server_error: The server is overloaded)" in err["message"], err
    assert not usages(path)


def test_finish_reason_of_reads_the_sdks_response_objects() -> None:
    # Pipeline.send (and any caller with the SDK's object in hand) reads the reason the same way.
    from openai.types.responses import Response

    s = StandIn()
    done = Response.model_validate(s.response_obj("gpt-4.1", "Done."))
    cut = Response.model_validate(s.response_obj("gpt-4.1-incomplete", "An essay that"))
    assert finish_reason_of(done) == "completed" and finish_reason_of(cut) == "max_output_tokens"
    assert finish_reason_of(done.model_dump()) == "completed"


def test_a_failed_response_not_streamed_says_why(capture: Capture) -> None:
    # A non-streamed reply with `status: "failed"` and its `error` (HTTP 200: the SDK raises nothing) is
    # the model's own failure: the recording says so in the API's words, as the streamed path does.
    r = capture.sync.responses.create(model="gpt-4.1-failed", input="hi")
    assert r.status == "failed" and r.error is not None

    async def run_async() -> None:
        ac = capture.make_async()
        r2 = await ac.responses.create(model="gpt-4.1-failed", input="hi")
        assert r2.status == "failed"
        await ac.close()

    asyncio.run(run_async())
    paths = capture.finish()
    errs = [e for p in paths for e in errors(p)]
    assert len(errs) == 2, errs
    for e in errs:
        assert "the response failed (server_error: The model failed to generate a response.)" in e["message"], e
    assert not [u for p in paths for u in usages(p)]


def test_a_reasoning_summary_is_fed_back_byte_for_byte(tmp_path: Path) -> None:
    # The reply's reasoning summary ends in a newline (as the model's summaries often do) and has an empty
    # item beside it; the agent hands the output items back. The next request's assistant message must be
    # the reply as it was journaled, to the byte, so the request continues the history the tap fed (it
    # lost the trailing newline, and the whole conversation was fed again as a rewritten history).
    from engine.capture.proxy import responses_api
    from engine.capture.tap_session import Tap

    summary = [{"type": "summary_text", "text": "**Plan**\n\nList the files.\n"},
               {"type": "summary_text", "text": "Then read them.\n\n"}]
    output: list[dict[str, Any]] = [
        {"type": "reasoning", "id": "rs_1", "summary": summary},
        {"type": "reasoning", "id": "rs_2", "summary": []},
        {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
         "content": [{"type": "output_text", "text": "I will list them.", "annotations": []}]},
        {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "bash",
         "arguments": '{"command": "ls"}', "status": "completed"},
    ]
    resp = {"id": "resp_1", "object": "response", "status": "completed", "model": "o4-mini",
            "output": output, "usage": USAGE_RESPONSES}
    first = [{"role": "user", "content": "List the files."}]
    second = first + output + [{"type": "function_call_output", "call_id": "call_1", "output": "a.py"}]
    replied = responses_api.response_to_chat(resp)["choices"][0]["message"]
    sent = responses_api.request_to_chat({"model": "o4-mini", "input": second})["messages"]
    assert sent[1] == replied, (sent[1], replied)
    assert sent[1]["reasoning_content"] == "**Plan**\n\nList the files.\n\nThen read them.\n\n"

    t = Tap("openai", record=tmp_path / "r.cpsession", serve=False)
    t.before({"model": "o4-mini", "input": first})
    t.after(resp)
    fed = list(t.fed)
    t.before({"model": "o4-mini", "input": second})
    assert t.fed[: len(fed)] == fed and len(t.fed) == len(fed) + 1
    assert t.pipe is not None and len(t.pipe.history) == 3, [m.role for m in t.pipe.history]
    t.close()
    assert t.stats.errors == 0, t.stats.last_error


def test_a_background_call_is_recorded_with_its_outcome(proxied: Proxied, standin: StandIn) -> None:
    # `background: true`: the reply is only `queued`; the agent polls GET /responses/{id} until the outcome
    # (or resumes a broken stream with `starting_after`). The recording must hold the outcome (the reply,
    # its usage) under the call's turn, not the empty queued reply; one never fetched says it is pending;
    # a cancelled one says so.
    standin.script = []
    client = openai.OpenAI(base_url=proxied.url + "/v1", api_key="k", max_retries=0)
    r = client.responses.create(model="gpt-4.1", instructions=SYSTEM, input="Summarise the repo.", background=True)
    assert r.status == "queued"
    polls = 0
    while r.status in ("queued", "in_progress"):
        r = client.responses.retrieve(r.id)
        polls += 1
    assert r.status == "completed" and r.output_text == "Hello from the stand-in." and polls == 2
    # the conversation goes on from the server's copy
    r2 = client.responses.create(model="gpt-4.1", input="Thanks.", previous_response_id=r.id)
    assert r2.status == "completed"

    # streamed: the stream breaks off half-way, the agent resumes it after the last event it read
    seen: list[Any] = []
    with pytest.raises(openai.APIError):
        for ev in client.responses.create(model="gpt-4.1-cut", instructions=SYSTEM, input="Again, streamed.",
                                          background=True, stream=True):
            seen.append(ev)
    rid = seen[0].response.id
    rest = list(client.responses.retrieve(rid, stream=True, starting_after=seen[-1].sequence_number))
    assert rest[-1].type == "response.completed" and rest[0].sequence_number == seen[-1].sequence_number + 1

    forgotten = client.responses.create(model="gpt-4.1", instructions=SYSTEM, input="Never fetched.", background=True)
    cancelled = client.responses.create(model="gpt-4.1", instructions=SYSTEM, input="Cancel me.", background=True)
    assert client.responses.cancel(cancelled.id).status == "cancelled"
    paths = proxied.finish()
    all_usages = [u for p in paths for u in usages(p)]
    assert all_usages == [R_USAGE] * 3, all_usages  # the polled one, its follow-up, the resumed stream
    errs = [e for p in paths for e in errors(p)]
    assert len(errs) == 2, errs
    (pending,) = [e for e in errs if forgotten.id in e["message"]]
    assert pending["kind"] == "unobserved" and "still queued" in pending["message"], pending
    (gone,) = [e for e in errs if cancelled.id in e["message"]]
    assert "was cancelled" in gone["message"], gone
    # the polled reply was fed to the shadow history: the follow-up continued it (one session, 2 turns)
    first = next(p for p in paths if len(usages(p)) == 2)
    assert [e["turn"] for e in events_of(first) if e["k"] == "usage"] == [0, 1]
    for p in paths:
        verify_ok(p)


@pytest.mark.parametrize("is_async", [False, True])
def test_a_tapped_background_call_is_recorded_with_its_outcome(standin: StandIn, tmp_path: Path, is_async: bool) -> None:
    # The tap sees create() return `queued`, then the agent's responses.retrieve polls: the outcome goes to
    # the call's turn (it was journaled as an empty reply); one never fetched says it is pending, with its
    # id; a cancelled one says so.
    standin.script = []
    rec = tmp_path / "t.cpsession"
    cls = openai.AsyncOpenAI if is_async else openai.OpenAI
    client = tap(cls(base_url=standin.url + "/v1", api_key="k", max_retries=0), record=rec)

    async def run() -> tuple[str, str]:
        async def call(x: Any) -> Any:
            return await x if is_async else x

        r = await call(client.responses.create(model="gpt-4.1", instructions=SYSTEM, input="Summarise.", background=True))
        assert r.status == "queued"
        while r.status in ("queued", "in_progress"):
            r = await call(client.responses.retrieve(r.id))
        assert r.output_text == "Hello from the stand-in."
        r2 = await call(client.responses.create(model="gpt-4.1", input="Thanks.", previous_response_id=r.id))
        assert r2.status == "completed"
        forgotten = await call(client.responses.create(model="gpt-4.1", input="Never fetched.", background=True))
        cancelled = await call(client.responses.create(model="gpt-4.1", input="Cancel me.", background=True))
        assert (await call(client.responses.cancel(cancelled.id))).status == "cancelled"
        return forgotten.id, cancelled.id

    forgotten, cancelled = asyncio.run(run())
    client.contextpipe_tap.close()
    assert client.contextpipe_stats.errors == 0, client.contextpipe_stats.last_error
    assert usages(rec) == [R_USAGE] * 2  # the polled reply (turn 0) and its follow-up (turn 1)
    assert [e["turn"] for e in events_of(rec) if e["k"] == "usage"] == [0, 1]
    errs = errors(rec)
    (pending,) = [e for e in errs if forgotten in e["message"]]
    assert pending["kind"] == "unobserved" and "still queued" in pending["message"], pending
    (gone,) = [e for e in errs if cancelled in e["message"]]
    assert "was cancelled" in gone["message"], gone
    assert len(errs) == 2, errs
    verify_ok(rec)


def test_a_background_call_read_raw_says_its_outcome_is_unseen(standin: StandIn, tmp_path: Path) -> None:
    # with_raw_response: the agent reads the reply itself and the tap does not wait on it; its `queued`
    # reply is not journaled as an empty reply, the turn says the outcome was not seen.
    standin.script = []
    rec = tmp_path / "t.cpsession"
    client = tap(openai.OpenAI(base_url=standin.url + "/v1", api_key="k", max_retries=0), record=rec)
    raw = client.responses.with_raw_response.create(model="gpt-4.1", input="Summarise.", background=True)
    rid = raw.parse().id
    client.contextpipe_tap.close()
    (err,) = errors(rec)
    assert err["kind"] == "unobserved" and f"{rid} was queued when create() returned" in err["message"], err
    assert not usages(rec)
