"""engine.frozen_init.direct_init: the frozen dataclasses an engine turn builds are made without one
object.__setattr__ call per field, and are the same instances the generated __init__ makes."""

from __future__ import annotations

import dataclasses
import pickle
from dataclasses import InitVar, dataclass, field
from typing import Any, ClassVar

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.assembly import Section
from engine.feedback import Usage
from engine.frozen_init import direct_init
from engine.plan import Plan, PlanInput, Reserves, SectionEstimate, Thresholds
from engine.policy.cachecost import Payback
from engine.policy.cost_aware import _Cut, _CutMemo
from engine.policy.state import CompactionState
from engine.providers.base import Block
from engine.types import CacheScope, Priority, SectionKind, Tier


def _sets_through_object_setattr(cls: type) -> bool:
    """Whether `cls.__init__` sets fields through object.__setattr__ (what a frozen dataclass's
    generated __init__ does, once per field: `__dataclass_builtins_object__.__setattr__(self, ...)`)."""
    return "__setattr__" in cls.__init__.__code__.co_names  # type: ignore[misc]


EST = SectionEstimate("h", "History", SectionKind.HISTORY, CacheScope.NONE, Priority.NORMAL, 10)
RES = Reserves(1, 2, 3)
BUILT_EVERY_TURN = [
    lambda: Plan(0.1, 0.2, Tier.NORMAL, Tier.NORMAL, Tier.NORMAL, False, "x", 100, 50, {"h": 1}),
    lambda: PlanInput(100, 90, Thresholds(), RES, (EST,)),
    lambda: SectionEstimate("h", "History", SectionKind.HISTORY, CacheScope.NONE, Priority.NORMAL, 10),
    lambda: Reserves(1, 2, 3, 75),
    lambda: Section("h", "History", SectionKind.HISTORY, CacheScope.NONE, Priority.NORMAL, ()),
    lambda: Block("history", "messages", "ab" * 32, 12, False),
    lambda: Payback(10, 20, 1.5, 9.0),
    lambda: _Cut(5, 3, 400, 2, 1200),
    lambda: _CutMemo((), 0, None, 0.0, _Cut(5, 3, 400, 2, 1200)),  # type: ignore[arg-type]
    lambda: CompactionState(3, 100, 1, 1, 7, ""),
    lambda: Usage(100, 20, 80),
]


@pytest.mark.parametrize("make", BUILT_EVERY_TURN)
def test_per_turn_frozen_dataclasses_are_built_without_setattr_per_field(make: Any) -> None:
    # Fails before direct_init: the generated __init__ calls object.__setattr__ once per field.
    assert not _sets_through_object_setattr(type(make()))


# Twin classes: the same definition with and without direct_init, compared instance by instance.
def _pair(**dc: Any) -> tuple[type, type]:
    def define() -> type:
        @dataclass(frozen=True, **dc)
        class Row:
            a: int
            b: str
            c: float = 1.5
            d: tuple[int, ...] = ()
            e: list[int] = field(default_factory=list)
            f: str = field(default="", compare=False)

            def __post_init__(self) -> None:
                if not self.f:
                    object.__setattr__(self, "f", f"{self.a}:{self.b}")
                if self.a < 0:
                    raise ValueError("a must not be negative")

        return Row

    plain = define()
    return plain, direct_init(define())


PLAIN, FAST = _pair()


@given(
    a=st.integers(min_value=-3, max_value=10**6),
    b=st.text(max_size=20),
    c=st.none() | st.floats(allow_nan=False),
    d=st.none() | st.tuples(st.integers(), st.integers()),
    e=st.none() | st.lists(st.integers(), max_size=3),
    f=st.none() | st.text(max_size=5),
    by_name=st.booleans(),
)
def test_direct_init_builds_what_the_generated_init_builds(
    a: int, b: str, c: float | None, d: Any, e: Any, f: Any, by_name: bool
) -> None:
    kw = {k: v for k, v in {"c": c, "d": d, "e": e, "f": f}.items() if v is not None}
    args: tuple[Any, ...] = (a, b)
    if by_name:
        kw.update(a=a, b=b)
        args = ()
    outcomes = []
    for cls in (PLAIN, FAST):
        try:
            outcomes.append(cls(*args, **kw))
        except ValueError as exc:  # __post_init__ ran and refused, the same way
            outcomes.append(("raised", str(exc)))
    want, got = outcomes
    if isinstance(want, tuple):
        assert got == want
        return
    assert list(vars(got).items()) == list(vars(want).items())  # same fields, same order
    assert repr(got).split("(", 1)[1] == repr(want).split("(", 1)[1]
    assert dataclasses.replace(got, a=7) == FAST(7, b, **{k: v for k, v in kw.items() if k not in ("a", "b")})
    with pytest.raises(dataclasses.FrozenInstanceError):
        got.a = 1  # type: ignore[misc]


def test_a_default_factory_gives_each_instance_its_own_value() -> None:
    x, y = FAST(1, "a"), FAST(2, "b")
    assert x.e == [] and y.e == [] and x.e is not y.e


def test_equal_hash_and_frozen_on_a_real_class() -> None:
    s1 = Section("h", "History", SectionKind.HISTORY, CacheScope.NONE, Priority.NORMAL, ())
    s2 = Section(id="h", name="History", kind=SectionKind.HISTORY, scope=CacheScope.NONE, priority=Priority.NORMAL, items=())
    assert s1 == s2 and hash(s1) == hash(s2)
    assert dataclasses.replace(s1, omitted=3).omitted == 3
    assert pickle.loads(pickle.dumps(s1)) == s1
    plan = Plan(0.1, 0.2, Tier.NORMAL, Tier.NORMAL, Tier.NORMAL, False, "x", 100, 50, {"h": 1})
    assert pickle.loads(pickle.dumps(plan)) == plan and plan.budgets == {"h": 1}
    assert Plan(0.1, 0.2, Tier.NORMAL, Tier.NORMAL, Tier.NORMAL, False, "x", 1, 2).budgets == {}
    with pytest.raises(dataclasses.FrozenInstanceError):
        s1.omitted = 2  # type: ignore[misc]


def _fallback_classes() -> list[type]:
    @dataclass(frozen=True, slots=True)
    class Slotted:
        a: int

    @dataclass(frozen=True)
    class NoInit:
        a: int
        b: int = field(default=0, init=False)

    @dataclass(frozen=True)
    class KwOnly:
        a: int
        b: int = field(default=0, kw_only=True)

    @dataclass(frozen=True)
    class WithInitVar:
        a: int
        extra: InitVar[int] = 0

        def __post_init__(self, extra: int) -> None:
            pass

    @dataclass(frozen=True)
    class WithClassVar:
        a: int
        k: ClassVar[int] = 3

    @dataclass
    class NotFrozen:
        a: int

    return [Slotted, NoInit, KwOnly, WithInitVar, WithClassVar, NotFrozen]


@pytest.mark.parametrize("cls", _fallback_classes())
def test_classes_it_cannot_treat_keep_the_generated_init(cls: type) -> None:
    init = cls.__init__  # type: ignore[misc]
    assert direct_init(cls).__init__ is init  # type: ignore[misc]


def test_the_twin_without_direct_init_is_detected() -> None:
    # The structural check above can fail: the generated __init__ of a frozen dataclass is caught.
    assert _sets_through_object_setattr(PLAIN) and not _sets_through_object_setattr(FAST)
