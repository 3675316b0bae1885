"""The gates-closed column's request carried from its last one (engine/sim/closed_cut.py, ClosedCut.carried).

When the last trimming build's request was the rule's plain drop, the next build plans only what the
rule reads (ceiling and budgets) and, when the same rounds are dropped, sends that request with the
appended messages; when other rounds are dropped, it drops them as trim does, planning once. Held here:
every turn of varied sessions equals the build through trim_sections over the whole conversation (the
carry off); the carried request builds most trimming turns of a long session, both ways (the equality
is not vacuous); and a carried plan with a wrong history budget is caught.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.sim import closed_cut
from tests.support.sim_builds import closed_builds, round_sessions, rounds_session


def _counting(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """How the carried builds went: 'same' rounds carried, 'moved' rounds dropped anew, 'none' handed back."""
    got = {"same": 0, "moved": 0, "none": 0}
    real_carried, real_drop = closed_cut.ClosedCut.carried, closed_cut.ClosedCut._drop
    dropped = [False]

    def drop(self: closed_cut.ClosedCut, *a: Any, **kw: Any) -> Any:
        dropped[0] = True
        return real_drop(self, *a, **kw)

    def carried(self: closed_cut.ClosedCut, *a: Any, **kw: Any) -> Any:
        dropped[0] = False
        out = real_carried(self, *a, **kw)
        got["none" if out is None else "moved" if dropped[0] else "same"] += 1
        return out

    monkeypatch.setattr(closed_cut.ClosedCut, "carried", carried)
    monkeypatch.setattr(closed_cut.ClosedCut, "_drop", drop)
    return got


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(session=round_sessions, window=st.sampled_from([2500, 4000, 8000, 12000]))
def test_carried_requests_equal_the_rule_builds(session: dict[str, Any], window: int) -> None:
    events = rounds_session(**session)
    got = closed_builds(events, window, carry=True)
    want = closed_builds(events, window, carry=False)
    for k, (a, b) in enumerate(zip(got, want, strict=True)):
        assert a == b, f"turn {k}"


@pytest.mark.parametrize("provider", ["deepseek", "anthropic"])
def test_most_trimming_turns_are_carried(provider: str, monkeypatch: pytest.MonkeyPatch) -> None:
    events = rounds_session(provider, 60, [1, 2], [8, 40, 20], 2, 7, 0)
    want = closed_builds(events, 6000, carry=False)
    counts = _counting(monkeypatch)
    got = closed_builds(events, 6000, carry=True)
    assert got == want
    trims = sum("trim_sections" in g[1] for g in got)
    assert trims >= 40
    assert counts["same"] >= 10 and counts["moved"] >= 10
    assert counts["same"] + counts["moved"] >= trims - 5


def test_a_wrong_carried_budget_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """The carried plan's history budget off by a few hundred tokens (as if another section's total were
    left out): other rounds are dropped than the rule drops, and the builds differ."""
    events = rounds_session("deepseek", 60, [1, 2], [8, 40, 20], 2, 7, 0)
    want = closed_builds(events, 6000, carry=False)
    real = closed_cut.allocate

    def wrong(ests: Any, ceiling: int) -> dict[str, int]:
        return real(ests, ceiling + 400)

    monkeypatch.setattr(closed_cut, "allocate", wrong)
    assert closed_builds(events, 6000, carry=True) != want
