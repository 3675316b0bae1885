"""A recording agent watched through its recording file (`RecordingFollower`), and `open_live`, which
attaches to an agent that way when it can and as before when it cannot (issue 15.4).

Sent its turns on the probe (the fold stream, inspector/sources/live.py), an attached inspector cost the
agent's thread one encode and one send a turn, cold after the model call: ~3.5% of a paced 1-2 ms turn
at best, and no restructuring of that send reached the goal of 2% (BENCHMARKS.md, the forty-seventh
session). An agent that records writes every turn to its recording anyway (a turn's chunk at its
close), so its inspector reads it there: its hello asks to follow (engine.probe.handshake, "Following
the recording"), the agent names its file and publishes nothing for it, and this source follows the
file on a timer of its own (engine.probe.poll: no inotify watch, whose events the agent's write() would
raise) as a replay of a growing recording (inspector/sources/file.py), so what it shows is what the
recording holds: the same traces, contents and figures. The connection stays open only to learn that
the agent has gone (its recorder closes the file before its probe, so the file is whole by then) or
that its recording stopped.

The file is trusted only as the agent's own (the hello names it, and a hostile or confused agent, or a
path seen through another mount namespace, could name anything): a regular file (not a symbolic link,
a FIFO or a device), owned by the agent's user (this one: the probe serves its own user only), the same
file when opened as when looked at, and a recording whose header has the hello's start time, model and
provider. Anything else, or a file that cannot be read here, is said in one line (`open_live`'s second
value) and the agent is attached as before, on a new connection whose snapshot has every turn. So is a
recording that goes wrong while it is followed (cut shorter than what was read, a corrupt frame, the
agent's recorder stopping): the source attaches again, the snapshot whole, and goes on from the first
turn it had not shown, and says so once (a Notice the app shows). What is asked of a turn from then on
is the live source's; the content search's stream of the file's journal has no build of a later turn,
so it takes those from the live source's fold, which hands it each build (`search_index`, `reach_live`;
tests/test_follow_fallback.py). A file renamed or unlinked meanwhile is still the one the agent writes (both hold
it open): it is followed on.

`cp-inspect demo` follows its agent's recording the same way (open_when_serving), and the one-shot
commands `explain PID` and `find PID` read it as any recording (open_recorded): the agent sends them
nothing and no journal is fetched, and what they print is what the stream gave
(tests/test_follow_commands.py).
"""

from __future__ import annotations

import os
import stat
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from engine.probe.client import ProbeError
from engine.probe.poll import PollInterval
from engine.recording.cpsession import RecordingError, RecordingReader
from engine.recording.journal import trace_of
from engine.trace_schema import Trace
from engine.whatif import Overrides
from inspector.followed_search import RecordingStream
from inspector.sources import (
    Chunk,
    Disconnected,
    HistoryFilled,
    HistoryProgress,
    NewTurn,
    Notice,
    SourceEvent,
    cancelled_event,
)
from inspector.sources.file import FileSource
from inspector.sources.live import PROGRESS_EVERY, LiveSource
from inspector.sources.live_placeholders import _stand_in
from inspector.timeline import summarize

# The hello's fields the recording's header must hold too: the same agent's same session.
_SAME = ("start_time", "model", "provider")
# The header key saying why a recording the agent named is not followed (InspectorApp shows it on mount).
NOT_FOLLOWED = "not_followed"
# Turns of the history before the newest whose summaries follow() decodes between two looks at the file.
FILL_BATCH = 500


class Untrusted(Exception):
    """The recording a hello names cannot be followed: the message says what it is and why."""


def open_trusted(path: Any, hello: dict[str, Any], uid: int | None = None) -> RecordingReader:
    """The recording `path` (from an agent's hello), opened, if it is that agent's: see the module
    docstring. Raises Untrusted saying why not."""
    uid = os.getuid() if uid is None else uid
    if not isinstance(path, str) or not os.path.isabs(path):
        raise Untrusted(f"the agent named its recording as {path!r:.80}, not an absolute path")
    try:
        st = os.lstat(path)
    except OSError as exc:
        raise Untrusted(f"the agent's recording {path} cannot be read here ({exc.strerror or exc})") from None
    if stat.S_ISLNK(st.st_mode):
        raise Untrusted(f"the agent's recording {path} is a symbolic link, not the file it writes")
    if not stat.S_ISREG(st.st_mode):
        raise Untrusted(f"the agent's recording {path} is not a regular file")
    if st.st_uid != uid:
        raise Untrusted(f"the agent's recording {path} belongs to uid {st.st_uid}, not the agent's ({uid})")
    try:
        # From its end: the agent is still writing it, so it has no footer, and scanned whole it cost the
        # attach ~3.6 ms a 1,000 turns (cpsession_index._scan_from_end).
        reader = RecordingReader.open(path, from_end=True)
    except RecordingError as exc:
        raise Untrusted(f"the agent's recording cannot be read: {exc}") from None
    try:
        now = os.fstat(reader.fileno())
        if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
            raise Untrusted(f"the agent's recording {path} was replaced while it was opened")
        header = reader.header
        differs = [k for k in _SAME if header.get(k) != hello.get(k)]
        if differs:
            raise Untrusted(
                f"{path} is not this agent's recording (its {', '.join(differs)} differ from the agent's)"
            )
    except BaseException:
        reader.close()
        raise
    return reader


class RecordingFollower(FileSource):
    """A recording agent's session read from its recording as it grows (see the module docstring). Built
    by `open_live` from the LiveSource whose connection the agent agreed to let follow."""

    kind = "live"

    def __init__(self, live: LiveSource, reader: RecordingReader) -> None:
        super().__init__(reader.path, follow=True, reader=reader)
        # The texts are read by a reader of their own, opened when first needed: by the file's name it
        # would find nothing, or another file, once the agent's is moved or replaced; the descriptor's
        # own name in /proc is the file this reader opened (and checked), wherever it is now.
        by_fd = Path(f"/proc/self/fd/{reader.fileno()}")
        if by_fd.exists():
            self.texts.path = by_fd
        self.live = live  # its connection: the agent's end, and where the session goes if the file fails
        # The search's stream of the file's journal, made now and kept (content_search.arrival_index): the
        # live source's fold hands it the turns it builds after a fall-back, which the file does not have
        # (each read through the source instead, a re-plan a turn: ~6.7 ms against ~1 from the file).
        self.search_index = live.search_index
        if self.search_index is not None:
            # Its own stream of the file's turns, indexed in this source's thread as they are read
            # (inspector/followed_search.py: the first `/` found ~1 ms a turn to build); the live fold's
            # builds after a fall-back go to it too.
            self.search_index = RecordingStream(self, by_fd if by_fd.exists() else reader.path)
            live.search_index = self.search_index
            live.index_builds(self.search_index.add)
        self.pid, self.session, self.timeout = live.pid, live.session, live.timeout
        self.header = {**live.header, "recording": str(reader.path), "following": True}
        if self.reader.damage is not None:
            self.header["damage"] = self.reader.damage.message
        self._shown_up_to = max(self.reader.turn_numbers(), default=-1)  # the newest turn handed on
        self._fallen_back: str | None = None  # why the session is served live now (see _fall_back)
        self._closed = False
        # The history before the newest turn, as the first frame's stand-ins (see load_chunks): (turn,
        # its stand-in) each, filled in place by follow() from `_filled` on.
        self._stand: list[tuple[int, dict[str, Any]]] = []
        self._filled = 0
        self._told_at = 0.0  # when HistoryProgress was last said
        # The file's data_end when the search stream last caught up with it (-2: the stream failed).
        self._indexed_at = -1

    @property
    def target(self) -> str:
        return self.live.target

    def follow(self) -> Iterator[SourceEvent]:
        """New turns as the file grows, looked for on a timer of this source's own (POLL_MIN after a turn,
        up to POLL_MAX when quiet); Disconnected when the agent has gone, after the file's last turns."""
        poll = PollInterval()
        stop = cancelled_event()
        self._told_at = time.monotonic()
        while not self._closed:
            if self._stand and self._fallen_back is None:
                try:
                    yield from self._fill_history()
                except RecordingError:
                    self._stand = []  # (the stand-ins stay; stepping onto one reads its turn, or says why not)
                    yield HistoryFilled()
            if self._fallen_back is None:
                why = self._file_trouble()
                if why is None:
                    try:
                        new = self._read_on()
                    except RecordingError as exc:
                        why = f"the recording could not be read on ({exc})"
                    else:
                        got = False
                        for ev in new:
                            if ev.get("k") == "turn":
                                got = True
                                yield self._new_turn(ev)
                        if got:
                            poll.got()
                if why is None:
                    why, gone = self._agent_state()
                    if gone:
                        for ev in self._read_on_quietly():
                            if ev.get("k") == "turn":
                                yield self._new_turn(ev)
                        yield Disconnected(f"agent pid {self.target} disconnected")
                        return
                if why is not None:
                    try:
                        self._fall_back(why)
                    except ProbeError as exc:
                        yield Disconnected(f"{why}, and attaching again failed: {exc}")
                        return
                    if self._stand:  # (what is left of them stays as it is; stepping onto one reads it)
                        self._stand = []
                        yield HistoryFilled()
                    # Said on screen (the header's follow_stopped was shown nowhere): the view goes on, live.
                    yield Notice(f"{why}: its turns are sent live from here on", "not following its recording")
                    yield from self._live_turns(self.live.load_initial())
                    yield from self._live_turns(self.live.follow())
                    return
            if stop is not None and stop.is_set():
                return
            if self._stand:
                continue  # (the history's next batch at once)
            if self._fallen_back is None:
                self._index_ahead()
            nap = poll.idle()
            if stop is not None:
                stop.wait(nap)
            else:
                time.sleep(nap)

    def _index_ahead(self) -> None:
        """A batch of the file's turns indexed for the content search (followed_search.RecordingStream),
        unless a search's worker is reading the stream (it indexes what it needs itself). A stream that
        fails is left alone: a search then reads turn by turn, and says what it could not read."""
        index = self.search_index
        at = self.reader.data_end
        if not isinstance(index, RecordingStream) or self._indexed_at in (at, -2):
            return
        if not index.scan_lock.acquire(blocking=False):
            return
        try:
            index.index_ahead()
        except Exception:
            at = -2  # (not again: a search meets the same and says it)
        finally:
            index.scan_lock.release()
        if at == -2 or index.ended:
            self._indexed_at = at

    def _new_turn(self, ev: dict[str, Any]) -> NewTurn:
        self._shown_up_to = max(self._shown_up_to, ev["turn"])
        return NewTurn(summarize(self._remember(ev["turn"], trace_of(ev))))

    def _live_turns(self, events: Any) -> Iterator[SourceEvent]:
        """The live source's turns and events from where the file left off (the turns shown before it
        fell back are skipped: the timeline has them)."""
        for ev in events:
            if isinstance(ev, dict):
                ev = NewTurn(ev)
            if (
                isinstance(ev, NewTurn)
                and type(ev.trace.get("turn")) is int
                and ev.trace["turn"] <= self._shown_up_to
            ):
                continue
            yield ev

    def _file_trouble(self) -> str | None:
        """Why the file cannot be followed on, or None: cut shorter than the events read (truncated, or
        rewritten from the start). Measured against where those events end, not the size last seen: a
        cut made between this look and the next read was taken by the reader's refresh as the file's new
        size, and the follower never fell back (the agent's next write leaves a hole where the turns
        were). And a footer may go: a proxy parks an idle session's recording with its footer and cuts
        that off when the session calls again (engine.capture.proxy.recorder_sessions)."""
        try:
            size = os.fstat(self.reader.fileno()).st_size
        except OSError as exc:
            return f"the recording cannot be read on ({exc.strerror or exc})"
        if size < self.reader.data_end:
            return f"the recording was cut to {size} bytes while it was followed"
        return None

    def _agent_state(self) -> tuple[str | None, bool]:
        """(why to attach live instead, or None; whether the agent has gone) from the connection: an
        error frame (its recording stopped), or its end."""
        client = self.live.client
        try:
            while client.recv(0.0) is not None:
                pass  # (pongs, and anything else it may say)
        except ProbeError as exc:
            return f"the agent's recording cannot be followed on ({exc})", False
        return None, client.disconnected

    def _read_on_quietly(self) -> list[dict[str, Any]]:
        try:
            return self._read_on()
        except RecordingError:
            return []

    def _fall_back(self, why: str) -> None:
        """Attach to the agent live (a new connection, its whole snapshot, so no turn is lost) and serve
        the session from there on."""
        self.header["follow_stopped"] = why
        live = self.live
        live.client.close()
        live.follow_recording = False
        live.whole_snapshot = True
        live._connect()
        self._fallen_back = why

    # Once fallen back, what the app asks is the live source's (it holds the whole journal).
    def _served(self) -> LiveSource | None:
        return self.live if self._fallen_back is not None else None

    def reach_live(self, turn: int) -> None:
        """Before a search's scan to `turn` (content_search.JournalStream.reach): after a fall-back, the
        live source's journal through `turn` fetched and folded now (LiveFoldStream.fold_received), so
        that its fold's builds of the turns the file lacks are in the search index (`search_index`)
        before the scan comes to them; each was read through this source, a re-plan a turn (~6.7 ms,
        against ~1 ms from the file). Nothing before a fall-back (the file's journal is the stream's
        own)."""
        live = self._served()
        if live is not None:
            live.replayer(turn)
            live.fold_received()

    def full_trace(self, turn: int) -> Trace:
        live = self._served()
        return live.full_trace(turn) if live is not None else super().full_trace(turn)

    def section_content(self, turn: int, section_id: str) -> str:
        live = self._served()
        return (
            live.section_content(turn, section_id)
            if live is not None
            else super().section_content(turn, section_id)
        )

    def request_body(self, turn: int) -> str:
        live = self._served()
        return live.request_body(turn) if live is not None else super().request_body(turn)

    def replan(self, turn: int, overrides: Overrides) -> Trace:
        live = self._served()
        return live.replan(turn, overrides) if live is not None else super().replan(turn, overrides)

    def why_missed(self, turn: int) -> dict[str, Any]:
        live = self._served()
        return live.why_missed(turn) if live is not None else super().why_missed(turn)

    def simulate(self, overrides: Overrides, cancelled: Callable[[], bool] | None = None) -> dict[str, Any]:
        live = self._served()
        return (
            live.simulate(overrides, cancelled)
            if live is not None
            else super().simulate(overrides, cancelled)
        )

    def shadow_summary(self) -> dict[str, Any] | None:
        live = self._served()
        return live.shadow_summary() if live is not None else super().shadow_summary()

    def save(self, path: str | Path) -> int:
        live = self._served()
        return live.save(path) if live is not None else super().save(path)

    def load_chunks(self, first: int = FileSource.FIRST_CHUNK, size: int = 2000) -> Iterator[Chunk]:
        """The turns in the file when it was opened (new ones come by follow()). More than `first`: the
        newest whole and the ones before it as stand-ins, as the live source's tail (live_placeholders),
        which follow() fills in place, saying how far it has come (HistoryProgress, then HistoryFilled):
        the first frame shows the agent's newest turn at once, where a recording's turns in order (each
        summary decoded, ~0.08 ms of CPU) put it ~250 ms of CPU after the first frame at 3,000 turns."""
        numbers = self.reader.turn_numbers()
        if len(numbers) <= first:
            yield from super().load_chunks(first, size)
            return
        *older, newest = numbers
        self._stand = [(t, _stand_in(t)) for t in older]
        self._filled = 0
        yield Chunk([*(v for _, v in self._stand), summarize(dict(self.full_trace(newest)))])

    def _fill_history(self) -> Iterator[SourceEvent]:
        """The next FILL_BATCH stand-ins filled with their turns' summaries; HistoryProgress every
        PROGRESS_EVERY, HistoryFilled once they all are."""
        stand, k = self._stand, self._filled
        end = min(len(stand), k + FILL_BATCH)
        for turn, view in stand[k:end]:
            summary = summarize(trace_of(self.reader.turn(turn)))
            view.clear()
            view.update(summary)
        self._filled = end
        now = time.monotonic()
        if end >= len(stand):
            self._stand, self._filled = [], 0
            yield HistoryFilled()
        elif now - self._told_at >= PROGRESS_EVERY:
            self._told_at = now
            yield HistoryProgress(end, len(stand), 0)

    def recording_removed(self) -> bool:
        """Whether the file followed is no longer at its path (removed, or moved away) while it was read
        through the open descriptor: the app's end then says so, not "recording kept at PATH"."""
        try:
            held = os.fstat(self.reader.fileno())
        except OSError:
            return False  # (closed: not known)
        try:
            there = os.stat(self.reader.path)
        except OSError:
            return True
        return held.st_nlink == 0 or (there.st_dev, there.st_ino) != (held.st_dev, held.st_ino)

    def close(self) -> None:
        self._closed = True
        self.live.close()
        index = self.search_index
        # The search stream's own reader, unless a search's worker is reading it (it goes with the stream).
        if isinstance(index, RecordingStream) and index.scan_lock.acquire(blocking=False):
            try:
                index.close()
            finally:
                index.scan_lock.release()
        super().close()


def _attach(
    pid: int, session: int | None, timeout: float, follow: bool, kw: dict[str, Any], searched: bool = False
) -> tuple[LiveSource, RecordingReader | None, str | None]:
    """(the agent's connection, its recording opened and checked if the agent offers it and it is its
    own, else None; why an offered one is not read). Untrusted: the connection is made again without
    asking to follow, so the live source is the one it would have been (see the module docstring).
    `searched`: a source a person may search (`/`), given its index from the first turn on."""
    kw.setdefault("fold", True)
    index = None
    if searched and kw["fold"] and kw.get("on_build") is None:
        # What each turn sent, indexed from the fold's builds as they come (content_search.arrival_index):
        # the first `/` builds nothing again. Handed over before the connection: its snapshot is folded.
        from inspector.content_search import arrival_index

        index = arrival_index()
        kw["on_build"] = index.add
    live = LiveSource(pid, timeout=timeout, session=session, follow_recording=follow, **kw)
    if index is not None:
        index.source, live.search_index = live, index
    if not live.client.following:
        return live, None, None
    try:
        reader = open_trusted(live.client.hello.get("recording"), live.client.hello)
    except Untrusted as exc:
        live.client.close()
        live.follow_recording = False
        live._connect()
        why = f"{exc}: its turns are sent live instead"
        live.header[NOT_FOLLOWED] = why  # (the app says it on screen: written before it, it was hidden)
        return live, None, why
    return live, reader, None


def open_live(
    pid: int, session: int | None = None, timeout: float = 3.0, *, follow: bool = True, **kw: Any
) -> tuple[LiveSource | RecordingFollower, str | None]:
    """Attach to agent `pid` as `cp-inspect attach` does (the fold stream, see LiveSource), following its
    recording instead when it records and the file is its own (see the module docstring). The second
    value says why a recording named by the agent is not followed (one line, for a warning), else None."""
    live, reader, why = _attach(pid, session, timeout, follow, kw, searched=True)
    if reader is None:
        return live, why
    try:
        return RecordingFollower(live, reader), None
    except BaseException:
        reader.close()
        live.close()
        raise


def open_recorded(
    pid: int, session: int | None = None, timeout: float = 3.0, **kw: Any
) -> tuple[RecordingReader | LiveSource, str | None]:
    """What a one-shot command reads of agent `pid` (`explain PID`, `find PID`): its recording, opened and
    checked as open_live checks it, the connection closed at once (the command reads the file as it
    reads any recording: the agent sends it nothing, its journal is not fetched), or else the live source
    open_live would have given (the fold stream), with why the recording is not read (one line, for a
    warning). The file holds the turns the agent has closed: a turn under way (its request made, its
    reply not in) is not in it, where `find PID` over the stream searched that turn's request too."""
    live, reader, why = _attach(pid, session, timeout, True, kw)
    if reader is None:
        return live, why
    live.close()
    return reader, None


def open_when_serving(
    child: subprocess.Popen[bytes], wait_s: float = 15.0, **kw: Any
) -> tuple[LiveSource | RecordingFollower, str | None]:
    """open_live on an agent process just started (`cp-inspect demo`'s), retried until its probe socket
    is up, as LiveSource.when_serving does for the stream: the demo agent records by default, so its
    inspector follows that file and the agent sends it nothing a turn. Raises ProbeError if the agent
    exits first or does not serve within `wait_s` seconds."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            return open_live(child.pid, timeout=1.0, **kw)
        except ProbeError as exc:
            if child.poll() is not None:
                raise ProbeError(f"the agent (pid {child.pid}) exited with code {child.returncode}") from exc
            if time.monotonic() > deadline:
                raise ProbeError(
                    f"the agent (pid {child.pid}) did not start serving within {wait_s:g} s: {exc}"
                ) from exc
            time.sleep(0.1)
