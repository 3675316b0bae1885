"""Steps typed before the first turn is on screen are not lost: they run, in order, once the start turn
is shown (inspector/early_steps.py). On the old code the app dropped them: `replay FILE` then Left Left
Left typed at once showed the last turn, not three back."""

from __future__ import annotations

import threading
from collections.abc import Iterator

from hypothesis import given
from hypothesis import strategies as st

from inspector.app import InspectorApp
from inspector.early_steps import MAX_HELD, EarlySteps
from inspector.sources import Chunk
from inspector.sources.synthetic import SyntheticSource
from tests.tui.conftest import settle


class GatedSource(SyntheticSource):
    """A replay of `turns` turns whose chunks arrive only when the test lets them (a slow disk)."""

    def __init__(self, turns: int, chunks: int = 1) -> None:
        super().__init__(turns)
        self.chunks = chunks
        self.go = [threading.Event() for _ in range(chunks)]

    def load_chunks(self) -> Iterator[Chunk]:
        traces = self.load_initial()
        size = -(-len(traces) // self.chunks) if traces else 0
        for i in range(self.chunks):
            self.go[i].wait(30)
            yield Chunk(traces[i * size:(i + 1) * size], more=i < self.chunks - 1)

    def release(self) -> None:
        for event in self.go:
            event.set()


async def _press_before_load(source: GatedSource, keys: list[str], start_turn: int | None = None,
                             chunks_first: int = 0) -> InspectorApp:
    app = InspectorApp(source, theme="cp-dark", start_turn=start_turn)
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause()
            for i in range(chunks_first):
                source.go[i].set()
                await pilot.pause(0.05)
            await pilot.press(*keys)
            assert len(app.early_steps) == len([k for k in keys if k in ("left", "right", "home", "end")])
            source.release()
            await settle(pilot)
    finally:
        source.release()
    return app


async def test_steps_typed_before_the_first_turn_run_once_it_is_shown() -> None:
    app = await _press_before_load(GatedSource(40), ["left", "left", "left"])
    assert app.index == 36 and app.timeline.current == 36 and not app.timeline.follow
    assert len(app.early_steps) == 0 and not app.early_steps.waiting


async def test_they_run_in_the_order_typed() -> None:
    app = await _press_before_load(GatedSource(40), ["home", "right", "right", "end", "left"])
    assert app.index == 38


async def test_with_a_start_turn_in_a_later_chunk_they_step_from_that_turn() -> None:
    """`replay FILE --turn 25` on a recording read in two chunks: the first chunk (turns 0-19) is in
    before the keys, the turn asked for is not; the keys step from turn 25 once it is shown."""
    app = await _press_before_load(GatedSource(40, chunks=2), ["left", "left"], start_turn=25,
                                   chunks_first=1)
    assert app.timeline.traces[app.index]["turn"] == 23


async def test_a_load_with_nothing_to_show_drops_them() -> None:
    source = GatedSource(0)
    app = InspectorApp(source, theme="cp-dark")
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause()
            await pilot.press("left", "right")
            source.release()
            await settle(pilot)
            assert len(app.early_steps) == 0 and not app.early_steps.waiting
            assert len(app.timeline) == 0
    finally:
        source.release()


async def test_steps_after_the_start_run_at_once() -> None:
    source = GatedSource(40)
    source.release()
    app = InspectorApp(source, theme="cp-dark")
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("left")
        await pilot.pause()
        assert app.index == 38 and len(app.early_steps) == 0


@given(st.lists(st.integers(-3, 3), max_size=MAX_HELD * 2))
def test_held_steps_run_in_order_and_the_newest_are_kept(deltas: list[int]) -> None:
    early, ran = EarlySteps(), []
    for d in deltas:
        early.run_or_hold(lambda d=d: ran.append(d))  # type: ignore[misc]
    assert ran == [] and len(early) == min(len(deltas), MAX_HELD)
    early.start_shown()
    assert ran == deltas[-MAX_HELD:] if deltas else ran == []
    early.run_or_hold(lambda: ran.append(99))
    assert ran[-1] == 99 and len(early) == 0
