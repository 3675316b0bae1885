"""The content search as the person drives it (InspectorApp.search_bar): `/`'s prompt, `f`/`F` seeking
the next or previous turn the text enters or leaves the prompt, the bar under the panels saying how far
the search has come and what it found, and Esc stopping it or putting it away. The scan itself runs in
a worker (search_runner.SearchRunner, InspectorApp.search).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from inspector.app import InspectorApp


from inspector.content_search import LEAVES, describe
from inspector.screens import SearchScreen
from inspector.search_runner import SearchDone, SearchProgress
from panels.markup_line import MarkupLine


class SearchBar:
    def __init__(self, app: InspectorApp) -> None:
        self.app = app

    def open(self) -> None:
        app = self.app
        if not len(app.timeline):
            return
        scan = app.search.scan

        def done(query: str | None) -> None:
            if not query:
                return
            if scan is None or query != scan.query:
                app.search.start(query)
                self.viewer_query(query.lower())
            self.seek(1, inclusive=scan is None or query != scan.query)

        app.push_screen(SearchScreen(scan.query if scan is not None else ""), done)

    def find(self, direction: int) -> None:
        app = self.app
        if app.search.scan is None:
            app.notify("no search yet: press / to search what each turn sent", timeout=3)
            return
        self.seek(direction)

    def seek(self, direction: int, inclusive: bool = False) -> None:
        app = self.app
        turns = [t["turn"] for t in app.timeline.traces]
        origin = max(app.index, 0)  # (F at the first turn wraps to the last change: SearchDone.wrapped)
        app.search.seek(direction, origin, turns, inclusive)
        scan = app.search.scan
        assert scan is not None
        if scan.scanned < (len(turns) if direction > 0 else origin):
            self.show(
                f"searching turn {turns[min(scan.scanned, len(turns) - 1)]:,} "
                f"({scan.scanned + 1:,} of {len(turns):,})…  Esc stops"
            )

    def viewer_query(self, needle: str) -> None:
        app = self.app
        assert app.viewer is not None
        app.viewer.set_query(needle)

    def show(self, text: str) -> None:
        app = self.app
        scan = app.search.scan
        bar = app.query_one("#search-bar", MarkupLine)
        if scan is None:
            bar.display = False
            return
        bar.update([("/", "bold $accent"), (scan.query, "bold"), ("  ", ""), (text, "")])
        bar.display = True

    def progress(self, message: SearchProgress) -> None:
        app = self.app
        scan = app.search.scan
        if scan is None or message.query != scan.query or not app.search.running:
            return
        self.show(
            f"searching turn {message.turn:,} ({message.position + 1:,} of {message.total:,})…  Esc stops"
        )

    def done(self, message: SearchDone) -> None:
        app = self.app
        scan = app.search.scan
        if scan is None or message.query != scan.query:
            return
        app.search.running = False
        change = message.change
        keys = "  ·  f next, F previous, Esc clears"
        if change is None:  # (a search that meets the end wraps: none at all, then)
            where = (
                f"turns {app.timeline.traces[0]['turn']:,}–{app.timeline.traces[message.scanned - 1]['turn']:,}"
                if message.scanned
                else "no turns"
            )
            unread = f"; {scan.unreadable} turns could not be read" if scan.unreadable else ""
            self.show(f"not found in what {where} sent{unread}")
            return
        # Wrapped all the way round to the turn it started from: there is no other (`f` at the only change
        # said the same "search wrapped to turn 0 · turn 0: ..." again and again, as if it had moved).
        only = message.wrapped and change.index == app.index and message.scanned == len(app.timeline)
        app.go(app.timeline.go(change.index))
        if change.kind != LEAVES:
            app.manifest.select(change.section)
            assert app.viewer is not None
            trace = app.timeline.traces[change.index]
            app.viewer.reveal_when_shown(f"{change.section} · turn {trace['turn']} ·")
        if only:
            self.show(
                f"turn {change.turn:,} is the only turn it enters or leaves the prompt: "
                f"{describe(change, scan.query)}  ·  Esc clears"
            )
            return
        wrapped = ""
        if message.wrapped:  # as `less` says it: the end was met, the search went on from the other end
            # After what was found, and saying why: "search wrapped to turn 0 · turn 11: ..." read as
            # two answers, and at 80 columns cut what was found short.
            origin = app.timeline.traces[message.origin]["turn"]
            if message.direction < 0:
                wrapped = f"  ·  wrapped: none before turn {origin:,}"
            elif message.inclusive:
                wrapped = f"  ·  wrapped: none from turn {origin:,} on"
            else:
                wrapped = f"  ·  wrapped: none after turn {origin:,}"
        self.show(f"turn {change.turn:,}: {describe(change, scan.query)}{wrapped}{keys}")

    def escape(self) -> None:
        app = self.app
        if app.search.running:
            app.search.cancel()
            at = min(app.search.at, len(app.timeline) - 1)
            self.show(
                f"stopped at turn {app.timeline.traces[at]['turn']:,} ({at + 1:,} of "
                f"{len(app.timeline):,})  ·  f goes on, Esc clears"
            )
            return
        app.search.clear()
        self.viewer_query("")
        app.manifest.set_marked(frozenset())
        self.show("")
