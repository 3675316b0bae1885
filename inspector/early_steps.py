"""Steps typed before the first turn is on screen.

A person who opens a recording and presses Left three times at once expects to land three turns back,
whether or not the recording had been read when the keys arrived. Before the first turn (or the turn
asked for with `--turn`) is shown there is nothing to step from, so the app holds such steps here and
plays them, in order, right after that turn is shown. If the load ends with nothing to show, they are
dropped: there was nothing to step through.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

# Enough for any burst a person types while a recording opens; a key held down on a slow start beyond
# this keeps the newest steps (a deque drops from the far end).
MAX_HELD = 64


class EarlySteps:
    """The steps asked for while the start turn is not on screen yet, then played once it is."""

    def __init__(self) -> None:
        self._held: deque[Callable[[], None]] = deque(maxlen=MAX_HELD)
        self.waiting = True  # until the start turn is shown, or the load ends without one

    def run_or_hold(self, step: Callable[[], None]) -> None:
        if self.waiting:
            self._held.append(step)
        else:
            step()

    def start_shown(self) -> None:
        """The start turn is on screen: the held steps run now, in the order they were asked for."""
        self.waiting = False
        while self._held:
            self._held.popleft()()

    def nothing_to_show(self) -> None:
        """The load ended with no turn: the held steps had nothing to step through."""
        self.waiting = False
        self._held.clear()

    def __len__(self) -> int:
        return len(self._held)
