"""cost_aware.carried_slot: the slot key a pipeline's carry holds for the very (limits, settings) objects
of its config, which both express lanes (engine/pipeline_express.py's carry, pipeline_held_lane.py's
after_decide) ask before they extend a turn, and which _slot_key reuses."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from engine import pipeline_express as express
from engine.optimize.context import OptimizeLimits
from engine.policy import cost_aware
from engine.policy.settings import PolicySettings
from tests.test_express import _round, _steady_pipe


def test_the_slot_holds_only_for_the_very_objects_it_was_worked_out_for() -> None:
    limits, settings = OptimizeLimits(), PolicySettings()
    carry: dict[str, Any] = {}
    assert cost_aware.carried_slot(carry, limits, settings) is None  # no build yet
    key = cost_aware._slot_key(carry, limits, settings)
    assert key == hash((limits, settings))
    assert cost_aware.carried_slot(carry, limits, settings) == key
    # Equal but other objects (another config's): not this slot, though they hash alike.
    assert cost_aware.carried_slot(carry, replace(limits), settings) is None
    assert cost_aware.carried_slot(carry, limits, replace(settings)) is None
    assert cost_aware.carried_slot(carry, settings, limits) is None  # type: ignore[arg-type]
    # _slot_key keeps the slot while the objects are the same, and moves it to others.
    assert cost_aware._slot_key(carry, limits, settings) == key
    other = replace(limits, trim_schemas=not limits.trim_schemas)
    assert cost_aware._slot_key(carry, other, settings) == hash((other, settings))
    assert cost_aware.carried_slot(carry, limits, settings) is None
    assert cost_aware.carried_slot(carry, other, settings) == hash((other, settings))


def test_the_lane_carries_the_slot_of_its_configs_objects_and_none_under_others() -> None:
    """A steady pipeline's turn leaves the lane its config's slot; once the carried slot is another
    pair's (a what-if column ran under other limits), the turn leaves the lane nothing."""
    pipe = _steady_pipe("openai")
    try:
        for t in range(4):
            _round(pipe, t)
        c = pipe._express
        assert c is not None
        cfg = pipe.config
        assert (
            c.slot
            == cost_aware.carried_slot(pipe._carry, cfg.limits, cfg.policy)
            == hash((cfg.limits, cfg.policy))
        )
        ser = c.serializer
        assert express.carry(pipe, cfg, c.full, c.elided, ser) is not None
        cost_aware._slot_key(pipe._carry, replace(cfg.limits), cfg.policy)
        assert express.carry(pipe, cfg, c.full, c.elided, ser) is None
    finally:
        pipe.close()
