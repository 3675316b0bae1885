"""Section content and request bodies, built by the source's embedded engine in a worker that a newer
step cancels, so held-down arrow keys never queue up work for turns the person has already left."""

from __future__ import annotations

import time
from collections.abc import Callable

from rich.style import Style
from textual.app import App
from textual.worker import get_current_worker

from engine.trace_schema import Trace
from inspector.messages import ContentLoaded
from inspector.sources import Source
from panels.content_viewer import prerender
from panels.text_document import TextDocument, prepare

CONTENT_DEBOUNCE_S = 0.08  # steps closer together than this are a held key: fetch content once it stops


class ContentLoader:
    def __init__(self, app: App[None], source: Source, width: Callable[[], int],
                 screen: Callable[[], tuple[int, Style] | None]) -> None:
        self.app, self.source = app, source
        self.width = width  # the content view's wrap width, read on the UI thread
        self.screen = screen  # (rows shown, base style) of the content view, or None
        self.show_request = False  # the Content tab shows the request body instead of a section
        self._last_step = 0.0
        self._last: TextDocument | None = None  # the last document prepared (by a worker)

    def load(self, trace: Trace, section_id: str | None, stepping: bool = False) -> None:
        now = time.monotonic()
        wait = CONTENT_DEBOUNCE_S if stepping and now - self._last_step < CONTENT_DEBOUNCE_S else 0.0
        if stepping:
            self._last_step = now
        turn = trace["turn"]
        if self.show_request:
            self._fetch(turn, None, f"request body · turn {turn}", wait, None)
        elif section_id is not None:
            title, key = self.section_title(trace, section_id)
            self._fetch(turn, section_id, title, wait, key)

    @staticmethod
    def section_title(trace: Trace, section_id: str) -> tuple[str, tuple[str, str]]:
        """The viewer's title for a section of this turn, and the key of its text: (id, content hash).
        Two turns whose section has the same key show the same text."""
        section = next((s for s in trace["sections"] if s["id"] == section_id), None)
        form, sha = (section["form"], section["sha256"]) if section is not None else ("", "")
        return f"{section_id} · turn {trace['turn']} · {form}", (section_id, sha)

    def _fetch(self, turn: int, section_id: str | None, title: str, wait: float,
               key: tuple[str, str] | None) -> None:
        # read on the UI thread
        dark, width, screen, console = self.app.current_theme.dark, self.width(), self.screen(), self.app.console

        def work() -> None:
            worker = get_current_worker()
            if wait:
                time.sleep(wait)
                if worker.is_cancelled:
                    return
            text = (self.source.request_body(turn) if section_id is None
                    else self.source.section_content(turn, section_id))
            if worker.is_cancelled:
                return
            last = self._last  # stepping past a section whose text did not change (tools): reuse it
            if last is not None and (last.text, last.dark, last.width) == (text, dark, width):
                document = last
            else:
                document = self._last = prepare(text, dark, width)
                if screen is not None and not worker.is_cancelled:
                    prerender(document, screen[0], screen[1], console)
            if not worker.is_cancelled:
                self.app.post_message(ContentLoaded(title, text, document, dark, key))

        self.app.run_worker(work, thread=True, exclusive=True, group="content", exit_on_error=False)
