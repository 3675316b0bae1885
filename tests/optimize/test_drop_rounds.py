"""drop_rounds (engine/optimize/drop_rounds.py): drop whole oldest rounds, scaled by pressure."""

from __future__ import annotations

from engine.artifacts import Message, Text
from engine.optimize import drop_rounds
from engine.types import Tier
from tests.optimize.fixtures import ctx, history, identity, pairs_intact, rounds


def test_drops_whole_rounds_keeps_task_and_newest() -> None:
    msgs = rounds(10)
    asm = (identity(), history(msgs))
    out = drop_rounds.apply(asm, ctx(asm, Tier.AGGRESSIVE_PRUNE, pressure=0.9))
    assert out.changed and out.tokens_saved > 0
    kept = out.asm[-1].items
    first = kept[0]
    assert isinstance(first, Message) and first.parts[0] == msgs[0].parts[0]  # the task is kept
    assert any(isinstance(p, Text) and "earlier rounds dropped" in p.text for p in first.parts)
    assert kept[-2:] == msgs[-2:]  # the newest round is kept
    assert pairs_intact(kept)
    # 9 droppable rounds at pressure 0.9 -> 25% -> 2 (one batch).
    assert "dropped 2 of 9" in out.detail


def test_higher_pressure_drops_more() -> None:
    asm = (identity(), history(rounds(20)))
    low = drop_rounds.apply(asm, ctx(asm, Tier.AGGRESSIVE_PRUNE, pressure=0.9))
    high = drop_rounds.apply(asm, ctx(asm, Tier.AGGRESSIVE_PRUNE, pressure=1.5))
    assert len(high.asm[-1].items) < len(low.asm[-1].items)


def test_too_few_rounds_is_not_needed() -> None:
    asm = (identity(), history(rounds(4)))
    out = drop_rounds.apply(asm, ctx(asm, Tier.AGGRESSIVE_PRUNE))
    assert not out.changed and "droppable rounds" in out.detail
