"""Counting what the code under test does, not timing it: how many times a function or method ran."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from engine.assembly import Measure, SectionItem


def count_calls(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str) -> list[int]:
    """`owner.name` replaced for the test by a wrapper that counts its calls: the count is the returned
    list's one item (a list, so it reads as the count at the moment it is looked at)."""
    real, n = getattr(owner, name), [0]

    def counted(*a: Any, **kw: Any) -> Any:
        n[0] += 1
        return real(*a, **kw)

    monkeypatch.setattr(owner, name, counted)
    return n


class LaneTurns:
    """express.turn replaced for the test by a wrapper that counts the turns the express lane took
    (`taken`) and says whether the code now running is inside one (`inside`): a test counts what else
    runs during lane turns by reading `inside` from its own wrapper of that function.

    `before(pipe, c)` runs ahead of each turn the lane is asked for (outside it), and what it returns is
    handed to `check(pipe, c, got, before_result)` after each turn the lane took: the checks a test makes
    of every lane turn (its body, its hashes, its runs' lists) without writing the wrapper again."""

    def __init__(
        self,
        monkeypatch: pytest.MonkeyPatch,
        check: Callable[[Any, Any, Any, Any], None] | None = None,
        before: Callable[[Any, Any], Any] | None = None,
    ) -> None:
        from engine import pipeline_express as express

        self.inside = False
        self.taken = 0
        real = express.turn

        def turn(pipe: Any, c: Any) -> Any:
            seen = before(pipe, c) if before is not None else None
            self.inside = True
            try:
                got = real(pipe, c)
            finally:
                self.inside = False
            if got is not None:
                self.taken += 1
                if check is not None:
                    check(pipe, c, got, seen)
            return got

        monkeypatch.setattr(express, "turn", turn)


def steady_rounds(provider: str, rounds: int = 30) -> None:
    """tests/test_express.py's steady session at `provider` (a task over the minimum cacheable prefix, a
    window the rounds never compact), `rounds` rounds of it, the pipeline closed after: the run the lane
    tests count and check their lane turns over."""
    from tests.test_express import _round, _steady_pipe

    pipe = _steady_pipe(provider)
    try:
        for t in range(rounds):
            _round(pipe, t)
    finally:
        pipe.close()


class CountingMeasure(Measure):
    """A Measure counting the conversation items it is asked to weigh (a class-wide count: reset it
    before the run it counts)."""

    weighed = 0

    def item(self, it: SectionItem) -> int:
        CountingMeasure.weighed += 1
        return super().item(it)
