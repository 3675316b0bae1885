"""The sliding window's stretch search shared by the provider serializer and simulate's Blocks
(engine/providers/stretch.py, `find_stretch`).

Held here: items laid out as head + old[a:] + tail (fresh objects in head and tail) give (h, e, a) =
(len(head), len(head) + len(old) - a, a) exactly when head and tail have at most SLICE_MIN items and
the stretch more than SLICE_MIN; at each bound one item more is not found; a stretch with an item
replaced, a run of SLICE_MIN items or fewer, and items that end elsewhere are not found.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from engine.providers.stretch import SLICE_MIN, find_stretch


def _fresh(n: int) -> list[object]:
    return [object() for _ in range(n)]


def _window(k: int, a: int, head: int, tail: int) -> tuple[tuple[object, ...], tuple[object, ...]]:
    """(items, old): an old run of k items, and new items reusing old[a:] between fresh head and tail."""
    old = tuple(_fresh(k))
    return tuple(_fresh(head)) + old[a:] + tuple(_fresh(tail)), old


@given(
    k=st.integers(0, 40),
    a=st.integers(0, 40),
    head=st.integers(0, SLICE_MIN + 2),
    tail=st.integers(0, SLICE_MIN + 2),
)
def test_a_stretch_is_found_exactly_within_the_bounds(k: int, a: int, head: int, tail: int) -> None:
    a = min(a, k)
    items, old = _window(k, a, head, tail)
    fits = head <= SLICE_MIN and tail <= SLICE_MIN and k - a > SLICE_MIN
    want = (head, head + k - a, a) if fits else None
    assert find_stretch(items, old) == want


def test_each_bound_holds_to_the_item() -> None:
    k = 30
    # The longest head and tail, the shortest stretch: found; one item more on any side: not.
    edge = k - SLICE_MIN - 1
    items, old = _window(k, edge, SLICE_MIN, SLICE_MIN)
    assert find_stretch(items, old) == (SLICE_MIN, SLICE_MIN + SLICE_MIN + 1, edge)
    assert find_stretch(*_window(k, edge, SLICE_MIN + 1, SLICE_MIN)) is None
    assert find_stretch(*_window(k, edge, SLICE_MIN, SLICE_MIN + 1)) is None
    assert find_stretch(*_window(k, edge + 1, SLICE_MIN, SLICE_MIN)) is None
    # No head and no tail: the whole of the new items is the stretch.
    items, old = _window(k, 5, 0, 0)
    assert find_stretch(items, old) == (0, k - 5, 5)


def test_no_stretch_where_the_items_do_not_reuse_one() -> None:
    items, old = _window(30, 4, 3, 2)
    assert find_stretch(items, old) == (3, 29, 4)
    broken = list(items)
    broken[15] = object()  # one item of the stretch replaced
    assert find_stretch(tuple(broken), old) is None
    assert find_stretch(items[:-3], old) is None  # ends before the run's last item
    assert find_stretch((), old) is None
    assert find_stretch(items, ()) is None
    short = tuple(_fresh(SLICE_MIN))  # a run of SLICE_MIN items is never reused as a stretch
    assert find_stretch(short, short) is None
    run = tuple(_fresh(SLICE_MIN + 1))
    assert find_stretch(run, run) == (0, SLICE_MIN + 1, 0)
