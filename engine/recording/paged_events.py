"""A recording's journal as a sequence whose events stay in the file: a replay's `events`, paged.

A replay holds its journal for random access (the fold starts again from a checkpoint, the request view
reads a turn's usage). Its texts and traces already stayed in the file (text_window.py), but every other
event was held decoded: ~4.3 KB a turn (messages, parts, requests, usage), 52 MB over 12,000 turns. The
events are in the file, in frames the reader reaches by offset (a version-2 chunk holds a turn's events).
So `PagedEvents` holds, per frame read, its offset and the index of its first event (16 bytes), and the
held form of the events of the frames used last (PAGES of them): the fold that follows the reader's
read-ahead finds the frames it just read there, and a fold from a checkpoint reads its frames through the
text window's reader, in order (one decompression a chunk, its stream read on from the one before).

`held` makes an event's held form from (frame offset, event) as the reader decodes it (a text as a
LazyBlob, a trace as a LazyTurn: see FileSource._held); it must not take the window's lock, which a
page read holds. Iterating reads the pages in order and keeps none beyond the recent ones.
"""

from __future__ import annotations

import threading
from array import array
from bisect import bisect_left, bisect_right
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, overload

from engine.recording.spill_file import same_items
from engine.recording.text_window import TextWindow

Event = dict[str, Any]

# Frames whose events are kept decoded: the read-ahead's lead and a little more (a frame is a turn).
PAGES = 160


class PagedEvents(Sequence[Event]):
    paged = True  # what Replayer looks for: a sequence that grows by itself (see Replayer.extend)

    def __init__(self, window: TextWindow, held: Callable[[int, Event], Event], pages: int = PAGES) -> None:
        self._window = window
        self._held = held
        self.pages = pages
        self._frames = array("q")  # offset of each frame read, in order
        self._firsts = array("q")  # index of its first event
        self._n = 0
        self._recent: OrderedDict[int, list[Event]] = OrderedDict()  # frame slot -> held events
        # Frames read but not yet asked for (the read-ahead, or all of a jump's): kept until their first
        # read, the fold's, which follows at once (let go at once, a jump to turn 6,000 of a 12,000-turn
        # recording read each of them from the file again: ~1.5x its CPU). Then they go to `_recent`.
        self._ahead: dict[int, list[Event]] = {}
        # (event index, turn, spill failures) of each request event: what Replayer indexes (without
        # reading every page again) and what turn_span finds a turn's events by.
        self.requests: list[tuple[int, Any, Any]] = []
        self.page_reads = 0  # pages read from the file again (not recent), for tests and benchmarks
        self.kinds: set[str] = set()  # the kinds of event seen (the request view asks for "actual")
        self._lock = threading.Lock()  # the recent pages (a fold and the reader's read-ahead on two threads)

    def extend_frames(self, frames: Iterable[tuple[int, Event]]) -> None:
        """Add the events the reader hands out as (frame offset, event), in file order."""
        page: list[Event] | None = None
        frames_at = self._frames
        for at, ev in frames:
            if page is None or at != frames_at[-1]:
                frames_at.append(at)
                self._firsts.append(self._n)
                page = []
                with self._lock:
                    self._ahead[len(frames_at) - 1] = page
            k = ev.get("k")
            if isinstance(k, str):
                self.kinds.add(k)
            if k == "request":
                failures = ev.get("spill_failures", ())
                self.requests.append((self._n, ev.get("turn"), () if failures == [] else failures))
            page.append(self._held(at, ev))
            self._n += 1

    def _keep(self, slot: int, page: list[Event]) -> None:
        with self._lock:
            recent = self._recent
            recent[slot] = page
            recent.move_to_end(slot)
            while len(recent) > self.pages:
                recent.popitem(last=False)

    def _page(self, slot: int) -> list[Event]:
        with self._lock:
            page = self._ahead.pop(slot, None)
            if page is None:
                page = self._recent.get(slot)
                if page is not None:
                    self._recent.move_to_end(slot)
                    return page
        if page is not None:
            self._keep(slot, page)
            return page
        with self._lock:
            page = self._recent.get(slot)
            if page is not None:
                self._recent.move_to_end(slot)
                return page
        at = self._frames[slot]
        page = [self._held(at, ev) for ev in self._window.frame_events(at)]
        want = (self._firsts[slot + 1] if slot + 1 < len(self._firsts) else self._n) - self._firsts[slot]
        if len(page) != want:
            from engine.recording.cpsession import RecordingError

            raise RecordingError(
                f"{self._window.path}: the frame at offset {at} holds {len(page)} events, not the {want} read "
                "there before: the file was changed or replaced while it was open; open it again"
            )
        self.page_reads += 1
        self._keep(slot, page)
        return page

    def request_marks(self, start: int) -> list[tuple[int, Any, Any]]:
        """(event index, turn, spill failures) of the request events from index `start` on."""
        return self.requests[bisect_left(self.requests, (start,)) :]

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, i: int) -> Event: ...

    @overload
    def __getitem__(self, i: slice) -> list[Event]: ...

    def __getitem__(self, i: int | slice) -> Event | list[Event]:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(self._n))]
        if i < 0:
            i += self._n
        if not 0 <= i < self._n:
            raise IndexError("event index out of range")
        slot = bisect_right(self._firsts, i) - 1
        return self._page(slot)[i - self._firsts[slot]]

    def __iter__(self) -> Iterator[Event]:
        for slot in range(len(self._frames)):
            yield from self._page(slot)

    def __eq__(self, other: object) -> bool:
        return same_items(self, other)  # as the list it replaces: equal to a sequence of equal events

    __hash__ = None  # type: ignore[assignment]  # it grows, like the list it replaces

    def upto(self, stop: int) -> Iterator[Event]:
        """The events before index `stop`, in order."""
        for slot in range(len(self._frames)):
            if self._firsts[slot] >= stop:
                return
            page = self._page(slot)
            yield from page[: stop - self._firsts[slot]]


def turn_span(events: Sequence[Event], request_index: dict[int, int], turn: int) -> Sequence[Event]:
    """The events from turn `turn`'s request to the next turn's (its usage, error and turn events)."""
    start = request_index.get(turn)
    if start is None:
        return ()
    nxt = request_index.get(turn + 1, len(events))
    return events[start:nxt]
