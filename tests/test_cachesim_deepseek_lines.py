"""DeepSeek's carried reading taken up again on a line a call comes back to (`_DeepSeekPolicy._line_back`).

clear_tool_uses past its window: the window's start moves on and back by a round or two, and each call
clears one more result near its end, so a call often comes back to the start of a call a few calls
before, and shares most of that call's prefix. Its reading of the units its prefix contains is that
call's, caught up on what was created and expired since and cut where the two part, not a lookup of
every prefix again. The figures, the units (contents, times, order) and `seen` must be those of a
simulator that scans every call's whole prefix."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.sim.cachesim import Block, CacheSimulator, Call


def _units(policy: Any) -> list[tuple[Any, ...]]:
    return [(k, u.tokens, u.prob, u.group, u.available_at, u.last_used) for k, u in policy.units.items()]


def _session(
    starts: list[int], gaps: list[float], appended: list[int], cleared: list[int], n: int = 60
) -> list[Call]:
    """A window over a growing conversation: its start cycles through `starts`, the calls `gaps` apart,
    `appended` blocks a call, one more block near the end cleared (`cleared`: how far from the end)."""
    system = [Block("sys", 700, segment="system")]
    conv = [Block(f"m{i}", 30 + 17 * (i % 5)) for i in range(40)]
    calls = []
    t = 0.0
    for k in range(n):
        conv += [Block(f"n{k}.{j}", 20 + j) for j in range(appended[k % len(appended)])]
        d = cleared[k % len(cleared)]
        if d and d < len(conv):
            conv[-d] = Block(f"c{k}", 5)
        start = starts[k % len(starts)]
        t += gaps[k % len(gaps)]
        calls.append(Call(tuple(system + conv[start:]), t, output_tokens=40, output_sha=f"n{k + 1}.0"))
    return calls


def _same(calls: list[Call], **options: Any) -> int:
    """Steps `calls` through the carried simulator and the whole-prefix one: everything equal. Returns
    how many readings were taken up from a line."""
    carried = CacheSimulator("deepseek", "deepseek-chat", **options)
    scanned = CacheSimulator("deepseek", "deepseek-chat", **options)
    ref: Any = scanned._policy
    ref.carry = False
    pol: Any = carried._policy
    taken = 0
    real = pol._line_back

    def counted(*a: Any) -> Any:
        nonlocal taken
        got = real(*a)
        taken += got is not None
        return got

    pol._line_back = counted
    for i, c in enumerate(calls):
        assert carried.step(c) == scanned.step(c), f"call {i}"
        assert _units(pol) == _units(ref), f"call {i}"
        assert pol.seen == ref.seen, f"call {i}"
    return taken


def test_a_window_coming_back_to_a_start_takes_that_lines_reading_up() -> None:
    calls = _session(starts=[0, 2, 4, 2], gaps=[5.0], appended=[2], cleared=[6])
    assert _same(calls) >= 10  # (the path exercised: most returns to a start take its line up)


# _session's arguments, drawn: starts cycling or moving back, gaps from equal instants to past the ttls.
SESSIONS = {
    "starts": st.lists(st.integers(0, 8), min_size=1, max_size=5),
    "gaps": st.lists(st.sampled_from([0.0, 1.0, 5.0, 60.0, 400.0, 5_000.0]), min_size=1, max_size=4),
    "appended": st.lists(st.integers(0, 3), min_size=1, max_size=3),
    "cleared": st.lists(st.integers(0, 12), min_size=1, max_size=3),
}


@settings(max_examples=150, deadline=None)
@given(
    **SESSIONS,
    options=st.fixed_dictionaries(
        {},
        optional={
            "ttl_seconds": st.sampled_from([30.0, 300.0, 3_000.0]),
            "common_prefix_units": st.booleans(),
            "interval_tokens": st.sampled_from([500, 2_000]),
        },
    ),
)
def test_lines_taken_up_read_what_a_whole_prefix_scan_reads(
    starts: list[int], gaps: list[float], appended: list[int], cleared: list[int], options: dict[str, Any]
) -> None:
    """Starts cycling or moving back, units expiring between the calls of a line (short ttls, long
    gaps), units written on a line's prefix by calls of other lines, a cleared block where two lines
    part: every figure, unit and `seen` entry is the whole-prefix scan's."""
    _same(_session(starts, gaps, appended, cleared, n=40), **options)
