"""The simulator's per-call value classes keep their dataclass meaning under hand-written __init__s.

TurnFigures (engine/sim/simulate_figures.py), Call, CallCache and Block (engine/sim/cachesim.py) are frozen
dataclasses made once or twice a simulated call (a Block once a distinct block); their __init__ stores the fields into the instance dict instead of
the generated one's object.__setattr__ per field. Held here against the dataclass's own field list, so a
field added later without its line in __init__ (or two lines swapped) fails: every field stored under
its own name, positional and keyword, defaults as declared, still frozen, and eq, hash, repr and
dataclasses.replace as the generated methods give them.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.sim.cachesim import Block, Call, CallCache
from engine.sim.simulate_figures import TurnFigures

CLASSES = (TurnFigures, Call, CallCache, Block)


def _values(cls: type, draw: Any) -> list[Any]:
    """A distinct value per field (so a swapped pair of assignments shows)."""
    out: list[Any] = []
    for i, f in enumerate(dataclasses.fields(cls)):
        if f.name == "blocks":
            out.append(tuple(Block(f"b{j}", j + 1) for j in range(draw(st.integers(0, 3)))))
        elif f.type in ("str", "str | None"):
            out.append(f"{f.name}-{draw(st.integers(0, 99))}")
        elif f.type == "bool":
            out.append(draw(st.booleans()))
        elif f.type in ("float", "float | None"):
            out.append(float(draw(st.integers(0, 10**6))) + 0.5 + i)
        else:
            out.append(draw(st.integers(0, 10**9)) * 100 + i)
    return out


@settings(max_examples=60, deadline=None)
@given(data=st.data(), cls=st.sampled_from(CLASSES))
def test_fields_stored_as_declared(data: Any, cls: type) -> None:
    fields = dataclasses.fields(cls)
    vals = _values(cls, data.draw)
    names = [f.name for f in fields]
    pos = cls(*vals)
    kw = cls(**dict(zip(names, vals, strict=True)))
    for obj in (pos, kw):
        assert [getattr(obj, n) for n in names] == vals
        assert vars(obj) == dict(zip(names, vals, strict=True))
    assert pos == kw and hash(pos) == hash(kw) and repr(pos) == repr(kw)
    # replace() goes through __init__ with every field by keyword.
    other = dataclasses.replace(pos, **{names[-1]: vals[-2] if type(vals[-2]) is type(vals[-1]) else None})
    assert [getattr(other, n) for n in names[:-1]] == vals[:-1]
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(pos, names[0], vals[0])


@pytest.mark.parametrize("cls", CLASSES)
def test_defaults_as_declared(cls: type) -> None:
    fields = dataclasses.fields(cls)
    required = [
        f for f in fields if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]
    args = [(), 1.0] if cls is Call else list(range(1, len(required) + 1))
    obj = cls(*args)
    for f in fields[len(required) :]:
        assert getattr(obj, f.name) == f.default, f.name
