"""Content search off the UI thread (`/`, `f`, `F`): a worker scans the session's turns in order for the
query (inspector/content_search.py) as far as the jump asked for needs, saying how far it has come; a
newer jump or Esc cancels it between two turns, and what it scanned is kept for the next jump. A jump
that meets the end wraps, as `less` and editors do: `/` or `f` with no change after the shown turn goes
to the first change of the session, `F` with none before it to the last (SearchDone.wrapped); `/` at the
newest turn of a live agent or the last of a recording found nothing before (forward only).

Live, the scan covers the turns received when the jump was asked for, read in one pass over the journal
received (content_search.JournalStream); attached as `attach` attaches, that stream is the source's own,
fed the builds its fold makes for the turns' traces from the first turn on (content_search.arrival_index:
the first `/` builds no turn, it counts), kept across queries and Esc; following an agent's recording,
the follower's thread indexes each turn as it reads it (inspector/followed_search.py). Otherwise a later jump goes on over
the turns that arrived since, from where the pass stopped, taking those the source's own fold built as
they arrived (one build a turn, not two), and Esc that clears the search lets go of the pass."""

from __future__ import annotations

import time
from dataclasses import dataclass

from textual.app import App
from textual.message import Message
from textual.worker import get_current_worker

from inspector.content_search import Change, ContentScan
from inspector.sources import Source

PROGRESS_EVERY_S = 0.1  # how often a running scan says which turn it is on


@dataclass
class SearchProgress(Message):
    """The scan for `query` is at timeline position `position` of `total`."""

    query: str
    position: int
    turn: int
    total: int


@dataclass
class SearchDone(Message):
    """A jump's answer: the change found (None: none that way), from timeline position `origin` in
    `direction` (+1 later, -1 earlier), with `scanned` positions of `total` searched."""

    query: str
    direction: int
    origin: int
    change: Change | None
    scanned: int
    total: int
    wrapped: bool = False  # none that way: `change` is the first (forward) or last (backward) of all
    inclusive: bool = False  # the shown turn itself was searched too (a new query's first jump)


class SearchRunner:
    def __init__(self, app: App[None], source: Source) -> None:
        self.app, self.source = app, source
        self.scan: ContentScan | None = None
        self.running = False
        self.at = 0  # the timeline position the running scan is on (for "stopped at")

    def start(self, query: str) -> ContentScan:
        """A new query: it goes on with the last one's stream (ContentScan.take_stream: the turns that
        pass built are counted again from the items it kept, not built again; a new text's pass over
        whatif_1500 went from turn 0 building every turn), what the last one found is let go."""
        self.cancel()
        scan = ContentScan(query, self.source)  # its own reader is opened by the first jump's worker
        if self.scan is not None:
            scan.take_stream(self.scan)
        self.close()
        self.scan = scan
        return scan

    def clear(self) -> None:
        self.cancel()
        self.close()
        self.scan = None

    def cancel(self) -> None:
        self.app.workers.cancel_group(self.app, "search")
        self.running = False

    def close(self) -> None:
        if self.scan is not None:
            self.scan.close()

    def seek(self, direction: int, origin: int, turns: list[int], inclusive: bool = False) -> None:
        """Find the next (`direction` +1) or previous (-1) change from timeline position `origin` over
        the turn numbers `turns`; the answer comes as SearchDone."""
        scan = self.scan
        assert scan is not None
        self.app.workers.cancel_group(self.app, "search")
        self.running, self.at = True, scan.scanned
        app = self.app

        def found() -> bool:
            if direction > 0:
                last = scan.changes[-1].index if scan.changes else -1
                return last > origin or (inclusive and last == origin)
            return scan.scanned >= origin  # every position before it is scanned

        def work() -> None:
            worker = get_current_worker()
            if not scan.counts and not scan.opened:
                scan.opened = True
                scan.open_for(self.source)
            said = [0.0]

            def progress(position: int) -> None:
                self.at = position
                now = time.monotonic()
                if now - said[0] >= PROGRESS_EVERY_S:
                    said[0] = now
                    app.post_message(SearchProgress(scan.query, position, turns[position], len(turns)))

            scan.scan_to(turns, lambda: worker.is_cancelled, progress, found)
            if worker.is_cancelled:
                return
            if direction > 0:
                change = scan.next_change(origin, inclusive)  # (None: every turn is scanned, see found)
                wrapped = change is None and bool(scan.changes)
                if wrapped:
                    change = scan.changes[0]
            else:
                change = scan.prev_change(origin)
                if change is None:  # wrap: the last change of all, past the shown turn
                    scan.scan_to(turns, lambda: worker.is_cancelled, progress)
                    if worker.is_cancelled:
                        return
                wrapped = change is None and bool(scan.changes)
                if wrapped:
                    change = scan.changes[-1]
            app.post_message(
                SearchDone(
                    scan.query, direction, origin, change, scan.scanned, len(turns), wrapped, inclusive
                )
            )

        self.app.run_worker(work, thread=True, exclusive=True, group="search", exit_on_error=False)
