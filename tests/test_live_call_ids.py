"""A live Pipeline sends tool call ids the provider takes (engine/providers/call_ids.py).

Agents reuse ids (some number calls per turn, `call_0` every turn; an upstream may answer `toolu_1` each
time) and some frameworks spell them with '.' or ':'. The pipeline sent them as given: Anthropic answers
400 for a repeated tool_use id ("tool_use ids must be unique") and for one outside ^[a-zA-Z0-9_-]+$,
Bedrock for one outside [a-zA-Z0-9_-]{1,64}, OpenAI for a repeated tool_call_id or one over 40
characters. Now the call goes with an id the provider takes, decided once when the message is recorded
(so it is the same on every later turn), its result follows it when the agent answers with its own id,
and the history section's note says which. An id OpenAI takes is sent byte for byte as it came.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import Pipeline, UnpairedToolResultError
from engine.recording.cpsession import RecordingReader
from engine.recording.replay import Replayer

BASH = {"type": "object", "properties": {"command": {"type": "string"}}}
WORD = re.compile(r"^[a-zA-Z0-9_-]+$")
MODEL = {"anthropic": "claude-sonnet-4", "bedrock": "anthropic.claude-sonnet-4-v1:0", "openai": "gpt-4o"}


def _pipe(provider: str, **kw: Any) -> Pipeline:
    p = Pipeline(MODEL[provider], provider, 200_000, serve=False, **kw)
    p.identity("You are a careful coding agent.")
    p.add_tool("bash", "Run a shell command", BASH)
    p.user("List the files.")
    return p


def _calls_and_results(body: dict[str, Any], provider: str) -> list[tuple[list[str], list[str]]]:
    """Each assistant message's call ids with the result ids of the message after it, in order."""
    out: list[tuple[list[str], list[str]]] = []
    msgs = body["messages"]
    if provider == "openai":
        for i, m in enumerate(msgs):
            if m["role"] == "assistant" and m.get("tool_calls"):
                calls = [c["id"] for c in m["tool_calls"]]
                results = []
                for n in msgs[i + 1 :]:
                    if n["role"] != "tool":
                        break
                    results.append(n["tool_call_id"])
                out.append((calls, results))
        return out
    call_key, res_key = ("tool_use", "tool_result") if provider == "anthropic" else ("toolUse", "toolResult")
    for i, m in enumerate(msgs):
        if m["role"] != "assistant":
            continue
        if provider == "anthropic":
            calls = [b["id"] for b in m["content"] if b.get("type") == call_key]
            nxt = msgs[i + 1]["content"] if i + 1 < len(msgs) else []
            results = [b["tool_use_id"] for b in nxt if b.get("type") == res_key]
        else:
            calls = [b[call_key]["toolUseId"] for b in m["content"] if call_key in b]
            nxt = msgs[i + 1]["content"] if i + 1 < len(msgs) else []
            results = [b[res_key]["toolUseId"] for b in nxt if res_key in b]
        if calls:
            out.append((calls, results))
    return out


def _check_sendable(body: dict[str, Any], provider: str) -> list[str]:
    """Every call id in the request unique and of the provider's form, each result right after its call;
    the ids in order."""
    pairs = _calls_and_results(body, provider)
    ids = [c for calls, _ in pairs for c in calls]
    assert len(set(ids)) == len(ids), ids
    for calls, results in pairs:
        assert sorted(results) == sorted(calls), (calls, results)
    for c in ids:
        if provider == "openai":
            assert 0 < len(c) <= 40, c
        else:
            assert WORD.match(c), c
            assert provider != "bedrock" or len(c) <= 64, c
    return ids


def _history_note(trace: dict[str, Any]) -> str:
    return str(next(s for s in trace["sections"] if s["kind"] == "history").get("note", ""))


# ----------------------------------------------------------------------------- the real SDK, a repeating upstream
anthropic_sdk = pytest.importorskip("anthropic")
pytest.importorskip("aiohttp")
from tests.capture.standin import StandIn  # noqa: E402


@pytest.fixture(scope="module")
def standin() -> Iterator[StandIn]:
    s = StandIn().start()
    yield s
    s.stop()


def test_an_upstream_that_repeats_its_tool_use_id_gets_unique_ids_back(standin: StandIn) -> None:
    """The stand-in answers every call with tool_use id `toolu_1` (as Kimi's Anthropic-compatible API
    reused `pwd_0`): the second request held two `toolu_1` tool_use blocks, which the Messages API
    refuses. Now each later one has its own id, the same one in every request after."""
    client = anthropic_sdk.Anthropic(base_url=standin.url, api_key="k", max_retries=0)
    pipe = _pipe("anthropic")
    before = len(standin.requests)
    seen: list[list[str]] = []
    for turn in range(5):
        req = pipe.next_request()
        resp = client.messages.create(**req.body)
        pipe.record_usage(resp.usage)
        calls = pipe.assistant("", tool_calls=[b for b in resp.content if b.type == "tool_use"])
        assert [c.id for c in calls] == ["toolu_1"]  # the agent's own id, to answer with
        pipe.tool_result(calls[0].id, f"listing {turn}")
    req = pipe.next_request()
    client.messages.create(**req.body)
    for _path, _headers, raw in standin.requests[before:]:
        body = json.loads(raw)
        seen.append(_check_sendable(body, "anthropic"))
    assert seen[-1] == ["toolu_1", "toolu_1_r1", "toolu_1_r2", "toolu_1_r3", "toolu_1_r4"]
    for a, b in zip(seen, seen[1:], strict=False):
        assert b[: len(a)] == a  # an id once sent stays: the cached prefix does not move
    # Each result is the output of its own turn's call.
    body = json.loads(standin.requests[-1][2])
    results = [
        (b["tool_use_id"], b["content"])
        for m in body["messages"]
        for b in m["content"]
        if b.get("type") == "tool_result"
    ]
    assert results == [(seen[-1][t], f"listing {t}") for t in range(5)]
    note = _history_note(req.trace)
    assert "4 tool calls of the conversation sent to Anthropic with another id" in note
    assert "'toolu_1' as 'toolu_1_r4'" in note
    pipe.close()


# ----------------------------------------------------------------------------- per provider, in the request bytes
@pytest.mark.parametrize("provider", ["anthropic", "bedrock", "openai"])
def test_call_0_every_turn_pairs_each_result_with_its_turns_call(provider: str) -> None:
    """An agent numbering calls per turn answers `call_0` on turn 9 with its own id: that result goes with
    turn 9's call, whatever id it was sent with."""
    pipe = _pipe(provider)
    for turn in range(12):
        pipe.next_request()
        pipe.assistant(
            f"step {turn}", [{"id": "call_0", "name": "bash", "input": {"command": f"echo {turn}"}}]
        )
        pipe.tool_result("call_0", f"out {turn}")
    req = pipe.next_request()
    ids = _check_sendable(req.body, provider)
    assert ids == ["call_0"] + [f"call_0_r{n}" for n in range(1, 12)]
    text = req.bytes.decode()
    # turn 9's call and its result: the id it was sent with, the output of that turn
    if provider == "openai":
        assert (
            '"id":"call_0_r9"' in text
            and '{"content":"out 9","role":"tool","tool_call_id":"call_0_r9"}' in text
        )
    elif provider == "anthropic":
        assert '{"content":"out 9","tool_use_id":"call_0_r9","type":"tool_result"}' in text
    else:
        assert '{"toolResult":{"content":[{"text":"out 9"}],"toolUseId":"call_0_r9"}}' in text
    assert "11 tool calls of the conversation" in _history_note(req.trace)
    pipe.close()


def test_ids_anthropic_refuses_are_spelled_in_its_characters() -> None:
    pipe = _pipe("anthropic")
    pipe.next_request()
    pipe.assistant(
        "",
        [
            {"id": "functions.eval:301", "name": "bash", "input": {}},
            {"id": "a b|c", "name": "bash", "input": {}},
        ],
    )
    pipe.tool_result("functions.eval:301", "one")
    pipe.tool_result("a b|c", "two")
    req = pipe.next_request()
    assert _check_sendable(req.body, "anthropic") == ["functions_eval_301", "a_b_c"]
    assert "'functions.eval:301' as 'functions_eval_301'" in _history_note(req.trace)
    pipe.close()


def test_a_spelling_that_another_call_of_the_message_has_is_not_reused() -> None:
    """'a.b' spelled is 'a_b', which the same message's next call already is."""
    pipe = _pipe("bedrock")
    pipe.next_request()
    pipe.assistant(
        "", [{"id": "a.b", "name": "bash", "input": {}}, {"id": "a_b", "name": "bash", "input": {}}]
    )
    pipe.tool_result("a_b", "second")
    pipe.tool_result("a.b", "first")
    req = pipe.next_request()
    assert _check_sendable(req.body, "bedrock") == ["a_b_r1", "a_b"]
    res = {
        b["toolResult"]["toolUseId"]: b["toolResult"]["content"][0]["text"]
        for b in req.body["messages"][2]["content"]
    }
    assert res == {"a_b_r1": "first", "a_b": "second"}
    pipe.close()


def test_bedrock_gets_ids_within_64_characters() -> None:
    long = "x" * 70
    pipe = _pipe("bedrock")
    pipe.next_request()
    pipe.assistant("", [{"id": long, "name": "bash", "input": {}}])
    pipe.tool_result(long, "ok")
    req = pipe.next_request()
    (sent,) = _check_sendable(req.body, "bedrock")
    assert sent == "x" * 52 + "_r1"
    pipe.close()


def test_openai_takes_ids_as_they_came_unless_repeated_or_over_40() -> None:
    """OpenAI does not restrict the characters: 'functions.eval:301' goes byte for byte, and a request
    whose ids are all unique and short enough is what it was (no note). A 41-character id is cut."""
    pipe = _pipe("openai")
    pipe.next_request()
    pipe.assistant("", [{"id": "functions.eval:301", "name": "bash", "arguments": '{"command": "ls"}'}])
    pipe.tool_result("functions.eval:301", "ok")
    req = pipe.next_request()
    assert '"id":"functions.eval:301"' in req.bytes.decode()
    assert '"tool_call_id":"functions.eval:301"' in req.bytes.decode()
    assert "tool call" not in _history_note(req.trace)
    assert all("as" not in p for ev in pipe.journal.events if ev["k"] == "msg" for p in ev["parts"])
    long = "call_" + "y" * 36  # 41 characters
    pipe.assistant("", [{"id": long, "name": "bash", "arguments": "{}"}])
    pipe.tool_result(long, "ok")
    req = pipe.next_request()
    ids = _check_sendable(req.body, "openai")
    assert ids == ["functions.eval:301", long[:28] + "_r1"]
    pipe.close()


def test_a_result_for_an_id_the_message_did_not_make_names_the_agents_ids() -> None:
    pipe = _pipe("anthropic")
    for _ in range(2):
        pipe.next_request()
        pipe.assistant("", [{"id": "call_0", "name": "bash", "input": {}}])
        pipe.tool_result("call_0", "ok")
    pipe.next_request()
    pipe.assistant("", [{"id": "call_0", "name": "bash", "input": {}}])
    with pytest.raises(UnpairedToolResultError, match=r"made calls \['call_0'\]"):
        pipe.tool_result("call_1", "ok")
    with pytest.raises(UnpairedToolResultError, match="already has a result"):
        pipe.tool_result("call_0", "ok")
        pipe.tool_result("call_0", "again")
    pipe.close()


# ----------------------------------------------------------------------------- recorded, replayed, continued
def test_the_recording_verifies_and_a_replayed_state_goes_on_as_the_live_one(tmp_path: Path) -> None:
    path = tmp_path / "run.cpsession"
    live = _pipe("anthropic", record=path)
    for turn in range(4):
        live.next_request()
        live.assistant("", [{"id": "call_0", "name": "bash", "input": {"command": str(turn)}}])
        live.tool_result("call_0", "ok")
    live.next_request()
    live.record_usage({"input_tokens": 10, "output_tokens": 1})
    live.close()
    with RecordingReader.open(path) as r:
        events = list(r.events())
    assert Replayer(events).verify().ok
    # A state folded from the journal gives the next call the id the live pipeline would have.
    rep = Pipeline(MODEL["anthropic"], "anthropic", 200_000, replay=True)
    for ev in events:
        rep.fold(ev)
    rep.go_live()
    rep.assistant("", [{"id": "call_0", "name": "bash", "input": {}}])
    rep.tool_result("call_0", "ok")
    assert _check_sendable(rep.next_request().body, "anthropic")[-1] == "call_0_r4"


# ----------------------------------------------------------------------------- the property
_IDS = st.sampled_from(
    ["call_0", "call_1", "toolu_1", "a.b", "a_b", "fn:1", "", "z" * 45, "call_0_r1", "x y"]
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    provider=st.sampled_from(["anthropic", "bedrock", "openai"]),
    turns=st.lists(st.lists(_IDS, min_size=0, max_size=3, unique=True), min_size=1, max_size=6),
)
def test_every_request_has_unique_acceptable_ids_and_each_result_follows_its_call(
    provider: str, turns: list[list[str]]
) -> None:
    pipe = _pipe(provider)
    pipe.check_content = False  # an empty id and a reply of nothing but calls, as an import may hold
    prev: list[str] = []
    for t, ids in enumerate(turns):
        req = pipe.next_request()
        sent = _check_sendable(req.body, provider)
        assert sent[: len(prev)] == prev  # ids sent before are sent the same way
        prev = sent
        if not ids:
            pipe.assistant(f"no calls {t}")
            pipe.user(f"go on {t}")
            continue
        calls = [{"id": cid, "name": "bash", "arguments": "{}"} for cid in ids]
        if "" in ids:
            # _call_of refuses an id-less dict; a ToolCall the agent built may carry one.
            from engine.artifacts import ToolCall

            calls = [ToolCall(c["id"], "bash", "{}") for c in calls]  # type: ignore[misc]
        pipe.assistant("", calls)
        for cid in reversed(ids):  # answered in another order than made
            pipe.tool_result(cid, f"{t}:{cid}")
    req = pipe.next_request()
    _check_sendable(req.body, provider)
    # Every result holds the output the agent gave for that very call.
    made = [(t, cid) for t, ids in enumerate(turns) for cid in ids]
    pairs = _calls_and_results(req.body, provider)
    sent_ids = [c for calls, _ in pairs for c in calls]
    assert len(sent_ids) == len(made)
    outputs = _result_texts(req.body, provider)
    for (t, cid), sid in zip(made, sent_ids, strict=True):
        assert outputs[sid] == f"{t}:{cid}"
    pipe.close()


def _result_texts(body: dict[str, Any], provider: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for m in body["messages"]:
        if provider == "openai":
            if m["role"] == "tool":
                out[m["tool_call_id"]] = m["content"]
            continue
        if not isinstance(m["content"], list):
            continue
        for b in m["content"]:
            if provider == "anthropic" and b.get("type") == "tool_result":
                out[b["tool_use_id"]] = b["content"]
            elif provider == "bedrock" and "toolResult" in b:
                out[b["toolResult"]["toolUseId"]] = b["toolResult"]["content"][0]["text"]
    return out


def test_a_result_may_name_the_id_the_call_was_sent_with_too() -> None:
    """An agent that reads the ids back from the request it sent (a proxy's view) answers with those: the
    same call either way."""
    pipe = _pipe("anthropic")
    pipe.next_request()
    pipe.assistant("", [{"id": "call_0", "name": "bash", "input": {}}])
    pipe.tool_result("call_0", "first")
    pipe.next_request()
    pipe.assistant(
        "", [{"id": "call_0", "name": "bash", "input": {}}, {"id": "call_1", "name": "bash", "input": {}}]
    )
    pipe.tool_result("call_0_r1", "second")  # the id this turn's call_0 was sent with
    pipe.tool_result("call_1", "third")
    req = pipe.next_request()
    assert _check_sendable(req.body, "anthropic") == ["call_0", "call_0_r1", "call_1"]
    assert _result_texts(req.body, "anthropic") == {
        "call_0": "first",
        "call_0_r1": "second",
        "call_1": "third",
    }
    pipe.close()
