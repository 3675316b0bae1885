"""What an agent's own calls between two model calls cost the engine (assistant(), tool_result()), beyond
next_request(): the general readers an SDK object needs are not paid for our own plain shapes."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import engine.pipeline_conversation as conversation_mod
from engine.artifacts import ToolCall
from engine.errors import ConfigError
from engine.pipeline import Pipeline


class _CountingMeta(type):
    checks = 0

    def __instancecheck__(cls, obj: Any) -> bool:
        _CountingMeta.checks += 1
        from collections.abc import Mapping

        return isinstance(obj, Mapping)


class _CountingMapping(metaclass=_CountingMeta):
    pass


def test_plain_dict_calls_skip_the_general_readers_mapping_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    """A call as a plain dict {"id", "name", "arguments"} (what most agents pass) is read directly: no
    Mapping ABC check (~0.3 us each), none of the SDK-shape look-ups. Before: one check a call."""
    monkeypatch.setattr(conversation_mod, "Mapping", _CountingMapping)
    pipe = Pipeline("claude-sonnet-4-5", "anthropic", 32_000, serve=False, clock=lambda: 0.0)
    pipe.identity("You are terse.")
    pipe.user("Fix the bug.")
    _CountingMeta.checks = 0
    for t in range(5):
        calls = pipe.assistant(
            f"step {t}",
            [
                {"id": f"c{t}a", "name": "bash", "arguments": '{"cmd": "ls"}'},
                {"id": f"c{t}b", "name": "read", "arguments": "{}"},
            ],  # fmt: skip
        )
        for c in calls:
            pipe.tool_result(c.id, f"out {c.id}")
        pipe.next_request()
    assert _CountingMeta.checks == 0
    pipe.close()


_IDS = st.sampled_from(["c1", "", None, 3, "call_x"])
_ARGS = st.sampled_from(['{"a": 1}', "", None, {"a": 1}, 3, "not json"])


@settings(max_examples=300, deadline=None)
@given(
    st.fixed_dictionaries(
        {},
        optional={
            "id": _IDS,
            "name": st.sampled_from(["bash", "", None, 7]),
            "arguments": _ARGS,
            "input": _ARGS,
            "function": st.sampled_from([None, {"name": "f", "arguments": "{}"}, {"name": "g"}]),
        },
    )
)
def test_plain_dict_reads_as_the_general_reader_does(d: dict[str, Any]) -> None:
    """The direct reading gives the general reader's ToolCall (or its error) for every dict shape."""

    class NotADict(dict[str, Any]):  # a Mapping that is not exactly a dict: the general path
        pass

    def outcome(c: Any) -> Any:
        try:
            return conversation_mod._call_of(c)
        except ConfigError as exc:
            return ("error", str(exc).replace("NotADict(", "").replace(repr(c), ""))

    direct, general = outcome(d), outcome(NotADict(d))
    if isinstance(direct, ToolCall):
        assert direct == general and direct.sha == general.sha
    else:
        assert isinstance(general, tuple) and direct[0] == general[0]
