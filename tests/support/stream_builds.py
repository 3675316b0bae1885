"""The turns a content-search stream builds (inspector/content_search.py), for the tests that a new query
does not build again what an earlier query's pass built."""

from __future__ import annotations

from typing import Any


def record_builds(stream: Any) -> list[int]:
    """Every turn `stream.build_of` is asked for from now on, in order (the list fills as it goes)."""
    built: list[int] = []
    build_of = stream.build_of

    def counted(turn: int) -> Any:
        built.append(turn)
        return build_of(turn)

    stream.build_of = counted
    return built
