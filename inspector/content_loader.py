"""Section content and request bodies, built by the source's embedded engine in a worker that a newer
step cancels, so held-down arrow keys never queue up work for turns the person has already left.

While the person looks at a turn, the same worker prepares the selected section of the next turn in
the direction they step (text, split and wrapped, first screenful drawn): a step onto it shows that
document in the step's own frame, with no second frame when the worker's result would arrive. The
documents of the last few turns shown or prepared are kept (stepping back is immediate as well)."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable

from textual.app import App
from textual.worker import get_current_worker

from engine.trace_schema import Trace
from inspector.messages import ContentLoaded
from inspector.sources import FoldCancelled, Source
from panels.content_viewer import Screenful, prerender
from panels.text_document import TextDocument, prepare

CONTENT_DEBOUNCE_S = 0.08  # steps closer together than this are a held key: fetch content once it stops
KEPT_DOCUMENTS = 4  # prepared section documents kept: the turn shown, the next, the previous, one more

# (turn, section id, dark theme, wrap width): what a prepared document is for.
DocumentKey = tuple[int, str, bool, int]


class ContentLoader:
    def __init__(self, app: App[None], source: Source, width: Callable[[], int],
                 screen: Callable[[], Screenful | None]) -> None:
        self.app, self.source = app, source
        self.width = width  # the content view's wrap width, read on the UI thread
        self.screen = screen  # what drawing the content view's first rows needs, or None
        self.show_request = False  # the Content tab shows the request body instead of a section
        self._last_step = 0.0
        self.wanted: str | None = None  # the title of the content last asked for (UI thread)
        self._last: TextDocument | None = None  # the last document prepared (by a worker)
        # Written by the worker, read on the UI thread: the lock keeps the eviction and the reads apart.
        self._kept: OrderedDict[DocumentKey, tuple[str, TextDocument]] = OrderedDict()
        self._kept_lock = threading.Lock()

    def prepared(self, turn: int, section_id: str) -> tuple[str, TextDocument] | None:
        """The text and document of this turn's section if a worker has prepared them for the current
        theme and width (the step can show them at once), else None."""
        key = (turn, section_id, self.app.current_theme.dark, self.width())
        with self._kept_lock:
            found = self._kept.get(key)
            if found is not None:
                self._kept.move_to_end(key)
            return found

    def _has(self, key: DocumentKey) -> bool:
        with self._kept_lock:
            return key in self._kept

    def _keep(self, key: DocumentKey, text: str, document: TextDocument) -> None:
        with self._kept_lock:
            self._kept[key] = (text, document)
            self._kept.move_to_end(key)
            while len(self._kept) > KEPT_DOCUMENTS:
                self._kept.popitem(last=False)

    def load(self, trace: Trace, section_id: str | None, stepping: bool = False, ahead: int | None = None,
             shown: bool = False) -> None:
        """Fetch this turn's content (unless `shown`: the step showed a prepared document), then prepare
        turn `ahead` (the next one in the direction of the steps; None: none)."""
        now = time.monotonic()
        wait = CONTENT_DEBOUNCE_S if stepping and now - self._last_step < CONTENT_DEBOUNCE_S else 0.0
        if stepping:
            self._last_step = now
        turn = trace["turn"]
        if self.show_request:
            self.wanted = f"request body · turn {turn}"
            self._fetch(turn, None, self.wanted, wait, None)
        elif section_id is not None:
            self.wanted, key = self.section_title(trace, section_id)
            self._fetch(turn, section_id, self.wanted, wait, key, ahead, shown, self.section_note(trace, section_id))

    @staticmethod
    def section_title(trace: Trace, section_id: str) -> tuple[str, tuple[str, str]]:
        """The viewer's title for a section of this turn, and the key of its text: (id, content hash).
        Two turns whose section has the same key show the same text."""
        section = next((s for s in trace["sections"] if s["id"] == section_id), None)
        form, sha = (section["form"], section["sha256"]) if section is not None else ("", "")
        return f"{section_id} · turn {trace['turn']} · {form}", (section_id, sha)

    @staticmethod
    def section_note(trace: Trace, section_id: str) -> str:
        """What the trace says of this section beyond its figures (why it was sent as it was: a degraded
        binder, an empty message Bedrock got as text), "" when nothing. Shown under the content's title."""
        section = next((s for s in trace["sections"] if s["id"] == section_id), None)
        return str(section.get("note") or "") if section is not None else ""

    def _fetch(self, turn: int, section_id: str | None, title: str, wait: float,
               key: tuple[str, str] | None, ahead: int | None = None, shown: bool = False,
               note: str = "") -> None:
        # read on the UI thread
        dark, width, screen, console = self.app.current_theme.dark, self.width(), self.screen(), self.app.console

        def document_for(text: str) -> TextDocument:
            last = self._last  # stepping past a section whose text did not change (tools): reuse it
            if last is not None and (last.text, last.dark, last.width) == (text, dark, width):
                return last
            document = prepare(text, dark, width)
            if screen is not None:
                prerender(document, screen, console)
            # Offered for reuse only once drawn: its highlighter is not thread-safe, and a newer worker
            # (a step onto the turn being prepared) would hand it to the UI while this one still lexes.
            self._last = document
            return document

        def work() -> None:
            worker = get_current_worker()
            if wait:
                time.sleep(wait)
                if worker.is_cancelled:
                    return
            if not shown:
                try:
                    text = (self.source.request_body(turn) if section_id is None
                            else self.source.section_content(turn, section_id))
                except FoldCancelled:  # a newer step replaced this worker mid-fold: nothing to show
                    return
                if worker.is_cancelled:
                    return
                document = document_for(text)
                if section_id is not None:
                    self._keep((turn, section_id, dark, width), text, document)
                if worker.is_cancelled:
                    return
                self.app.post_message(ContentLoaded(title, text, document, dark, key, note))
            if ahead is None or section_id is None or self._has((ahead, section_id, dark, width)):
                return
            # The person is looking at this turn: prepare the next one they would step to.
            try:
                text = self.source.section_content(ahead, section_id)
                if not worker.is_cancelled:  # a newer step: what it asks for comes first
                    self._keep((ahead, section_id, dark, width), text, document_for(text))
            except Exception:  # ahead of the person: a step onto that turn fetches it and says why
                return

        self.app.run_worker(work, thread=True, exclusive=True, group="content", exit_on_error=False)
