"""A faster `__init__` for the frozen dataclasses an engine turn builds by the dozen.

A frozen dataclass's generated `__init__` stores each field through `object.__setattr__` (its own
`__setattr__` refuses), ~0.1 us a field; a turn builds ~15 such objects (blocks, messages and their
parts, sections, plans, estimates, reserves, usage, pay-backs), ~80 fields, and a sampling profile put
the generated `__init__`s at ~10% of the turn. `frozen_init` replaces that `__init__` with one that
writes the fields into the instance's `__dict__` directly (where `object.__setattr__` puts them): the
same parameters, defaults, default factories and `__post_init__` call, the same attribute values in
the same order; equality, hashing, repr, pickling and freezing are the dataclass's own, untouched.
tests/test_frozen_init.py holds each decorated class to the generated `__init__`'s result.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

T = TypeVar("T")


def frozen_init(cls: type[T]) -> type[T]:
    """Apply above `@dataclass(frozen=True)` (no slots, keyword-only fields, InitVars or fields outside
    `__init__`, which it refuses rather than mishandles)."""
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen or "__slots__" in cls.__dict__:
        raise TypeError(f"frozen_init: {cls.__name__} is not a frozen dataclass without slots")
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    ns: dict[str, Any] = {"_FACTORY": _FACTORY}
    args: list[str] = []
    body: list[str] = []
    for f in fields:
        if not f.init or f.kw_only or isinstance(f.type, dataclasses.InitVar):
            raise TypeError(f"frozen_init: {cls.__name__}.{f.name} is not a plain positional field")
        if hasattr(type(cls.__dict__.get(f.name)), "__set__"):  # a descriptor would take the store
            raise TypeError(f"frozen_init: {cls.__name__}.{f.name} is a descriptor")
        value = f.name
        if f.default is not dataclasses.MISSING:
            ns[f"_dflt_{f.name}"] = f.default
            args.append(f"{f.name}=_dflt_{f.name}")
        elif f.default_factory is not dataclasses.MISSING:
            ns[f"_make_{f.name}"] = f.default_factory
            args.append(f"{f.name}=_FACTORY")
            value = f"_make_{f.name}() if {f.name} is _FACTORY else {f.name}"
        else:
            args.append(f.name)
        body.append(f"    d[{f.name!r}] = {value}")
    if hasattr(cls, "__post_init__"):
        body.append("    self.__post_init__()")
    src = f"def __init__(self, {', '.join(args)}):\n    d = self.__dict__\n" + "\n".join(body or ["    pass"])
    exec(src, ns)  # noqa: S102  (source built from the class's own field names, as dataclasses does)
    init = ns["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    init.__doc__ = cls.__init__.__doc__
    cls.__init__ = init  # type: ignore[method-assign]
    return cls


class _Factory:
    """The default of a field made by a factory (dataclasses' own sentinel is private)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<factory>"


_FACTORY = _Factory()
