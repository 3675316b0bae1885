"""`s` in a live session (InspectorApp.saving): the prompt for where, and the turns received so far
written there in a worker, the status line told how many the file holds.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from inspector.app import InspectorApp


from engine.errors import ContextPipeError
from engine.wording import counted
from inspector.screens import SaveScreen


class SessionSave:
    def __init__(self, app: InspectorApp) -> None:
        self.app = app

    def prompt(self) -> None:
        app = self.app
        pid = app.source.header.get("pid", "session")
        if app.source.header.get("session") is not None:  # one conversation of several: its own name
            pid = f"{pid}.{app.source.header['session']}"
        app.push_screen(
            SaveScreen(f"cp-{pid}.cpsession", len(app.timeline), still_arriving=app.disconnected is None),
            self.save_to,
        )

    def save_to(self, path: str | None) -> None:
        if path:
            # Said as the absolute path: the prompt offers a bare file name (cp-PID.cpsession), and "saved
            # to cp-PID.cpsession" left the person to guess which directory the inspector was started in.
            self.worker(os.path.abspath(path))

    def worker(self, path: str) -> None:
        # What the save holds: the turns received by the time it is written; the status says the count
        # the source wrote (the timeline's, read when the path was given, could be a turn short of the
        # file: turns go on arriving), so a save made while the agent ran is not taken for all of it later.
        app = self.app

        def saved(turns: int) -> None:
            app.saved_turns = turns  # (before saved_to, whose watcher redraws the status)
            app.saved_to = path

        def work() -> None:
            try:
                turns = app.source.save(path)
            except (
                OSError,
                ContextPipeError,
            ) as exc:  # (a live session whose agent is gone: what is missing)
                app.call_from_thread(
                    app.notify, f"could not save to {path}: {exc}", severity="error", markup=False
                )
                return
            app.call_from_thread(app.notify, f"saved {counted(turns, 'turn')} to {path}", markup=False)
            app.call_from_thread(saved, turns)

        app.run_worker(work, thread=True, group="save", exit_on_error=False)
