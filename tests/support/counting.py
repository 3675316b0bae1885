"""Counting what the code under test does, not timing it: how many times a function or method ran."""

from __future__ import annotations

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
    runs during lane turns by reading `inside` from its own wrapper of that function."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from engine import pipeline_express as express

        self.inside = False
        self.taken = 0
        real = express.turn

        def turn(pipe: Any, c: Any) -> Any:
            self.inside = True
            try:
                got = real(pipe, c)
            finally:
                self.inside = False
            self.taken += got is not None
            return got

        monkeypatch.setattr(express, "turn", turn)


class CountingMeasure(Measure):
    """A Measure counting the conversation items it is asked to weigh (a class-wide count: reset it
    before the run it counts)."""

    weighed = 0

    def item(self, it: SectionItem) -> int:
        CountingMeasure.weighed += 1
        return super().item(it)
