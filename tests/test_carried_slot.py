"""cost_aware.carried_slot: the slot key a pipeline's carry holds for the very (limits, settings) objects
of its config, which both express lanes (engine/pipeline_express.py's carry, pipeline_held_lane.py's
after_decide) ask before they extend a turn, and which _slot_key reuses."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

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


def test_the_lane_carries_the_slot_of_its_configs_objects_and_none_under_others(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A steady pipeline's turn leaves the lane its config's slot; once the carried slot is another
    pair's (a what-if column ran under other limits), the same turn would leave the lane nothing.
    (The lane's arguments and the carry are taken from the pipeline's own calls of express.carry and
    carried_slot, not read from its private state.)"""
    lanes: list[tuple[Any, ...]] = []
    carries: list[dict[str, Any]] = []
    real_carry, real_slot = express.carry, cost_aware.carried_slot

    def carry_spy(*args: Any) -> Any:
        got = real_carry(*args)
        lanes.append((*args, got))
        return got

    def slot_spy(carry: dict[str, Any], limits: OptimizeLimits, settings: PolicySettings) -> int | None:
        carries.append(carry)
        return real_slot(carry, limits, settings)

    monkeypatch.setattr(express, "carry", carry_spy)
    monkeypatch.setattr(cost_aware, "carried_slot", slot_spy)
    pipe = _steady_pipe("openai")
    try:
        for t in range(4):
            _round(pipe, t)
        assert lanes and carries
        me, cfg, asm, elided, ser, c = lanes[-1]
        assert me is pipe and c is not None
        assert c.slot == real_slot(carries[-1], cfg.limits, cfg.policy) == hash((cfg.limits, cfg.policy))
        assert real_carry(pipe, cfg, asm, elided, ser) is not None
        cost_aware._slot_key(carries[-1], replace(cfg.limits), cfg.policy)  # a what-if column's build
        assert real_carry(pipe, cfg, asm, elided, ser) is None
    finally:
        pipe.close()
