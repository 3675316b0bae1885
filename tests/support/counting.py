"""Counting what the code under test does, not timing it: how many times a function or method ran."""

from __future__ import annotations

from typing import Any

import pytest


def count_calls(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str) -> list[int]:
    """`owner.name` replaced for the test by a wrapper that counts its calls: the count is the returned
    list's one item (a list, so it reads as the count at the moment it is looked at)."""
    real, n = getattr(owner, name), [0]

    def counted(*a: Any, **kw: Any) -> Any:
        n[0] += 1
        return real(*a, **kw)

    monkeypatch.setattr(owner, name, counted)
    return n
