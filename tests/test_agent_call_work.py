"""The work an agent's calls around next_request do (tool_result/user, record_usage, assistant), counted.

- The artifacts made on every call (Text, ToolCall, ToolResult, Message, Usage) and each turn (Block,
  Section, Reserves) set their fields in an __init__ of their own: no dataclass-generated __init__
  (which looks object.__setattr__ up for each field) and no __post_init__ runs in a steady turn. They
  stay frozen dataclasses with the same fields, equality, hashes and content hashes, and those a
  session keeps (parts, messages, blocks) hold no dict of their own.
- A reply hashes five times, a tool result twice, each without a sha256_hex frame; a reply's calls, ids
  and parts are read without comprehension frames.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import pickle
from typing import Any

import pytest

from engine.artifacts import Message, Text, ToolCall, ToolResult
from engine.assembly import Section
from engine.feedback import Usage
from engine.hashing import content_hash, sha256_hex
from engine.plan import Reserves
from engine.providers.base import Block
from engine.types import CacheScope, Priority, SectionKind
from tests.support.turn_work import c_calls, python_frames, steady_pipe, steady_turn


def _usage(t: int) -> dict[str, int]:
    return {"input_tokens": 900 + t, "output_tokens": 40, "cache_read_tokens": 800}


def _steady_pipe() -> Any:
    return steady_pipe(_usage)


def test_a_steady_turn_runs_no_generated_init_nor_post_init() -> None:
    pipe = _steady_pipe()
    seen = python_frames(steady_turn(pipe, {"input_tokens": 1200, "output_tokens": 40, "cache_read_tokens": 900}),
                         frozen=True)
    generated = {k: n for k, n in seen.items() if k[0] == "frozen"}
    post = {k: n for k, n in seen.items() if k[1] == "__post_init__"}
    assert not generated and not post, (generated, post)
    pipe.close()


def test_the_artifacts_stay_frozen_dataclasses_with_the_same_hashes() -> None:
    text = Text("hello é")
    assert text.sha == sha256_hex("text\x00hello é")
    call = ToolCall("c1", "bash", '{"cmd": "ls"}')
    assert call.sha == content_hash(["call", "c1", "bash", '{"cmd": "ls"}'])
    res = ToolResult("c1", 'out\n"x"', True)
    assert res.sha == content_hash(["result", "c1", 'out\n"x"', True, "full"])
    assert ToolResult("c1", "out", form="cleared").sha == content_hash(
        ["result", "c1", "out", False, "cleared"]
    )
    msg = Message("assistant", (text, call))
    assert msg.sha == sha256_hex("assistant\x00" + text.sha + "\x00" + call.sha)
    # Keyword construction, a given hash kept, equality without the hash, replace() and copies.
    assert Message(role="user", parts=(res,), sha="given").sha == "given"
    assert Text("a", sha="x") == Text("a") and hash(Text("a", sha="x")) == hash(Text("a"))
    assert dataclasses.replace(msg, role="user").role == "user"
    usage = Usage(10, 2, cache_read_tokens=5, extra=(("finish_reason", "stop"),))
    reserves = Reserves(100, 0, 20)
    block = Block("history", "messages", "abc", 7, True)
    section = Section("goal", "Goal", SectionKind.GOAL, CacheScope.SESSION, Priority.NEVER, (text,))
    for obj in (text, call, res, msg, usage, reserves, block, section):
        assert pickle.loads(pickle.dumps(obj)) == obj
        assert copy.deepcopy(obj) == obj
        first = dataclasses.fields(obj)[0].name
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(obj, first, None)
    assert usage.to_dict() == {
        "input_tokens": 10, "output_tokens": 2, "cache_read_tokens": 5, "cache_write_tokens": 0,
        "finish_reason": "stop",
    }  # fmt: skip
    assert reserves.percentile == 75 and reserves.total == 120
    assert section.form.value == "full" and section.omitted == 0 and section.note == ""


def test_hashes_taken_by_a_reply_and_a_result() -> None:
    """A reply (a text and a call) takes five SHA-256 (the text's blob and part, the arguments' blob, the
    call, the message) and a tool result two (its blob and part), each where it is needed: no
    sha256_hex frame of its own, and each a copy of an empty hash (engine/hashing.new_sha256), not
    hashlib.sha256's look-up of the digest by name and a fresh OpenSSL context."""
    pipe = _steady_pipe()
    answer = c_calls(
        lambda: pipe.assistant("step 99", [{"id": "c99", "name": "bash", "arguments": '{"n": 99}'}])
    )
    result = c_calls(lambda: pipe.tool_result("c99", "the newest output\n" * 30))
    assert answer["HASH.copy"] == 5 and result["HASH.copy"] == 2, (answer, result)
    assert answer["openssl_sha256"] == result["openssl_sha256"] == 0, (answer, result)
    # A call id the session has not sent, without `_rN`, is taken without the renamed-id pattern.
    assert answer["Pattern.fullmatch"] == 0, answer
    pipe.next_request()
    frames = python_frames(lambda: pipe.assistant("step 100", [{"id": "c100", "name": "bash", "arguments": "{}"}]),
                           frozen=True)
    frames += python_frames(lambda: pipe.tool_result("c100", "done"), frozen=True)
    assert not [k for k in frames if k[1] in ("sha256_hex", "sha256")], frames  # (nor one wrapping the copy)
    pipe.close()


def test_a_reply_runs_no_comprehension_frame() -> None:
    """A reply's call ids, the ids it is sent with and its parts folded are read in C or plain loops: no
    comprehension frame (one each in Python 3.11) in the pipeline or the call ids."""
    pipe = _steady_pipe()
    frames = python_frames(
        lambda: pipe.assistant("step 99", [{"id": "c99", "name": "bash", "arguments": '{"n": 99}'}]), frozen=True
    )
    comprehensions = {k: n for k, n in frames.items() if k[1] in ("<listcomp>", "<genexpr>", "<setcomp>")}
    assert not comprehensions, comprehensions
    # A repeated id is still sent with another (the list of ids to keep is made then).
    pipe.tool_result("c99", "out")
    pipe.next_request()
    again = pipe.assistant("step 100", [{"id": "c99", "name": "bash", "arguments": "{}"}])
    assert again[0].id == "c99"
    pipe.tool_result("c99", "done")
    assert json.dumps(pipe.next_request().body).count('"c99_r1"') == 2
    pipe.close()


def test_the_kept_artifacts_hold_no_dict_of_their_own() -> None:
    """The parts and messages a session keeps set their fields without a dict per instance (their values
    stay in the instance: +64 bytes each otherwise, and a message's dict is one more object the collector
    tracks every turn)."""
    import gc

    text = Text("hello")
    kept = [
        text,
        ToolCall("c1", "bash", "{}"),
        ToolResult("c1", "out"),
        Message("assistant", (text,)),
    ]
    for obj in kept:
        assert not [r for r in gc.get_referents(obj) if type(r) is dict], type(obj).__name__
        assert obj.__dict__  # (read on demand, as before)
