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
    call = Message("assistant", (Text("Let me look."), ToolCall("c1", "bash", '{"command": "ls -la", "n": 1.5}')))
    result = Message("user", (Text("and then?"), ToolResult("c1", "a.py\nb.py\n\"quoted\" é", is_error=True)))
    for m in (call, result, Message("user", ())):
        for marked in (False, True):
            for provider, mod in PROVIDERS.items():
                out: Any = mod.message_blocks(m, marked)
                assert isinstance(out, bytes) and out == _encoded(m, marked, provider)
    # Results first, then the text, which carries the marker.
    assert b'"type":"tool_result"},{"cache_control":{"type":"ephemeral"},"text":"and then?"' in _encoded(result, True)
