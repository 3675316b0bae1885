"""What an append-only turn (the usual turn between compactions) no longer redoes, with the same output.

- The history section's serialization extends the previous run's lists with the appended messages: it
  reads the hashes of what was appended, not of every message again (providers/base.py `_appended`).
  That it produces what a fresh serializer does is tests/test_serializer_memo.py's hypothesis test,
  which runs through this path on every append without markers.
- An assistant message's OpenAI fragment is written directly, not through the sorted-key JSON encoder
  (providers/openai.py `assistant_message`), with the same bytes as the dict it replaces.
Each behaviour test fails on the code before (1af9b47).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import engine.hashing as hashing
import engine.providers.section_runs as section_runs
from engine.artifacts import Media, Message, Text, Thinking, ToolCall, ToolResult
from engine.errors import UnpairedToolResultError
from engine.hashing import canonical_json
from engine.pipeline import Pipeline
from engine.providers.openai import message_blocks
from tests.turn_session import char_pipe, tool_round


def _pipe(window: int = 400_000) -> Pipeline:
    return char_pipe(window)


def _round(pipe: Pipeline, t: int) -> None:
    tool_round(pipe, t, f"output {t}\n" * 20)


def test_an_append_only_turn_reads_the_hashes_of_what_was_appended(monkeypatch: pytest.MonkeyPatch) -> None:
    """Item hashes the serializer reads in one turn: the same at 160 messages as at 20 (before, every
    message's hash was read again each turn to find the reused prefix: +1 a message)."""
    read = [0]
    real = section_runs._SHA

    def counting(it: Any) -> str:
        read[0] += 1
        return real(it)  # type: ignore[no-any-return]

    monkeypatch.setattr(section_runs, "_SHA", counting)
    pipe = _pipe()
    pipe.user("fix the bug")
    per_turn: dict[int, int] = {}
    for t in range(80):
        _round(pipe, t)
        read[0] = 0
        req = pipe.next_request()
        per_turn[t] = read[0]
        pipe.record_usage({"input_tokens": 10, "output_tokens": 5})
    assert req.trace["compaction"]["cut"] == 0  # never compacted: every turn appended
    assert per_turn[79] == per_turn[10] <= 4, per_turn


def test_an_assistant_fragment_skips_the_generic_encoder(monkeypatch: pytest.MonkeyPatch) -> None:
    """The sorted-key encoder is not called for a turn's new assistant message (before: once each)."""
    pipe = _pipe()
    pipe.user("fix the bug")
    _round(pipe, 0)
    pipe.next_request()
    encoded: list[Any] = []
    real = hashing._encode

    def counting(value: Any) -> str:
        encoded.append(value)
        return real(value)  # type: ignore[no-any-return]

    monkeypatch.setattr(hashing, "_encode", counting)
    _round(pipe, 1)
    req = pipe.next_request()
    assert req.body["messages"][-2] == {
        "role": "assistant",
        "content": "step 1",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": '{"n": 1}'}}
        ],
    }
    assert [v for v in encoded if isinstance(v, (dict, list))] == []


texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=300)
parts = st.one_of(
    st.builds(Text, texts),
    st.builds(lambda i, n, a: ToolCall(i, n, a), texts, texts, texts),
    st.builds(lambda t: Thinking(t, "sig"), texts),
    st.builds(lambda r: Media("image/png", r, 12), texts),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(parts, max_size=5))
def test_assistant_fragment_is_the_canonical_bytes_of_the_dict(ps: list[Any]) -> None:
    from engine.providers.openai import assistant_message

    m = Message("assistant", tuple(ps))
    got = assistant_message(m)
    assert got is not None and message_blocks(m, False) == got
    text = "\n".join(
        p.text if isinstance(p, Text) else f"[attachment {p.media_type} {p.ref} ({p.size} bytes)]"
        for p in ps
        if isinstance(p, (Text, Media))
    )
    calls = [
        {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
        for c in ps
        if isinstance(c, ToolCall)
    ]
    # null only beside calls: OpenAI refuses null content in a message without them (b74e627)
    want: dict[str, Any] = {"role": "assistant", "content": text or (None if calls else "")}
    if calls:
        want["tool_calls"] = calls
    assert got == canonical_json(want)


def test_an_assistant_call_with_fields_not_strings_goes_through_the_dict() -> None:
    from engine.providers.openai import assistant_message

    odd = ToolCall("c1", "bash", 7)  # type: ignore[arg-type]
    m = Message("assistant", (Text("x"), odd))
    assert assistant_message(m) is None
    assert isinstance(message_blocks(m, False), list)
    assert ToolResult("c1", "x").sha  # results are unaffected


# ------------------------------------------------------------------ usage in our own shape
_own_values = st.one_of(
    st.integers(0, 10**9), st.integers(-5, -1), st.floats(0, 1e6), st.booleans(), st.none(), st.just("12")
)


@settings(max_examples=400, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(
            [
                "input_tokens",
                "output_tokens",
                "cache_read_tokens",
                "cache_write_tokens",
                "cache_write_1h_tokens",
            ]
        ),
        _own_values,
    )
)
def test_own_usage_dict_normalizes_as_the_general_reader_does(d: dict[str, Any]) -> None:
    """A dict in our own shape gives the Usage (or the error) the provider detection gives the same
    fields read through a Mapping that is not a dict (which never takes the shortcut)."""
    from types import MappingProxyType

    from engine.feedback import normalize_usage

    def outcome(u: Any) -> Any:
        try:
            return normalize_usage(u)
        except Exception as exc:
            return type(exc), str(exc).replace("mappingproxy", "dict")  # the message names the type

    assert outcome(d) == outcome(MappingProxyType(d))


def test_tool_result_finds_an_assistant_message_that_is_not_the_newest() -> None:
    """After a request closed the results into a user message, the assistant message is no longer the
    newest: its calls are found by walking back, as before (a late second result is then refused as
    answered, or taken, exactly as the walk decides; here it was not answered in the pending parts)."""
    pipe = _pipe()
    pipe.user("fix the bug")
    calls = pipe.assistant("look", [{"id": "c1", "name": "bash", "arguments": "{}"}])
    pipe.tool_result(calls[0].id, "out")
    assert pipe.next_request().body["messages"][-1]["tool_call_id"] == "c1"
    assert pipe.history[-1].role == "user"
    pipe.tool_result("c1", "late")  # the call is found behind the newest message
    with pytest.raises(UnpairedToolResultError):
        pipe.tool_result("c9", "unknown")
