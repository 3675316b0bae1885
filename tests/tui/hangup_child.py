"""An app on the inspector's terminal driver, drawing all the time, for tests/tui/test_terminal_driver.py.

    python -m tests.tui.hangup_child RESULT.json hangup|cont|tstp

It runs on the terminal it was started on (a pty the test holds) and redraws a counter every 10 ms, so
it writes to the terminal continuously. `hangup`: it handles SIGHUP as `cp-inspect run` does (the app
is asked to exit, from its own loop) but only after 100 more frames, so it keeps writing to the
terminal the test closed. `cont`: it sends itself SIGCONT (what the kernel sends with a hangup, and
`kill -CONT`), then exits after 20 more frames. `tstp`: it suspends itself as Ctrl-Z would (SIGTSTP;
the test continues it), then exits after 20 more frames. After the app has returned, RESULT.json says which
Textual threads are still alive, whether the driver saw the terminal go, and how many frames came after.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import threading
from typing import Any

from textual.app import App, ComposeResult
from textual.driver import Driver
from textual.widgets import Static

from inspector.terminal_driver import TerminalDriver, driver_for

MORE_FRAMES = {"hangup": 100, "cont": 20, "tstp": 20}


class Drawing(App[None]):
    def __init__(self, mode: str) -> None:
        super().__init__()
        self.mode = mode
        self.ticks = 0
        self.signalled = False  # SIGHUP arrived (hangup), or SIGCONT was sent (cont)
        self.after = 0  # frames drawn since
        self.driver_used: Driver | None = None

    def get_driver_class(self) -> type[Driver]:
        return driver_for(super().get_driver_class())  # as InspectorApp and TopApp do

    def compose(self) -> ComposeResult:
        yield Static("tick 0", id="tick")

    def on_mount(self) -> None:
        self.driver_used = self._driver
        self.set_interval(0.01, self.tick)

    def tick(self) -> None:
        self.ticks += 1
        self.query_one("#tick", Static).update(f"tick {self.ticks}")
        if self.mode in ("cont", "tstp") and self.ticks == 10:
            self.signalled = True
            os.kill(os.getpid(), signal.SIGCONT if self.mode == "cont" else signal.SIGTSTP)
        if self.signalled:
            self.after += 1
            if self.after >= MORE_FRAMES[self.mode]:
                self.exit()

    def hung_up(self) -> None:  # on the app's loop
        self.signalled = True


def main() -> int:
    result, mode = sys.argv[1], sys.argv[2]
    app = Drawing(mode)

    def on_hup(_signum: int, _frame: Any) -> None:
        loop = asyncio._get_running_loop()  # the app's (signal handlers run on the main thread)
        if loop is not None:
            loop.call_soon_threadsafe(app.hung_up)

    signal.signal(signal.SIGHUP, on_hup)
    app.run()
    driver = app.driver_used
    report = {
        "textual_threads": sorted(t.name for t in threading.enumerate() if t.name.startswith("textual-")),
        "terminal_gone": driver.terminal_gone if isinstance(driver, TerminalDriver) else None,
        "frames_after": app.after,
    }
    with open(result, "w") as f:
        json.dump(report, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
