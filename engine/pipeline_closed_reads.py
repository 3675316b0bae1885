"""The few reads of a Pipeline's private state that simulate's gates-closed column needs
(engine/sim/closed_cut.py: its carried cut assembles, plans and notes a request as the pipeline would).

They live among the pipeline's own modules (engine/pipeline*.py) because no other module may read that
state (tests/test_public_fold.py); each is one read, named for what the closed column takes from it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.assembly import Section
    from engine.config import PipelineConfig
    from engine.pipeline import Pipeline
    from engine.plan import Reserves, SectionEstimate


def carried_sources(pipe: Pipeline) -> tuple[Section, ...] | None:
    """The sections before the history as the pipeline last assembled them, when that assembly still
    holds this turn (the sources' version unchanged, no empty or silent message to note); else None."""
    carry = pipe._sources_carry
    if carry is None or carry[0] != pipe._sources_version or pipe._empty_msgs or pipe._silent_errors:
        return None
    return carry[1]


def reserves(pipe: Pipeline, cfg: PipelineConfig) -> Reserves:
    """The reserves the pipeline's plan keeps for `cfg` now (Pipeline._reserves)."""
    return pipe._reserves(cfg)


def estimate(pipe: Pipeline, s: Section) -> SectionEstimate:
    """The planner's view of section `s` (Pipeline._estimate, remembered per section object)."""
    return pipe._estimate(s)


def renamed_note(pipe: Pipeline) -> str:
    """The history section's note on calls sent with other ids than the agent gave them ("" if none)."""
    return pipe._renamed_note() if pipe._renamed else ""
