"""normalize_usage's direct reading of the Anthropic and OpenAI Chat usage shapes (engine.feedback.
_provider_usage): the same Usage, or the same error, as the general reader gives for every combination of
field values, and for the SDKs' own objects without dumping them or walking the general reader's ~25
look-ups (what record_usage() pays every turn)."""

from __future__ import annotations

from typing import Any

import anthropic.types
import openai.types
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from openai.types.completion_usage import CompletionTokensDetails, PromptTokensDetails

import engine.feedback as feedback
from engine.feedback import normalize_usage
from engine.pipeline import Pipeline

# Every kind of value a field may hold: absent, None, counts, and what only the general reader accepts
# (a whole float) or refuses (a negative: -1 and another, a bool, a string, a fraction).
VALUES = st.sampled_from(["absent", None, 0, 7, 1200, 7.0, 2.5, -1, -7, True, "7"])


def _dict(draw: Any, names: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for n in names:
        v = draw(VALUES)
        if v != "absent":
            out[n] = v
    return out


@st.composite
def usages(draw: Any) -> dict[str, Any]:
    top = _dict(
        draw,
        (
            "input_tokens",
            "output_tokens",
            "prompt_tokens",
            "completion_tokens",
            "prompt_cache_hit_tokens",
            "cache_read_input_tokens",
            "cache_creation_input_tokens",
            "cache_read_tokens",
            "cache_write_tokens",
            "cache_write_1h_tokens",
        ),
    )
    for holder, names in (
        ("prompt_tokens_details", ("cached_tokens", "cache_creation_tokens", "cache_write_tokens")),
        ("completion_tokens_details", ("reasoning_tokens",)),
        ("output_tokens_details", ("reasoning_tokens",)),
        ("cache_creation", ("ephemeral_5m_input_tokens", "ephemeral_1h_input_tokens")),
        ("input_tokens_details", ("cached_tokens",)),
    ):
        kind = draw(st.sampled_from(["absent", "none", "dict"]))
        if kind == "none":
            top[holder] = None
        elif kind == "dict":
            top[holder] = _dict(draw, names)
    if draw(st.booleans()):
        # Set, or present as None (as an SDK object's dump has them): the direct reading skips looking
        # for these only where none of them is a key at all.
        top[
            draw(
                st.sampled_from(
                    [
                        "cache_miss_reason",
                        "finish_reason",
                        "reasoning_tokens",
                        "inputTokens",
                        "input_tokens_details",
                    ]
                )
            )
        ] = draw(st.sampled_from([5, None]))
    return top


def _general(u: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """What the general reader alone gives: the Usage, or the error's type and message."""
    with monkeypatch.context() as m:
        m.setattr(feedback, "_provider_usage", lambda d: None)
        m.setattr(feedback, "_sdk_fields", lambda o: None)
        return _outcome(u)


def _outcome(u: Any) -> Any:
    try:
        return normalize_usage(u)
    except Exception as exc:  # compared with the other path's
        return (type(exc).__name__, str(exc))


@settings(max_examples=3000, deadline=None)
@given(usages())
def test_direct_reading_is_the_general_readers_answer(u: dict[str, Any]) -> None:
    with pytest.MonkeyPatch.context() as mp:
        assert _outcome(u) == _general(u, mp), u


def _sdk_objects() -> list[Any]:
    a = anthropic.types
    return [
        a.Usage(
            input_tokens=12, output_tokens=300, cache_read_input_tokens=20_000, cache_creation_input_tokens=0
        ),
        a.Usage(
            input_tokens=12,
            output_tokens=3,
            cache_read_input_tokens=None,
            cache_creation_input_tokens=900,
            cache_creation=a.CacheCreation(ephemeral_5m_input_tokens=600, ephemeral_1h_input_tokens=300),
        ),
        a.Usage(input_tokens=12, output_tokens=3),
        # An extra field the SDK keeps beside its own (a beta's diagnostics): read as the dump has it.
        a.Usage.model_validate(
            {"input_tokens": 5, "output_tokens": 1, "cache_read_input_tokens": 9, "cache_miss_reason": "ttl"}
        ),
        openai.types.CompletionUsage(
            prompt_tokens=21_200,
            completion_tokens=300,
            total_tokens=21_500,
            prompt_tokens_details=PromptTokensDetails(cached_tokens=20_000),
            completion_tokens_details=CompletionTokensDetails(reasoning_tokens=120),
        ),
        openai.types.CompletionUsage(prompt_tokens=10, completion_tokens=3, total_tokens=13),
    ]


def test_sdk_objects_read_as_the_general_reader_reads_their_dump(monkeypatch: pytest.MonkeyPatch) -> None:
    for obj in _sdk_objects():
        assert _outcome(obj) == _general(obj, monkeypatch) == _general(obj.model_dump(), monkeypatch), obj


def test_sdk_usage_is_read_without_a_dump_or_the_general_lookups(monkeypatch: pytest.MonkeyPatch) -> None:
    """The usage objects an agent passes every turn: no model_dump() (a copy of the whole object, nested
    details too) and none of the general reader's look-ups. Before, each call dumped it and made ~16
    _get calls."""
    counts = {"dump": 0, "get": 0}
    general_get = feedback._get

    def counting_get(obj: Any, name: str) -> Any:
        counts["get"] += 1
        return general_get(obj, name)

    monkeypatch.setattr(feedback, "_get", counting_get)
    for cls in (anthropic.types.Usage, openai.types.CompletionUsage):
        dump = cls.model_dump

        def counting_dump(self: Any, *a: Any, _dump: Any = dump, **kw: Any) -> Any:
            counts["dump"] += 1
            return _dump(self, *a, **kw)

        monkeypatch.setattr(cls, "model_dump", counting_dump)
    objs = [o for o in _sdk_objects() if not o.__pydantic_extra__]
    pipe = Pipeline("claude-sonnet-4-5", "anthropic", 32_000, serve=False, clock=lambda: 0.0)
    pipe.identity("You are terse.")
    for obj in objs:
        pipe.user("go on")
        pipe.next_request()
        pipe.record_usage(obj)
    pipe.close()
    assert counts == {"dump": 0, "get": 0}
    # The provider-shaped dicts (a raw HTTP client's JSON) skip the general look-ups too.
    for obj in objs:
        normalize_usage(obj.model_dump())
    assert counts["get"] == 0


def test_sdk_usage_is_read_without_a_call_per_field(monkeypatch: pytest.MonkeyPatch) -> None:
    """An SDK usage object (and its dump) is read in line: no _count call per field (~8 a usage, every
    turn), and whether its class is one whose fields can be read as they are (an SDK model without
    computed fields) is asked once a class, not for every object and its nested details."""
    from tests.support.counting import count_calls

    # The shapes a provider sends every turn: Anthropic's with its cache fields, OpenAI's.
    objs = [
        o for o in _sdk_objects() if not o.__pydantic_extra__ and o.__dict__.get("cache_creation") is None
    ]
    objs = [
        o for o in objs if not isinstance(o, anthropic.types.Usage) or o.cache_read_input_tokens is not None
    ]
    counted = count_calls(monkeypatch, feedback, "_count")
    for obj in objs:
        assert normalize_usage(obj) == normalize_usage(obj.model_dump())
    assert counted[0] == 0
    classes = count_calls(monkeypatch, feedback, "_sdk_class")
    monkeypatch.setattr(feedback, "_SDK_CLASSES", {})
    for _ in range(5):
        for obj in objs:
            normalize_usage(obj)
    # anthropic.types.Usage, CompletionUsage, PromptTokensDetails, CompletionTokensDetails: once each
    assert classes[0] == 4, classes[0]


def test_record_usage_settles_a_deferred_turn_in_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """A turn nothing observed (its record built when read: engine/trace_lazy.py) gets its usage and is
    journaled by record_usage itself, not through _settle (a call more every turn); the trace has the
    usage, and the turn is journaled once, as before."""
    from tests.support.counting import count_calls

    settled = count_calls(monkeypatch, Pipeline, "_settle")
    pipe = Pipeline("claude-sonnet-4-5", "anthropic", 32_000, serve=False, clock=lambda: 0.0)
    pipe.identity("You are terse.")
    obj = _sdk_objects()[0]
    for _ in range(3):
        pipe.user("go on")
        pipe.next_request()
        pipe.record_usage(obj)
    assert settled[0] == 0
    assert [t["usage"] for t in pipe.traces] == [normalize_usage(obj).to_dict()] * 3
    assert sum(1 for ev in pipe.journal.events if ev["k"] == "turn") == 3
    pipe.close()
