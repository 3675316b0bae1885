"""frames.ObjectCounter's two hooks (map_hook, list_hook: closures over one count) charge what its
single callable charged: COST per container, VALUE per value held (a map's keys too), refusing the
container that takes the count past `left`, at the same container, with the same message."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.recording.frames import FrameCountError, ObjectCounter, decode_payload

COST, VALUE = ObjectCounter.COST, ObjectCounter.VALUE

values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=4), inner, max_size=5),
    max_leaves=40,
)


def _charges(obj: Any) -> list[int]:
    """What each container of `obj` costs, in the order msgpack builds them (its values first)."""
    out: list[int] = []

    def walk(v: Any) -> None:
        if isinstance(v, dict):
            for k, x in v.items():
                walk(k)
                walk(x)
            out.append(COST + 2 * VALUE * len(v))
        elif isinstance(v, list):
            for x in v:
                walk(x)
            out.append(COST + VALUE * len(v))

    walk(obj)
    return out


@settings(max_examples=200, deadline=None)
@given(doc=st.dictionaries(st.text(max_size=4), values, max_size=6), cut=st.integers(0, 4000))
def test_the_hooks_charge_each_container_and_refuse_the_one_past_left(doc: dict[str, Any], cut: int) -> None:
    payload = msgpack.packb(doc, use_bin_type=True)
    charges = _charges(doc)
    total = sum(charges)
    left = min(cut, total + 1)
    counter = ObjectCounter(left)
    running = 0
    over = next((i for i, c in enumerate(charges) if (running := running + c) > left), None)
    if over is None:
        assert decode_payload(payload, _crc(payload), counter=counter) == doc
        assert counter.used == total
    else:
        with pytest.raises(FrameCountError, match=f"more than {left} bytes of maps, arrays"):
            decode_payload(payload, _crc(payload), counter=counter)
        assert counter.used == sum(charges[: over + 1])  # counted up to the refused one, none after


def test_the_instance_as_a_hook_counts_as_its_two_hooks() -> None:
    """Callers that pass the counter itself (object_hook=counter, list_hook=counter) count the same."""
    doc = {"a": [1, 2, {"b": []}], "c": {}}
    a, b = ObjectCounter(10**6), ObjectCounter(10**6)
    assert msgpack.unpackb(msgpack.packb(doc), object_hook=a, list_hook=a) == doc
    assert msgpack.unpackb(msgpack.packb(doc), object_hook=b.map_hook, list_hook=b.list_hook) == doc
    assert a.used == b.used == sum(_charges(doc))


def _crc(payload: bytes) -> int:
    import zlib

    return zlib.crc32(payload)
