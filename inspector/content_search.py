"""Search over what a session sent: on which turn a text entered the prompt, and when it left.

A turn's sent content is its sections as the Content tab shows them (the engine's build of the turn,
section by section; a dropped section was not sent). Counting a query's case-insensitive occurrences in
each turn's sections, turn by turn from the first, gives the turns where the count *rises* (the text
entered the prompt, or came again: a new tool result that names it) and where it *falls to none* (it
left the prompt: compacted, dropped, cut). Those are the turns a person asks for ("when did the agent
first see X", "when did rule Y leave the prompt"); every turn after the first sight holds the text too
while the history keeps it, so "the next turn that contains X" is merely the next turn.

The scan reads each turn once, in order, as far as an answer needs (a jump to the next change stops at
it); a section whose text is the same as one already counted (same id, hash, form and size) is not read
again. A recording is scanned in one pass of its own (`SentStream`: its journal folded and each request
built in place, as `verify` does), so the scan neither moves the fold the app steps with nor pays a
re-plan per turn; a live agent's journal as received the same way (`JournalStream`), going on from where
it stopped as turns arrive (on the fold stream, those are the source's own fold's builds, handed over as
it makes them: JournalStream.take_fold_builds; attached as `attach` attaches, from the first turn on, so
the first query builds none: arrival_index); a new query goes on with the last one's stream, counting the turns it built
from the items it kept (`_Indexed`). A match is within one section's text (a text split across two is not found). No textual here: the app runs it in a worker (inspector/search_runner.py) and
`cp-inspect find` runs it in the foreground.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from inspector.sources import Source

if TYPE_CHECKING:
    from engine.pipeline import Built

ENTERS, LEAVES = "enters", "leaves"
SNIPPET_CHARS = 30  # characters either side of a match in a snippet
KNOWN_MAX = 20_000  # section texts whose counts are kept (cleared when full: a cache, not a record)


@dataclass(frozen=True)
class Change:
    """A turn where the query's occurrences rose (`ENTERS`) or fell to none (`LEAVES`). `section`: the
    section that gained the most (enters) or that held most of it the turn before (leaves); `count`
    and `before`: the occurrences in the whole turn now and the turn before."""

    index: int
    turn: int
    kind: str
    section: str
    count: int
    before: int


def scan_source(source: Source) -> Source:
    """The source a scan reads when it cannot stream (see SentStream): a recording's own reader (its fold
    cursor apart from the app's, which a scan from turn 0 would otherwise drag back and forth under a
    person stepping at turn 5,000), else the source itself (a live agent's journal is in memory; a
    followed file grows)."""
    from inspector.sources.file import FileSource

    if isinstance(source, FileSource) and not source.follow_file:
        return FileSource(source.path)
    return source


def stream_for(source: Source) -> SentStream | JournalStream | None:
    """A one-pass stream of the builds: a finished recording's (SentStream, a reader of its own), a
    followed recording's (RecordingStream, likewise) or a live agent's journal as read so far (JournalStream; the one the source
    keeps from attach, `search_index`, when it has one: see arrival_index); None for a source that
    keeps no journal (synthetic: read turn by turn)."""
    from inspector.sources.file import FileSource

    standing = getattr(source, "search_index", None)
    if isinstance(standing, JournalStream):
        return standing
    if isinstance(source, FileSource):
        if source.follow_file:  # (each request decided from a reader of its own: followed_search.py)
            from inspector.followed_search import RecordingStream

            return RecordingStream(source, source.path, standing=False)
        return SentStream(source.path)
    if (
        source.kind == "live"
        and hasattr(source, "replayer")
        and isinstance(getattr(source, "events", None), list)
    ):
        stream = JournalStream(source)
        stream.take_fold_builds()
        return stream
    return None


# A turn's sections sent: each section's id, and its items' numbers as the first `length` of a run (a
# list only ever appended to, shared by the turns over which that section only grew: see _Indexed).
Sections = tuple[tuple[str, list[int], int], ...]
# Per section id, the last turn's: its items, their numbers' run, how many of the run are that turn's.
_Last = dict[str, tuple[tuple[Any, ...], list[int], int]]


class _Indexed:
    """What a one-pass stream keeps of each turn it built, so that a new query goes over the turns an
    earlier one read without building them again: per turn, which items each section sent (numbers), and
    each item's text once. Items are shared from turn to turn (a message is the same object while the
    history keeps it): whatif_1500's 1,500 turns sent 99,171 items, 3,072 distinct, where the history
    section's text is new every turn (144.5 MB of distinct section texts, not kept). A section's text
    is its items' texts joined with a blank line (replaying.section_text), so a query without a line
    break, which cannot match across that, counts item by item: each distinct item once per query.

    A section that only grew since the turn before (the history, appended to) extends that turn's run of
    numbers in place and keeps its length: a tuple of every number a turn made the index O(N^2) in a
    session's turns, memory and time (a 1,000-turn history: ~1,500 numbers a turn copied and kept)."""

    def __init__(self) -> None:
        self.turns: dict[int, Sections] = {}
        self.numbers: dict[int, int] = {}  # id(item) -> its number
        self.kept: list[Any] = []  # the items by number (held, so that an id stays theirs)
        self.texts: list[str] = []  # their texts, lower-cased, by number
        self._last: _Last = {}  # section id -> the last turn's items, run, length
        # The same for the builds another fold hands in (`add`): its items are other objects than this
        # stream's, and one table for both made each turn of either miss the other's prefix.
        self._added_last: _Last = {}
        # `add` may run on another thread (a live source's fold) than the scan's worker: a turn is
        # indexed under this lock (item numbers are handed out in order).
        self._index_lock = threading.Lock()

    def build_of(self, turn: int) -> Built | None:
        raise NotImplementedError

    def close(self) -> None:
        """Let go of what the stream opened."""

    def add(self, turn: int, built: Built) -> None:
        """Turn `turn`'s build as another fold made it (a live source's own, `on_build`), indexed now:
        the build is not kept, and the stream need not make it again."""
        with self._index_lock:
            try:
                self.turns[turn] = self._sections(built, self._added_last)
            except Exception:
                # Called inside a live source's fold, which stops folding at an error it does not know:
                # a build this index cannot read is left out (a scan builds that turn itself).
                self._added_last.clear()

    def sections_of(self, turn: int) -> Sections | None:
        """Turn `turn`'s sections sent, as kept or built now (None: the stream cannot build it)."""
        got = self.turns.get(turn)
        if got is None:
            built = self.build_of(turn)
            if built is None:
                return None
            with self._index_lock:
                got = self.turns[turn] = self._sections(built, self._last)
        return got

    def section_text(self, turn: int, section_id: str) -> str | None:
        """A section's text as turn `turn` sent it (what the Content tab shows: its items' texts a blank
        line apart, as replaying.section_text joins them), from the items kept; None: not kept."""
        from inspector.sources.replaying import items_text

        for got, run, length in self.turns.get(turn, ()):
            if got == section_id:
                kept = self.kept
                return items_text([kept[n] for n in run[:length]])  # (one loop: an item at a time was ~3x)
        return None

    def _sections(self, built: Built, last: _Last) -> Sections:
        asm = {sec.id: sec for sec in built.asm}
        sent = (
            (s["id"], sec.items if (sec := asm.get(s["id"])) is not None else ())
            for s in built.trace.get("sections", [])
            if s.get("form") != "dropped"  # not in the request
        )
        return self._numbered(sent, last)

    def _numbered(self, sent: Iterable[tuple[str, tuple[Any, ...]]], last: _Last) -> Sections:
        """Each section sent, (id, its items), as the numbers of its items (each new item's text kept)."""
        from inspector.sources.replaying import item_text

        out: list[tuple[str, list[int], int]] = []
        for section_id, items in sent:
            # A section that only grew since the last turn (the history, appended to): the new items'
            # numbers go on that turn's run. Walking every item every turn made a pass over N turns
            # O(N^2) in Python steps (~0.3 us an item); the prefix is compared in C (identity first).
            before = last.get(section_id)
            start = 0
            run: list[int] = []
            if before is not None:
                was, run_was, length = before
                if len(items) >= len(was) and items[: len(was)] == was:
                    start = len(was)
                    # (The run is that turn's, unless another turn's numbers went on it since.)
                    run = run_was if len(run_was) == length else run_was[:length]
            numbers = self.numbers
            for it in items[start:]:
                n = numbers.get(id(it))
                if n is None:
                    text = item_text(it)
                    if text is None:
                        continue  # (shows nothing)
                    n = numbers[id(it)] = len(self.kept)
                    self.kept.append(it)
                    self.texts.append(text.lower())
                run.append(n)
            last[section_id] = (items, run, len(run))
            out.append((section_id, run, len(run)))
        return tuple(out)


class SentStream(_Indexed):
    """Each turn's build of a recording in turn order, made in one pass over its events as `cp-inspect
    verify` makes them (engine.recording.replay.Replayer.verify: the pipeline folds the journal and
    builds each request in place, and every build is the request the agent sent, hash for hash). The
    random access a stepping person needs (FileSource.section_content: a re-plan from the nearest folded
    state, with a deep copy of the pipeline) took ~2.5x the CPU a turn: 3,000 turns of whatif_6000 4.1 s
    against 1.9 s. Nothing of the journal is held; `builds` stops where the file does."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        from engine.recording.cpsession import RecordingReader
        from engine.recording.replay import Replayer

        self.reader = RecordingReader.open(path)

        def read() -> Iterator[dict[str, Any]]:
            return (ev for _, ev in self.reader.event_frames())

        replayer = Replayer.index_stream(read)  # the session event and the spill failures, first
        self.builds = self._builds(replayer, read())

    @staticmethod
    def _builds(replayer: Any, events: Iterator[dict[str, Any]]) -> Iterator[tuple[int, Built]]:
        pipe = replayer.new_pipeline()
        for ev in events:
            if ev.get("k") == "request":
                pipe.begin_request(ev["turn"])
                built = pipe.build(ev.get("bound", {}))
                pipe.traces.append(built.trace)
                yield ev["turn"], built
            pipe.fold(ev)

    def build_of(self, turn: int) -> Built | None:
        """Turn `turn`'s build, the stream read on to it (None: the stream is past it or ended)."""
        for got, built in self.builds:
            if got == turn:
                return built
            if got > turn:
                return None
        return None

    def close(self) -> None:
        self.reader.close()


class FoldIndex(_Indexed):
    """What each turn of a live agent sent, indexed from the builds the live source's own fold makes
    (inspector/sources/live_fold.py, `on_build`) as it makes them: `cp-inspect find PID` reads the
    journal through that fold, and a JournalStream over the same journal built every turn a second time
    (2,000 turns: 4,039 builds for 2,000 requests). A turn the fold did not build is read through the
    source, turn by turn (`build_of` builds nothing)."""

    def build_of(self, turn: int) -> Built | None:
        return None

    def close(self) -> None:
        """Nothing opened (the builds were the fold's)."""


def arrival_index() -> JournalStream:
    """A JournalStream made before its source (`attach`'s open_live: the source's `search_index`, its
    `source` set once the source is made), whose `add` the source's fold is handed from the first event
    (LiveSource's `on_build`): every turn the fold builds for its trace is indexed as it arrives, in the
    source's own reader thread, off the UI's. The first `/` then counts what the turns sent and builds
    none: hooked at the first `/` (take_fold_builds), the turns before it were built a second time in
    the stream's own pipeline (1,000 turns: ~0.6 ms a turn). Kept for the session, across queries and
    Esc (ContentScan does not close it); a recording follower's stream the same way, so the turns its
    live source folds after a fall-back are indexed too (RecordingFollower)."""
    return JournalStream(None, standing=True)


class JournalStream(_Indexed):
    """Each turn's build of a live agent's journal as received (inspector/sources/live.py's `events`, a
    list that grows) or of a followed recording's as read so far (FileSource's paged journal, which grows
    as the file does), in one pass as SentStream makes a finished recording's: a pipeline of its own folds the
    events in order and builds each request in place, and goes on from where it stopped when the next
    jump asks for turns that arrived since. Turn by turn (the source's section_content: a re-plan from
    the nearest folded state, a deep copy of the pipeline a turn) took ~4x the CPU. The events are the
    source's own (nothing copied); what the stream needs of a turn not received yet (an elided journal
    fetched by range, a summarized trace) the source fetches when `reach` asks its replayer for the
    last turn a scan goes to.

    A spill write the agent's run failed is failed by the stream's pipeline too (the build keeps the
    content, as the agent's did), from the request event that first lists it: a live session's failures
    arrive with its turns, and the stream's pipeline takes each as it comes to it. It was made again from
    the first event whenever the replayer had learned of a new one, and every turn built again (a spill
    write is tried only when its text first goes over the limit, and a failed one is listed then: the
    turns before never tried it, so their builds and the state they leave are the same either way)."""

    def __init__(self, source: Any, *, standing: bool = False) -> None:
        super().__init__()
        self.source = source  # a ReplayingSource: `events` and `replayer(turn)`
        # The source's own (arrival_index): shared by every query's scan, closed by none; a scan's worker
        # takes `scan_lock` while it reads the stream (a cancelled one may still be finishing a turn).
        self.standing = standing
        self.scan_lock = threading.Lock()
        self.pipe: Any = None
        self.fail_keys: frozenset[str] | None = None  # the spill writes the pipeline fails, as far as read
        self.at = 0  # events of `source.events` folded
        self._request: dict[str, Any] | None = None  # the last request built, folded at the next read
        self.past = -1  # the newest turn built
        self._hooked: Callable[[Callable[[int, Built], None] | None], None] | None = None

    def take_fold_builds(self) -> None:
        """A live source that folds the journal itself (LiveFoldStream.index_builds: the fold stream,
        `attach`'s): the turns its fold builds from now on are indexed from its builds (`add`), not
        built here a second time; the stream builds those it folded before (and any it could not build)
        as ever. Each turn that arrived after the first `/` was built twice (1,000 turns: 0.7 ms a turn
        for the fold and again for the search)."""
        hook = getattr(self.source, "index_builds", None)
        if callable(hook):
            hook(self.add)
            self._hooked = hook

    def reach(self, turn: int) -> None:
        """Before a scan to `turn`: the source holds its journal through it (fetching what it lacks), and
        the pipeline is made if it is not yet (failing the spill writes known to fail so far; the later
        ones are taken as their turns come, `_spill_failures`)."""
        replayer = self.source.replayer(turn)
        live = getattr(self.source, "reach_live", None)  # (a recording follower: see its reach_live)
        if callable(live):
            live(turn)
        if self.pipe is None:
            self.pipe, self.fail_keys = replayer.new_pipeline(), replayer.fail_keys

    def _spill_failures(self, ev: dict[str, Any]) -> None:
        """Before building request `ev`: the spill writes it lists as failed fail in the pipeline too."""
        listed = ev.get("spill_failures")
        if not listed:
            return
        keys = frozenset(str(f).split(":", 1)[0] for f in listed)
        known = self.fail_keys or frozenset()
        if not keys <= known:
            self.fail_keys = known | keys
            self.pipe.spill.fail_keys = self.fail_keys  # (the replay's MemorySpill: read at each write)

    def build_of(self, turn: int) -> Built | None:
        """Turn `turn`'s build, the journal read on to it (None: past it, or not received yet)."""
        if self.pipe is None:
            self.reach(turn)
        pipe, events = self.pipe, self.source.events
        if self._request is not None:
            pipe.fold(self._request)
            self._request = None
        while self.at < len(events):
            ev = events[self.at]
            self.at += 1
            k = ev.get("k")
            if k == "request":
                got = ev["turn"]
                self._spill_failures(ev)
                pipe.begin_request(got)
                built = pipe.build(ev.get("bound", {}))
                pipe.traces.append(built.trace)
                self._request, self.past = ev, got  # folded once the build is read (as SentStream's)
                if got >= turn:
                    return built if got == turn else None
                pipe.fold(ev)
                self._request = None
            elif k not in ("turn", "turn_deferred"):  # (a turn's trace: the build above stands for it)
                pipe.fold(ev)
        return None

    def close(self) -> None:
        """Nothing opened (the events are the source's); the source's fold no longer hands us its builds."""
        if self._hooked is not None:
            self._hooked(None)
            self._hooked = None


def count_in(text: str, needle: str) -> int:
    """Case-insensitive occurrences of `needle` (already lower-cased) in `text`."""
    return text.lower().count(needle) if needle else 0


def snippet(text: str, needle: str, last: bool = False) -> str:
    """One line around the first (or `last`) occurrence of `needle` in `text`, "" when there is none."""
    low = text.lower()
    at = low.rfind(needle) if last else low.find(needle)
    if at < 0 or not needle:
        return ""
    start, end = max(0, at - SNIPPET_CHARS), min(len(text), at + len(needle) + SNIPPET_CHARS)
    piece = " ".join(text[start:end].split())
    return ("…" if start else "") + piece + ("…" if end < len(text) else "")


class ContentScan:
    """The query's occurrences per turn, for the turns scanned so far (timeline positions 0..scanned-1).

    `scan_to` is called from one worker at a time (a newer one waits for the turn an older one is on:
    the lock); the UI reads `changes` and `counts` once the worker has said it is done."""

    def __init__(self, query: str, source: Source, stream: _Indexed | None = None) -> None:
        self.query = query
        self.needle = query.lower()
        self.source = source
        self.stream: _Indexed | None = stream  # the builds in one pass; None: the source's random access
        self.own_stream = True  # closed with the scan (not: handed on to the next query's, see take_stream)
        self._item_counts: dict[int, int] = {}  # the stream's item number -> occurrences
        self._totals: dict[str, tuple[list[int], int, int]] = {}  # section id -> its last run, length, count
        self.own_source = False  # `source` was opened for the scan (scan_source): closed with it
        self.opened = False  # open_for has run (the search runner's first jump)
        self.counts: list[dict[str, int]] = []  # per timeline position: section id -> occurrences
        self.changes: list[Change] = []
        self.unreadable = 0  # turns whose content could not be built (counted as the turn before)
        self.unreadable_why: str | None = None  # the first such turn's error (a corrupt frame, where)
        self._known: dict[tuple[Any, ...], int] = {}
        self._lock = threading.Lock()

    @property
    def scanned(self) -> int:
        return len(self.counts)

    def close(self) -> None:
        """Let go of what the scan opened (its stream, a reader of its own), never the app's source."""
        if self.stream is not None and self.own_stream:
            self.stream.close()
        if self.own_source:
            self.source.close()

    def take_stream(self, earlier: ContentScan) -> None:
        """A new query over the same source: go on with the earlier query's stream (the turns it built are
        counted from what the stream kept, not built again) and its lock (its worker, cancelled, may still
        be finishing a turn on the stream)."""
        stream = earlier.stream
        if isinstance(stream, JournalStream) and stream.standing:  # (the source's: see arrival_index)
            self.stream, self.opened, self._lock, self.own_stream = stream, True, stream.scan_lock, False
            return
        if stream is None or not earlier.own_stream:
            return
        self.stream, self.opened, self._lock = stream, True, earlier._lock
        earlier.own_stream = False

    def open_for(self, source: Source) -> None:
        """Before the first turn: stream a recording's builds, or read turns through a reader of its own."""
        try:
            self.stream = stream_for(source)
        except Exception:  # a recording the one-pass fold refuses (damaged): read it turn by turn
            self.stream = None
        if isinstance(self.stream, JournalStream) and self.stream.standing:
            self.own_stream = False  # (the source's, for the session: see arrival_index)
            self._lock = self.stream.scan_lock
        if self.stream is None:
            self.source = scan_source(source)
            self.own_source = self.source is not source

    def section_text(self, turn: int, section_id: str) -> str:
        """A section's text as turn `turn` sent it: from what the stream kept of the turn, else the
        source's (a re-plan of the turn: ~57 ms a turn at 1,000 turns of history, a snippet each)."""
        if self.stream is not None:
            got = self.stream.section_text(turn, section_id)
            if got is not None:
                return got
        return self.source.section_content(turn, section_id)

    def turn_counts(self, turn: int) -> dict[str, int]:
        """Occurrences per section in what turn `turn` sent (sections without any left out)."""
        stream = self.stream
        if stream is not None:
            try:
                sections = stream.sections_of(turn)
            except Exception:  # a damaged event: the rest is read turn by turn (and says what is wrong)
                if self.own_stream:
                    stream.close()
                self.stream = None
            else:
                if sections is not None:
                    return self._counted(stream, sections)
        trace = self.source.full_trace(turn)

        def text(section_id: str) -> str:
            return self.source.section_content(turn, section_id)

        out: dict[str, int] = {}
        for s in trace.get("sections", []):
            if s.get("form") == "dropped":
                continue  # not in the request
            key = (s["id"], s.get("sha256"), s.get("form"), s.get("tokens"))
            n = self._known.get(key)
            if n is None:
                n = count_in(text(s["id"]), self.needle)
                if len(self._known) >= KNOWN_MAX:
                    self._known.clear()
                self._known[key] = n
            if n:
                out[s["id"]] = n
        return out

    def _counted(self, stream: _Indexed, sections: Sections) -> dict[str, int]:
        texts, counts, needle = stream.texts, self._item_counts, self.needle
        out: dict[str, int] = {}
        for section_id, run, length in sections:
            if not needle:
                n = 0
            elif "\n" in needle:  # (it may span two items: the section's text, as the Content tab has it)
                n = "\n\n".join(texts[k] for k in run[:length]).count(needle)
            else:
                # A section that only grew since the last turn counted (the same run, longer): its count
                # then, and the new items'.
                n, start = 0, 0
                before = self._totals.get(section_id)
                if before is not None and before[0] is run and length >= before[1]:
                    n, start = before[2], before[1]
                for k in run[start:length]:
                    c = counts.get(k)
                    if c is None:
                        c = counts[k] = texts[k].count(needle)
                    n += c
                self._totals[section_id] = (run, length, n)
            if n:
                out[section_id] = n
        return out

    def scan_to(
        self,
        turns: Sequence[int],
        stop: Callable[[], bool],
        progress: Callable[[int], None] | None = None,
        until: Callable[[], bool] | None = None,
    ) -> None:
        """Scan positions scanned..len(turns)-1 of `turns` (the timeline's turn numbers) in order, until
        `stop()` (cancelled) or `until()` (the answer is in) says so after a turn; `progress(position)`
        before each turn."""
        with self._lock:
            if isinstance(self.stream, JournalStream) and len(self.counts) < len(turns):
                try:
                    self.stream.reach(turns[-1])  # (live: the journal through the last turn, fetched once)
                except Exception:  # the agent could not send it: the turns are read one by one
                    self.stream = None
            while len(self.counts) < len(turns):
                if stop() or (until is not None and until()):
                    return
                i = len(self.counts)
                if progress is not None:
                    progress(i)
                previous = self.counts[-1] if self.counts else {}
                try:
                    now = self.turn_counts(turns[i])
                except Exception as exc:  # a damaged turn: no change read into it (said in the summary)
                    self.unreadable += 1
                    if self.unreadable_why is None:
                        self.unreadable_why = str(exc)
                    now = previous
                self.counts.append(now)
                change = _change(i, turns[i], previous, now)
                if change is not None:
                    self.changes.append(change)

    def next_change(self, index: int, inclusive: bool = False) -> Change | None:
        """The first change at a position after `index` (or at it), among those scanned."""
        return next((c for c in self.changes if c.index > index or (inclusive and c.index == index)), None)

    def prev_change(self, index: int) -> Change | None:
        return next((c for c in reversed(self.changes) if c.index < index), None)

    def at(self, index: int) -> dict[str, int] | None:
        """Occurrences per section at a scanned position, None if it is not scanned yet."""
        return self.counts[index] if 0 <= index < len(self.counts) else None


def _change(index: int, turn: int, before: dict[str, int], now: dict[str, int]) -> Change | None:
    total, was = sum(now.values()), sum(before.values())
    if total > was:
        gained = max(now, key=lambda s: (now[s] - before.get(s, 0), now[s]))
        return Change(index, turn, ENTERS, gained, total, was)
    if was and not total:
        held = max(before, key=lambda s: before[s])
        return Change(index, turn, LEAVES, held, 0, was)
    return None


def describe(change: Change, query: str) -> str:
    """The change in words (plain text), without its turn: what the search bar and `cp-inspect find` say."""
    if change.kind == LEAVES:
        return f"{query!r} left the prompt (it was in {change.section} the turn before)"
    if not change.before:
        return f"{query!r} enters the prompt in {change.section}"
    return f"{query!r} comes again in {change.section} ({change.before} -> {change.count} matches)"
