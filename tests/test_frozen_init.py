"""engine.frozen_init: each decorated class builds what the dataclass's generated __init__ builds.

The reference is the generated __init__'s documented behaviour, done by hand: every field stored with
object.__setattr__ in field order (the given value, else the default, else the factory's), then
__post_init__. Compared: the instance's __dict__ (values and key order, which pickling follows), ==,
hash and repr. A frozen_init that skipped __post_init__, shared one factory-made value between
instances, or stored a default in place of a given value fails it; so does a decorated class that is
not frozen, has slots, or has a field the decorator cannot pass positionally.
"""

from __future__ import annotations

import dataclasses
import pickle
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.artifacts import Message, Text, ToolCall, ToolResult
from engine.assembly import Section
from engine.feedback import Usage
from engine.frozen_init import frozen_init
from engine.plan import Plan, Reserves, SectionEstimate
from engine.policy.cachecost import Payback
from engine.providers.base import Block

DECORATED: list[type[Any]] = [
    Text,
    ToolCall,
    ToolResult,
    Message,
    Block,
    Section,
    SectionEstimate,
    Reserves,
    Plan,
    Usage,
    Payback,
]


def _reference(cls: type[Any], given: dict[str, Any]) -> Any:
    obj = object.__new__(cls)
    for f in dataclasses.fields(cls):
        if f.name in given:
            value = given[f.name]
        elif f.default is not dataclasses.MISSING:
            value = f.default
        else:
            value = f.default_factory()  # type: ignore[misc]
        object.__setattr__(obj, f.name, value)
    if hasattr(cls, "__post_init__"):
        obj.__post_init__()
    return obj


# Values of the right shape for each class's __post_init__ (the others store whatever they are given).
_text = st.text(max_size=20)
_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "text": _text,
    "id": _text,
    "name": _text,
    "arguments": _text,
    "call_id": _text,
    "content": _text,
    "is_error": st.booleans(),
    "form": st.sampled_from(["full", "cleared", "spilled"]),
    "role": st.sampled_from(["user", "assistant"]),
}


@st.composite
def _instances(draw: st.DrawFn) -> tuple[type[Any], dict[str, Any]]:
    cls = draw(st.sampled_from(DECORATED))
    given: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        if f.name == "sha" and not required and draw(st.booleans()):
            continue  # computed by __post_init__
        if required or draw(st.booleans()):
            if f.name == "parts":
                given[f.name] = tuple(Text(t) for t in draw(st.lists(_text, max_size=3)))
            else:
                given[f.name] = draw(_VALUES.get(f.name, st.integers(0, 10**6) | _text))
    return cls, given


@settings(max_examples=400, deadline=None)
@given(case=_instances(), positional=st.booleans())
def test_a_decorated_class_builds_what_the_generated_init_builds(
    case: tuple[type[Any], dict[str, Any]], positional: bool
) -> None:
    cls, given = case
    names = [f.name for f in dataclasses.fields(cls)]
    if positional and list(given) == names[: len(given)]:
        obj = cls(*given.values())
    else:
        obj = cls(**given)
    ref = _reference(cls, given)
    assert list(vars(obj).items()) == list(vars(ref).items())
    assert obj == ref
    assert repr(obj) == repr(ref)
    if cls.__hash__ is not None and all(isinstance(v, (str, int, bool, tuple)) for v in vars(obj).values()):
        assert hash(obj) == hash(ref)
    assert pickle.dumps(obj) == pickle.dumps(ref)
    with pytest.raises(dataclasses.FrozenInstanceError):
        obj.__setattr__(names[0], None)


def test_factory_made_defaults_are_new_each_time() -> None:
    @frozen_init
    @dataclass(frozen=True)
    class Holder:
        n: int
        items: list[int] = field(default_factory=list)

    a, b = Holder(1), Holder(2)
    assert a.items == [] and a.items is not b.items
    assert Holder(3, [4]).items == [4]


def test_what_it_cannot_build_is_refused() -> None:
    @dataclass
    class Mutable:
        n: int

    @dataclass(frozen=True)
    class KeywordOnly:
        n: int = field(kw_only=True)

    @dataclass(frozen=True, slots=True)
    class Slotted:
        n: int

    for cls in (Mutable, KeywordOnly, Slotted):
        with pytest.raises(TypeError):
            frozen_init(cls)
