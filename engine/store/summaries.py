"""Summary items: model-written summaries through the application's callback, and collapsed subtasks.

The rule-based stub and summary text used inside windows lives in `compaction`; this module writes
new SUMMARY items that stand for their originals (linked with SUMMARIZES, SUPERSEDES when rolled).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from engine.store.compaction import Summarizer, render_full, subtask_body, summary_key
from engine.store.errors import StoreError, StoreTextError
from engine.store.items import Item, Kind, LinkKind, lone_surrogate
from engine.store.state import StoreState, item_id_arg
from engine.store.writes import Writer
from engine.wording import counted


class Summaries:
    """Writes summary items through the writer; model summaries come from the application's callback."""

    def __init__(
        self, state: StoreState, writer: Writer, summarizer: Summarizer | None, prompt_version: str
    ) -> None:
        self.state = state
        self.writer = writer
        self.summarizer = summarizer
        self.summary_prompt_version = prompt_version

    def summarize(self, ids: Sequence[int], *, roll_from: int | None = None) -> int:
        """Summarise items through the application's callback into a new summary item.

        With `roll_from`, the new summary covers that summary's originals plus `ids`, and is produced
        from those originals, never from the previous summary's text (errors do not compound).
        The text is cached by the hash of the originals plus the prompt version.

        All or nothing: what the summarizer writes through this store commits with the summary, or is
        rolled back with it if the summarizer raises or answers with no text. No write lock is held
        while it runs, until its own first write (which then holds other writers off until the summary
        is stored). Writes through another connection cannot be undone; the error names them.
        """
        summarizer = self.summarizer
        if summarizer is None:
            raise StoreError("no summarizer configured: pass summarizer=callable to ContextStore")
        ids = _id_list(ids, "summarize's ids")
        if roll_from is not None:
            roll_from = item_id_arg(roll_from, "roll_from")
        originals: set[int] = set()
        for i in ids:
            originals |= set(self.state.originals(i)) if self.state.item(i).kind is Kind.SUMMARY else {i}
        if roll_from is not None:
            if self.state.item(roll_from).kind is not Kind.SUMMARY:
                raise StoreError(f"#{roll_from} is not a summary item; roll_from needs one")
            originals |= set(self.state.originals(roll_from))
        if not originals:
            raise StoreError("nothing to summarise: give at least one item id")
        ordered = sorted(originals)
        items = [self.state.item(i) for i in ordered]
        before = self._last_id()
        # One step: the cached text, the summary item, and whatever the summarizer itself wrote through
        # this store (a log line, an item of its own) commit together or not at all. Its writes were
        # kept when it then raised, under an error that said "nothing was stored".
        try:
            with self.state.step():
                text = self._text(summarizer, items, ordered)
                links: list[tuple[LinkKind | str, int]] = [(LinkKind.SUMMARIZES, i) for i in ordered]
                if roll_from is not None:
                    links.append((LinkKind.SUPERSEDES, roll_from))
                return self.writer.add(text, Kind.SUMMARY, source=f"summary of {len(ordered)} items", links=links)
        except _Refused as refused:
            raise StoreError(f"{refused.what}; {self._stayed(before)}. {refused.advice}") from refused.__cause__

    def _text(self, summarizer: Summarizer, items: Sequence[Item], ordered: Sequence[int]) -> str:
        """The summary text: cached, or the summarizer's answer (then cached)."""
        producer = f"callback:{self.summary_prompt_version}"
        key = summary_key([it.hash for it in items], producer)
        row = self.state.conn.execute("SELECT text FROM derived WHERE key=?", (key,)).fetchone()
        if row is not None and isinstance(row[0], str) and row[0].strip():
            return str(row[0])
        # Not cached, or cached by a version that kept a summarizer's non-text or empty answer.
        texts = [render_full(it) for it in items]
        try:
            answer = summarizer(texts)
        except Exception as exc:
            # The application's callback (a model call, usually) failed: its own exception came out
            # of the store with nothing saying what the store was doing.
            raise _Refused(
                f"the summarizer {_name(summarizer)} raised {type(exc).__name__}: {exc} "
                f"while summarising {_ids_text(ordered)}",
                "Fix or retry the summarizer callback, or leave the items unsummarised",
            ) from exc
        text = _checked(answer, len(ordered))
        with self.state.transaction() as conn:
            conn.execute("INSERT OR REPLACE INTO derived(key, producer, text) VALUES (?,?,?)", (key, producer, text))
        return text

    def _last_id(self) -> int:
        return int(self.state.conn.execute("SELECT coalesce(max(id), 0) FROM items").fetchone()[0])

    def _stayed(self, before: int) -> str:
        """The end of a failed summarize's error: what stayed in the file. Everything written through
        this store was rolled back; items another connection committed meanwhile (another ContextStore
        on the file, which the summarizer may have used, or another process) are not ours to undo."""
        try:
            ids = [int(r[0]) for r in self.state.conn.execute("SELECT id FROM items WHERE id>? ORDER BY id", (before,))]
        except sqlite3.Error:
            ids = []
        what = "nothing was stored (anything the summarizer wrote through this store was undone too)"
        if ids:
            what += (
                f"; but {_ids_text(ids)} {'was' if len(ids) == 1 else 'were'} added while it ran, through another connection to "
                f"{self.state.path} (another ContextStore, or another process), and stay: a summarizer "
                "should write through the store that calls it, if at all"
            )
        return what

    def collapse_subtask(self, step_ids: Sequence[int], result_id: int) -> int:
        """A finished subtask becomes one item: its result plus a link to its steps (no model needed)."""
        step_ids = _id_list(step_ids, "collapse_subtask's step_ids")
        if not step_ids:
            raise StoreError("collapse_subtask needs the ids of the subtask's steps")
        result_id = item_id_arg(result_id, "result_id")
        result = self.state.item(result_id)
        for s in step_ids:
            self.state.item(s)  # raises UnknownItemError early, before anything is written
        covered = sorted(set(step_ids) | {result_id})
        body = subtask_body(sorted(set(step_ids)), result)
        return self.writer.add(
            body, Kind.SUMMARY, source="subtask", links=[(LinkKind.SUMMARIZES, i) for i in covered]
        )


class _Refused(StoreError):
    """The summarizer failed or gave no usable text: raised inside the step (which then rolls back),
    turned into the StoreError that says what stayed once the rollback is done (it never leaves the
    store; a StoreError all the same, as every engine error is)."""

    def __init__(self, what: str, advice: str) -> None:
        super().__init__(what)
        self.what = what
        self.advice = advice


def _checked(text: object, n: int) -> str:
    """The summarizer's answer, if it can stand for its originals. A summary item takes the originals'
    place in windows, so an empty one would silently drop them; and what is cached is reused for the
    same originals, so a bad answer must not be cached."""
    if not isinstance(text, str):
        raise _Refused(
            f"the summarizer returned {type(text).__name__}, not the summary text (str), for {counted(n, 'item')}",
            "Make the summarizer callback return a string",
        )
    if not text.strip():
        raise _Refused(
            f"the summarizer returned empty text for {counted(n, 'item')} (an empty summary would stand in for {'it' if n == 1 else 'them'})",
            "Check the summarizer callback, or leave the items unsummarised",
        )
    at = lone_surrogate(text)
    if at >= 0:
        raise StoreTextError("the summarizer's text", text, at)
    return text


def _id_list(ids: Any, what: str) -> list[int]:
    """Item ids as a list of ints. A str is a sequence too: summarize("abc") summarised "a", "b", "c"
    and failed in int() deep in the store."""
    if isinstance(ids, (str, bytes)) or not hasattr(ids, "__iter__"):
        raise TypeError(f"{what} must be a list of item ids (ints such as [3, 4]), got {ids!r}")
    return [item_id_arg(i, f"each of {what}") for i in ids]


def _name(fn: object) -> str:
    name = getattr(fn, "__qualname__", None) or getattr(type(fn), "__qualname__", None) or repr(fn)
    module = getattr(fn, "__module__", None)
    return f"{module}.{name}" if module and module != "builtins" else str(name)


def _ids_text(ids: Sequence[int]) -> str:
    shown = ", ".join(f"#{i}" for i in ids[:10])
    more = f" and {len(ids) - 10} more" if len(ids) > 10 else ""
    return f"{len(ids)} item{'s' if len(ids) != 1 else ''} ({shown}{more})"
