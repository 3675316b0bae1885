"""Content search off the UI thread (`/`, `f`, `F`): a worker scans the session's turns in order for the
query (inspector/content_search.py) as far as the jump asked for needs, saying how far it has come; a
newer jump or Esc cancels it between two turns, and what it scanned is kept for the next jump. A jump
that meets the end wraps, as `less` and editors do: `/` or `f` with no change after the shown turn goes
to the first change of the session, `F` with none before it to the last (SearchDone.wrapped); `/` at the
newest turn of a live agent or the last of a recording found nothing before (forward only).

Live, the scan covers the turns received when the jump was asked for, read in one pass over the journal
received (content_search.JournalStream); a later jump goes on over the turns that arrived since, from
where the pass stopped."""

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


class SearchRunner:
    def __init__(self, app: App[None], source: Source) -> None:
        self.app, self.source = app, source
        self.scan: ContentScan | None = None
        self.running = False
        self.at = 0  # the timeline position the running scan is on (for "stopped at")

    def start(self, query: str) -> ContentScan:
        """A new query: what the last one scanned is let go, and its pass starts again from turn 0.

        Not reused, measured: what a pass pays for is each turn's build (the fold and the request built
        in place), and what a different text needs of it is every turn's section texts, which are not
        kept. The history section is new every turn, so the distinct texts grow with the square of the
        session: 144.5 MB for whatif_1500's 1,500 turns (6.7 MB for pyd's 93), where building them again
        costs 0.37 ms a turn (0.56 s CPU for all 1,500; 0.29 ms a turn on cp-bench-tui-10000's first
        2,000, 0.83 on pyd, 1.92 on the demo). Keeping the stream's pipeline at where the last pass
        stopped does not help either: the new text's counts for the turns before it need those texts."""
        self.cancel()
        self.close()
        self.scan = ContentScan(query, self.source)  # its own reader is opened by the first jump's worker
        return self.scan

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
                SearchDone(scan.query, direction, origin, change, scan.scanned, len(turns), wrapped)
            )

        self.app.run_worker(work, thread=True, exclusive=True, group="search", exit_on_error=False)
