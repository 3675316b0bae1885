"""A section's recent runs (its last few layouts, most recently used first): the run of the very same items.

Both layouts that keep such runs, the provider serializer's (`Serializer._section`, engine/providers/
base.py: a run holds fragments, blocks, keys and hashes) and simulate's Blocks (`BlockLayout._section`,
engine/sim/block_layout.py: a run holds Blocks), first look for a run of the same items tuple (an
unchanged system section, the tools: nothing to lay out again) here, so the two reuse the same runs in
the same order. What a run holds beyond its tokenizer, items and markers is the caller's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, TypeVar

if TYPE_CHECKING:
    from engine.assembly import SectionItem


class _Run(Protocol):
    """What the lookup reads of a run."""

    @property
    def tok(self) -> str: ...  # the tokenizer's name its token counts are of

    @property
    def items(self) -> tuple[SectionItem, ...]: ...

    @property
    def marks(self) -> frozenset[int]: ...  # the items that carried a cache marker


R = TypeVar("R", bound=_Run)


def same_run(runs: list[R], items: tuple[SectionItem, ...], marks: frozenset[int], tok: str) -> R | None:
    """The run in `runs` of these very items (the same tuple object), with the same markers and
    tokenizer, moved to the front (the most recently used, which the runs' eviction keeps); None when
    there is none."""
    for j, r in enumerate(runs):
        if r.items is items and r.marks == marks and r.tok == tok:
            if j:
                runs.insert(0, runs.pop(j))
            return r
    return None
