"""The conversation (`Pipeline.history`), with the messages behind the compaction cut on disk.

A compacting policy sends the task and what follows its cut; the messages between them are read again
only by a what-if that cuts shallower (or not at all, as the wave-1 policy does), by a summary of a new
cut, and by whoever iterates the whole conversation. Keeping them in memory made a long session grow
by every message it ever saw. `HistoryLog` holds three parts:

    [0, lo)       the task (everything before the first assistant message): in memory, always sent
    [lo, base)    released messages: pickled to a private scratch file, 8 bytes of offset and a
                  4-byte checksum each in memory
    [base, n)     the live window: in memory

The pipeline calls `release(lo, upto)` with how far its compaction states have cut; messages are
written in chunks of at least `chunk` so a session pays one write per chunk, not one per turn, and a
short session never touches the disk. A write that fails (disk full, I/O error) keeps the messages in
memory and says why once (`spill_error`, a warning); the session goes on, and the write is tried again
a chunk later.

It is a read-only Sequence with `append`: indexing, slicing, iterating and `==` behave as on the list it
replaces, and a released message reads back equal to the one appended, hashes included (a new object:
identity memos downstream then just do more work).
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Iterator, Sequence
from typing import Any, overload

from engine.artifacts import Message, ToolCall
from engine.recording.spill_file import SpillFile, SpillReadError, checksum, same_items, warn

# Messages written per release, at least: ~128 rounds of a tool-using agent, a write of a few hundred
# KB every hundred-odd turns.
CHUNK_DEFAULT = 256

LOGGER = "contextpipe.history"

_NO_CALLS: tuple[tuple[str, str], ...] = ()


def call_pairs(msg: Message) -> tuple[tuple[str, str], ...]:
    """An assistant message's tool calls as (id, name), () for any other message: what a fold of the
    conversation's call ids at another provider reads of it (engine/recording/provider_ids.py)."""
    if msg.role != "assistant":
        return _NO_CALLS
    pairs = tuple((p.id, p.name) for p in msg.parts if type(p) is ToolCall)
    return pairs or _NO_CALLS


class _Parked:
    """What the last park() of a log or any copy of it wrote: segments (first message index, the
    messages, their offsets, their checksums), each contiguous in `file`. Shared by a log and its copies
    (like the file): the next checkpoint's park finds most of its live window already written by the
    previous one (the same message objects at the same places) and indexes those records again instead
    of writing them: a replay of a 218 MB recording wrote each checkpoint's whole window, 544 MB by turn
    3,500. The messages are held until the next park (the cursor's window holds them anyway)."""

    __slots__ = ("file", "segments")

    def __init__(self) -> None:
        self.file: SpillFile | None = None
        self.segments: list[tuple[int, list[Message], array[int], array[int]]] = []


class HistoryLog(Sequence[Message]):
    def __init__(self, chunk: int | None = CHUNK_DEFAULT, keep_calls: bool = False) -> None:
        """`chunk`: the fewest messages a release writes (None: never write, everything stays in memory).
        `keep_calls`: keep the tool calls (id, name) of the messages written in memory (a replay's, for
        `calls`: a what-if at another provider folds every call id of the conversation, and reading the
        texts back from disk for them was ~25 us a message)."""
        if chunk is not None and chunk < 1:
            raise ValueError(f"chunk must be >= 1 or None, got {chunk}")
        self.chunk = chunk
        self._head: list[Message] = []  # [0, lo)
        self._lo = 0
        self._base = 0  # [lo, base) on disk
        self._tail: list[Message] = []  # [base, n)
        # One small array per written chunk (one growing array would be copied whole as it grows).
        self._starts: list[int] = []  # first message index of each chunk
        self._offs: list[array[int]] = []  # byte offsets: message j of chunk k is offs[k][j]:offs[k][j+1]
        self._crcs: list[array[int]] = []
        self.keep_calls = keep_calls
        self._calls: list[list[tuple[tuple[str, str], ...]]] = []  # per written chunk, when keep_calls
        self._file: SpillFile | None = None
        self._parked = _Parked()
        self._fixed = False  # the task's end (lo) is set
        self.edits = 0  # messages replaced (replace): 0 while the log has only been appended to
        self.spill_error: str | None = None
        self._retry_at = 0

    # ---------------------------------------------------------------- writing
    def append(self, msg: Message) -> None:
        self._tail.append(msg)

    def held(self, i: int) -> bool:
        """Whether message `i` is held in memory (not written to disk behind the cut)."""
        return i < self._lo or i >= self._base

    def replace(self, i: int, msg: Message) -> bool:
        """Put `msg` where message `i` is (an agent's edit of its own history: Pipeline.edit_text), if that
        message is in memory; False when it is written to disk (behind the compaction's cut: what is sent
        in its place is the compaction's, and the file is not rewritten). The only change to the history
        that is not an append."""
        if not 0 <= i < self._base + len(self._tail):
            raise IndexError(f"message {i} of {len(self)}")
        # (into new lists: a reader of whole()'s list, or a snapshot's, keeps what it read)
        if i < self._lo:
            self._head = list(self._head)
            self._head[i] = msg
        elif i >= self._base:
            self._tail = list(self._tail)
            self._tail[i - self._base] = msg
        else:
            return False
        self.edits += 1
        return True

    def release(self, lo: int, upto: int) -> list[Message]:
        """Move messages [max(lo, written), upto) to disk when at least `chunk` of them can go; the
        messages moved (the caller forgets what it kept for them), or [] when none were. `lo`, the end
        of the task, is fixed by the first release (the history is append-only, so it never moves)."""
        chunk = self.chunk
        if chunk is None:
            return []
        if not self._fixed:  # nothing written yet: the task stays in memory from here on
            if not 0 <= lo <= len(self._tail):
                return []
            self._head, self._tail = self._tail[:lo], self._tail[lo:]
            self._lo = self._base = lo
            self._fixed = True
        upto = min(upto, self._base + len(self._tail))  # len(self), without its Python call
        n = upto - self._base
        if n < chunk or upto < self._retry_at:
            return []
        moved = self._tail[:n]
        kept = len(self._starts)
        try:
            # A replay's checkpoints parked most of these already (the same message objects at the same
            # places): their records are indexed again, not written again (see _Parked).
            i = len(self._reuse(moved)[1])
            if i < n:
                self._base += i
                self._write(moved[i:])
        except OSError as exc:
            self._base = upto - n
            self._unindex(kept)
            # Nothing is lost: the messages stay in memory; try again once another chunk could go.
            self._retry_at = upto + chunk
            if self.spill_error is None:
                warn(
                    LOGGER,
                    "contextpipe: could not move %d old messages to disk (%s); they stay in memory and "
                    "the session goes on",
                    n,
                    exc,
                )
            self.spill_error = f"{type(exc).__name__}: {exc}"
            return []
        del self._tail[:n]
        self._base = upto
        return moved

    def _write(self, msgs: list[Message]) -> None:
        import pickle  # here, not at the top: a reader of recordings never releases (see spill_file.warn)

        recs = [pickle.dumps(m, protocol=pickle.HIGHEST_PROTOCOL) for m in msgs]
        if self._file is None:
            self._file = SpillFile("history")
        start = self._file.append(b"".join(recs))
        offs = array("q", [start])
        end = start
        for r in recs:
            end += len(r)
            offs.append(end)
        # Indexed only after every byte is written (append raises otherwise).
        self._offs.append(offs)
        self._crcs.append(array("I", map(checksum, recs)))
        if self.keep_calls:
            self._calls.append(list(map(call_pairs, msgs)))
        self._starts.append(self._base)

    def _reuse(
        self, msgs: list[Message]
    ) -> tuple[list[tuple[int, list[Message], array[int], array[int]]], list[Message]]:
        """Index, as this log's next chunks, the records the last park (of this log or a copy) wrote for
        the longest prefix of `msgs` (the messages from `_base` on) it holds: the same objects at the
        same places. (the segments indexed, the messages they cover)."""
        memo, base = self._parked, self._base
        if memo.file is None or (self._file is not None and memo.file is not self._file):
            return [], []
        self._file = memo.file  # a copy parked before: the same scratch file, so its records serve
        segments: list[tuple[int, list[Message], array[int], array[int]]] = []
        i = 0  # messages of `msgs` indexed so far
        for s0, held, offs, crcs in memo.segments:
            j = base + i - s0
            if not 0 <= j < len(held):
                continue
            n = 0
            while i + n < len(msgs) and j + n < len(held) and held[j + n] is msgs[i + n]:
                n += 1
            if not n:
                break
            # Offsets and checksums of records already written: a chunk of this log's index now.
            self._starts.append(base + i)
            self._offs.append(offs[j : j + n + 1])
            self._crcs.append(crcs[j : j + n])
            if self.keep_calls:
                self._calls.append(list(map(call_pairs, msgs[i : i + n])))
            segments.append((base + i, msgs[i : i + n], offs[j : j + n + 1], crcs[j : j + n]))
            i += n
        return segments, msgs[:i]

    def _unindex(self, kept: int) -> None:
        """Forget the chunks indexed after the first `kept` (a write that failed after them)."""
        del self._starts[kept:], self._offs[kept:], self._crcs[kept:], self._calls[kept:]

    # ---------------------------------------------------------------- reading
    def _read_range(self, a: int, b: int) -> list[Message]:
        """Messages [a, b), all on disk: one read per chunk they span."""
        import pickle  # only released messages are read here

        out: list[Message] = []
        f = self._file
        assert f is not None
        k = bisect_right(self._starts, a) - 1
        while a < b:
            s0, offs, crcs = self._starts[k], self._offs[k], self._crcs[k]
            j0, j1 = a - s0, min(b - s0, len(offs) - 1)
            data = f.read(offs[j0], offs[j1] - offs[j0])
            view = memoryview(data)
            for j in range(j0, j1):
                rec = view[offs[j] - offs[j0] : offs[j + 1] - offs[j0]]
                if checksum(rec) != crcs[j]:  # zlib.crc32 reads any buffer
                    raise SpillReadError(f"message {s0 + j} of the history is damaged on disk (checksum mismatch)")
                out.append(pickle.loads(rec))
            a = s0 + j1
            k += 1
        return out

    def __len__(self) -> int:
        return self._base + len(self._tail)

    def calls(self, a: int, b: int) -> list[tuple[tuple[str, str], ...]]:
        """call_pairs of messages [a, b) (0 <= a <= b <= len): from memory, the part on disk too when
        the log keeps its calls (else read back)."""
        lo, base = self._lo, self._base
        out = list(map(call_pairs, self._head[a:b])) if a < lo else []
        i, stop = max(a, lo), min(b, base)
        if i < stop and not self.keep_calls:
            out += map(call_pairs, self._read_range(i, stop))
        elif i < stop:
            k = bisect_right(self._starts, i) - 1
            while i < stop:
                s0, chunk = self._starts[k], self._calls[k]
                j1 = min(stop - s0, len(chunk))
                out += chunk[i - s0 : j1]
                i = s0 + j1
                k += 1
        if b > base:
            out += map(call_pairs, self._tail[max(a, base) - base : b - base])
        return out

    # The pipeline's turn reads the newest messages several times (the running token count, the task and
    # the window from the cut on, the call a tool result answers): each of these is one call where
    # len() and indexing through the Sequence methods were two to four Python calls apiece.
    def since(self, i: int) -> list[Message]:
        """self[i:] as a list (i >= 0)."""
        k = i - self._base
        if k >= 0:
            return self._tail[k:]
        return self[i:]

    def whole(self) -> Sequence[Message]:
        """self[:] without a copy while every message is in memory: the log's own list, to read and
        never to change (nor to hold past the next append); a list of its own otherwise."""
        return self._tail if self._base == 0 else self[:]

    def newest(self) -> Message | None:
        """The last message, None when there is none."""
        tail = self._tail
        if tail:
            return tail[-1]
        return self[-1] if self._base else None

    def starts_round(self, te: int, cut: int) -> bool:
        """te < cut < len(self) and self[cut] is an assistant message (a round starts there)."""
        k = cut - self._base
        if not te < cut or k >= len(self._tail):
            return False
        return (self._tail[k] if k >= 0 else self[cut]).role == "assistant"

    def task_and_window(self, te: int, cut: int) -> list[Message] | None:
        """self[:te] + self[cut:] when starts_round(te, cut), else None."""
        k = cut - self._base
        tail = self._tail
        if k >= 0:  # starts_round's check, written here (the window in the live tail: every turn's case)
            if not te < cut or k >= len(tail) or tail[k].role != "assistant":
                return None
            if te <= self._lo:  # the task in memory
                return self._head[:te] + tail[k:]
        elif not self.starts_round(te, cut):
            return None
        return self[:te] + self[cut:]

    @overload
    def __getitem__(self, i: int) -> Message: ...

    @overload
    def __getitem__(self, i: slice) -> list[Message]: ...

    def __getitem__(self, i: int | slice) -> Message | list[Message]:
        n = self._base + len(self._tail)
        if isinstance(i, slice):
            a, b, step = i.indices(n)
            if step != 1:
                return [self[k] for k in range(a, b, step)]
            if b <= a:
                return []
            return self._slice(a, b)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("history index out of range")
        if i >= self._base:
            return self._tail[i - self._base]
        if i < self._lo:
            return self._head[i]
        return self._read_range(i, i + 1)[0]

    def _slice(self, a: int, b: int) -> list[Message]:
        lo, base = self._lo, self._base
        if a >= base:  # the live window: the common case, a list slice
            return self._tail[a - base : b - base]
        out = self._head[a:b] if a < lo else []
        if max(a, lo) < min(b, base):
            out += self._read_range(max(a, lo), min(b, base))
        if b > base:
            out += self._tail[: b - base]
        return out

    def __iter__(self) -> Iterator[Message]:
        if self.chunk is None:
            # Nothing is ever written (a replay's or simulate's pipeline): the conversation is the one
            # list, and the list's own iterator has a list's semantics exactly (it sees appends) in C.
            # Every build copies the history (sections.assemble), so a Python step per message showed:
            # ~1.3 us a message, ~1 s of a 930-turn simulate.
            return iter(self._tail)
        return self._iter_parts()

    def _iter_parts(self) -> Iterator[Message]:
        yield from self._head
        k = self._lo
        while k < self._base:  # a chunk at a time
            stop = min(self._base, k + (self.chunk or 1))
            yield from self._read_range(k, stop)
            k = stop
        # By index, so what is appended (or released) while iterating is seen as with a list; the live
        # window a slice at a time rather than a __len__ and a __getitem__ per message.
        while k < len(self):
            if k < self._base:  # released to disk meanwhile: read it back
                yield self[k]
                k += 1
                continue
            live = self._tail[k - self._base :]
            yield from live
            k += len(live)

    def __eq__(self, other: object) -> bool:
        return same_items(self, other)

    __hash__ = None  # type: ignore[assignment]  # mutable, like the list it replaces

    def __repr__(self) -> str:
        return f"HistoryLog({len(self)} messages, {self._base - self._lo} on disk)"

    def __deepcopy__(self, memo: dict[int, Any]) -> HistoryLog:
        """A copy that folding or building on either side cannot disturb (replay's snapshots copy a
        pipeline this way). Messages are immutable, so they are shared, not copied, and so is the part
        on disk: its records are never rewritten, and both logs append to the one file at its end, each
        indexing only its own records (a copy of a log with nothing on disk shares no file). Reading the
        released part back into the copy made each replay checkpoint hold the whole conversation."""
        c = HistoryLog(self.chunk, self.keep_calls)
        c._head, c._tail = list(self._head), list(self._tail)
        c._calls = list(self._calls)
        c._lo, c._base, c._fixed = self._lo, self._base, self._fixed
        # One array per written chunk, never changed after it is appended: the lists are copied, not them.
        c._starts, c._offs, c._crcs = list(self._starts), list(self._offs), list(self._crcs)
        c._file, c.spill_error, c._retry_at = self._file, self.spill_error, self._retry_at
        c._parked = self._parked
        c.edits = self.edits
        return c

    def park(self) -> bool:
        """Move every message past the task to disk, however few (a replay's checkpoint: a state kept
        to start folding from again, read by nothing meanwhile). False when nothing moved: the log
        never releases (chunk None), its task's end is not fixed yet, or the disk refused the write
        (the messages then stay in memory, as a release's do)."""
        if self.chunk is None or not self._fixed or not self._tail:
            return False
        memo, tail, base = self._parked, self._tail, self._base
        kept = len(self._starts)
        segments, reused = self._reuse(tail)
        i = len(reused)
        if i < len(tail):
            self._base = base + i
            try:
                self._write(tail[i:])
            except OSError:
                self._base = base
                self._unindex(kept)
                return False
            segments.append((base + i, tail[i:], self._offs[-1], self._crcs[-1]))
        memo.file, memo.segments = self._file, segments
        self._base = base + len(tail)
        self._tail = []
        return True

    def unpark(self, start: int) -> None:
        """Read messages [start, on-disk end) back into memory (a state restored from a parked
        checkpoint: its live window is read by every build from here on). Their records stay on disk
        and indexed, so copies that share them are not disturbed; a later release writes them again."""
        start = max(start, self._lo)
        if start >= self._base:
            return
        self._tail = self._read_range(start, self._base) + self._tail
        self._base = start
        # Chunks that start past the new end are this log's no longer (a release writes those messages
        # again, indexed in order after the chunks kept); one that straddles it is read only below it.
        k = bisect_left(self._starts, start)
        del self._starts[k:], self._offs[k:], self._crcs[k:], self._calls[k:]

    # ---------------------------------------------------------------- figures
    def in_memory(self) -> int:
        """Messages held in memory (the rest are on disk)."""
        return len(self._head) + len(self._tail)

    def on_disk(self) -> int:
        return self._base - self._lo

    def spilled_bytes(self) -> int:
        return self._file.end if self._file is not None else 0

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
