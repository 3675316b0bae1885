"""Anthropic and Bedrock message fragments written directly (providers/anthropic.message_json,
providers/bedrock.message_json) are the bytes the sorted-key encoder writes for the message's dicts,
marked or not."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.artifacts import Media, Message, Part, Text, Thinking, ToolCall, ToolResult
from engine.hashing import canonical_json
from engine.providers import anthropic, bedrock

texts = st.text(max_size=40) | st.text(alphabet='"\\\n\t\x00\x1f é中\U0001f600<>&', max_size=40)
ids = st.text(min_size=1, max_size=12)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=8,
)
arguments = json_values.map(lambda v: json.dumps(v, ensure_ascii=False)) | texts  # valid JSON or not
parts: st.SearchStrategy[Part] = st.one_of(
    texts.map(Text),
    st.builds(ToolResult, ids, texts, st.booleans(), st.sampled_from(["full", "cleared", "spilled"])),
    st.builds(ToolCall, ids, ids, arguments),
    st.builds(Thinking, texts, texts),
    st.builds(Media, st.just("image/png"), ids, st.integers(0, 10**6)),
)
messages = st.builds(Message, st.sampled_from(["user", "assistant"]), st.lists(parts, max_size=4).map(tuple))


PROVIDERS = {"anthropic": anthropic, "bedrock": bedrock}


def _encoded(m: Message, marked: bool, provider: str = "anthropic") -> bytes:
    """What Serializer._frag writes for the dict path: each dict's canonical JSON, comma-joined."""
    return b",".join(canonical_json(x) for x in PROVIDERS[provider].message_dicts(m, marked))


@settings(max_examples=400)
@given(m=messages, marked=st.booleans(), provider=st.sampled_from(sorted(PROVIDERS)))
def test_direct_fragment_equals_the_encoders_bytes(m: Message, marked: bool, provider: str) -> None:
    mod = PROVIDERS[provider]
    got = mod.message_json(m, marked)
    if any(isinstance(p, Media) for p in m.parts):
        assert got is None  # media go the dict way
        return
    assert got == _encoded(m, marked, provider)
    assert mod.message_blocks(m, marked) == got


def test_written_directly_for_a_tool_using_agents_messages() -> None:
    # Fails on 36f00d9 (no message_json; message_blocks gave dicts for every message).
    call = Message(
        "assistant", (Text("Let me look."), ToolCall("c1", "bash", '{"command": "ls -la", "n": 1.5}'))
    )
    result = Message("user", (Text("and then?"), ToolResult("c1", 'a.py\nb.py\n"quoted" é', is_error=True)))
    for m in (call, result, Message("user", ())):
        for marked in (False, True):
            for provider, mod in PROVIDERS.items():
                out: Any = mod.message_blocks(m, marked)
                assert isinstance(out, bytes) and out == _encoded(m, marked, provider)
    # Results first, then the text, which carries the marker.
    assert b'"type":"tool_result"},{"cache_control":{"type":"ephemeral"},"text":"and then?"' in _encoded(
        result, True
    )


# Tool-call inputs that hold the marker's own text as a key (the only place it can appear outside a marker).
marker_like = st.dictionaries(
    st.sampled_from(["cache_control", "a", "z"]), st.just({"type": "ephemeral"}) | json_values, max_size=3
).map(lambda d: json.dumps(d))
marker_parts: st.SearchStrategy[Part] = parts | st.builds(ToolCall, ids, ids, marker_like)
marker_messages = st.builds(
    Message, st.sampled_from(["user", "assistant"]), st.lists(marker_parts, max_size=4).map(tuple)
)


@settings(max_examples=400)
@given(m=marker_messages, provider=st.sampled_from(sorted(PROVIDERS)))
def test_an_unmarked_fragment_derived_from_the_marked_one_is_the_encoders(m: Message, provider: str) -> None:
    """unmarked(marked bytes) is the message's unmarked bytes, or None (then written again): never other
    bytes, whatever the parts hold (a tool call's input with a cache_control key included)."""
    mod = PROVIDERS[provider]
    got = mod.unmarked(_encoded(m, True, provider))
    assert got is None or got == _encoded(m, False, provider)


def test_the_message_the_tail_marker_leaves_is_not_written_again() -> None:
    """Each turn the tail breakpoint moves to the newest message and the one it leaves is sent unmarked:
    its bytes come from its marked fragment, not from its parts written again (before 2026-12-05
    every such message was built twice: marked, then unmarked)."""
    from engine.assembly import Measure, Section
    from engine.optimize.context import Marker
    from engine.sections import history_section
    from engine.tokens import CharTokenizer, TokenCounter

    for provider, mod in PROVIDERS.items():
        ser = mod.serializer()
        built: list[tuple[str, bool]] = []
        real = ser._message_blocks

        def spy(m: Message, marked: bool, real: Any = real, built: list[Any] = built) -> Any:
            built.append((m.sha, marked))
            return real(m, marked)

        ser._message_blocks = spy  # type: ignore[method-assign]
        measure = Measure(TokenCounter(CharTokenizer()))
        msgs: list[Message] = [Message("user", (Text("Fix the bug."),))]
        reqs = []
        for i in range(6):
            msgs.append(Message("assistant", (Text(f"step {i}"), ToolCall(f"c{i}", "bash", '{"cmd": "ls"}'))))
            msgs.append(Message("user", (ToolResult(f"c{i}", f"out {i} " * 40),)))
            hist: Section = history_section(tuple(msgs), ())
            tail = Marker(hist.id, len(msgs) - 1, hist.scope.label, "conversation tail")
            reqs.append(ser.serialize((hist,), (tail,), "m", 100, measure).body)
        assert len(built) == len(set(built)) == 2 * 6 + 1, provider  # each message built once
        # The bytes are the ones the message's parts give unmarked.
        for m in msgs[:-1]:
            assert _encoded(m, False, provider) in reqs[-1]


def test_a_tool_calls_string_arguments_are_written_without_the_hooked_parse(monkeypatch: Any) -> None:
    """An agent's usual arguments (an object of strings) are written from json's own parse, member by
    member: not through ToolCall.arguments_obj's decoder and the sorted-key encoder (~15 us a call
    before 2026-12-05, each turn's new tool call). Other arguments still go that way, to the same bytes."""
    flat = ToolCall("c1", "bash", '{"command": "grep -rn \\"x\\" é", "cwd": "/testbed"}')
    nested = ToolCall("c2", "edit", '{"path": "a.py", "lines": [1, 2], "n": 1e400}')
    want = {
        c: [
            _encoded(Message("assistant", (c,)), mk, prov)
            for prov in sorted(PROVIDERS)
            for mk in (False, True)
        ]
        for c in (flat, nested)
    }
    calls: list[str] = []
    real = ToolCall.arguments_obj

    def spy(self: ToolCall) -> Any:
        calls.append(self.id)
        return real(self)

    monkeypatch.setattr(ToolCall, "arguments_obj", spy)
    for c in (flat, nested):
        got = [
            PROVIDERS[prov].message_json(Message("assistant", (c,)), mk)
            for prov in sorted(PROVIDERS)
            for mk in (False, True)
        ]
        assert got == want[c]
    assert set(calls) == {"c2"}


def test_a_message_of_tool_results_is_written_without_sorting_or_filtering(monkeypatch: Any) -> None:
    """An agent's usual user message, tool results only (every turn), is in its order and sends every part:
    written without the sort (a key call a part) and sent_parts' two scans. The encoder's bytes, marked or
    not; a message with a text among its results still sorts them first and leaves blank texts out."""
    from tests.support.counting import count_calls

    results = Message("user", tuple(ToolResult(f"c{i}", f'out {i} "q"\n', is_error=i == 1) for i in range(3)))
    mixed = Message("user", (Text("then?"), ToolResult("c1", "ok"), Text("  "), ToolResult("c2", "")))
    want = {(m, marked): _encoded(m, marked) for m in (results, mixed) for marked in (False, True)}
    filtered = count_calls(monkeypatch, anthropic, "sent_parts")
    for marked in (False, True):
        assert anthropic.message_json(results, marked) == want[results, marked]
    assert filtered[0] == 0
    for marked in (False, True):
        assert anthropic.message_json(mixed, marked) == want[mixed, marked]
    assert filtered[0] == 2
