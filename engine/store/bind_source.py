"""The store as a Bind source: a Pipeline section whose text is a budgeted store window.

    store = ContextStore("run.db")
    src = attach_store(pipe, store, section_id="memory")          # a MEMORY section
    src = attach_store(pipe, store, "recall", kind="context", query_fn=lambda p: my_query)
    req = pipe.next_request()          # Bind calls context_get(budget, query=...) for the section
    store.bound_window("memory", req.turn)  # the manifest of the window that went into that turn

Each turn the binder asks the store for a window that fits the section's budget (the budget Bind
passes, i.e. the source's estimate, capped by max_tokens), renders it as text, and records in the
store's flight recorder which window went into which pipeline turn. Every entry of the text starts
with its item id (`[#12 assistant]`, or a stub's own `[#12 tool_result 840t: ...; expand(12)]`), so
the trace's section text shows what went in and an agent can call `expand`. The rendered text is
re-counted with the pipeline's own tokenizer and the window re-requested smaller if the headers
pushed it over, so the section's tokens never exceed its budget.

The bound text is journaled by the pipeline like any binder output, so `Replayer(events).verify()`
rebuilds every request without the store.

With `mirror_history=True` the binder first folds the pipeline's history (and the tool results
still pending for this turn) into the store, new messages only, so the store sees everything the agent has seen; otherwise the application adds
items itself (memories, file reads, tool results it keeps out of the history).

Note: an EXPLAIN (`pipe.explain()`) runs binders too, so it serves (and records) a window as well.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from engine.errors import ConfigError
from engine.store.ingest import MessageFolder
from engine.store.store import ContextStore
from engine.store.window import Entry, Window
from engine.tokens import MESSAGE_OVERHEAD_TOKENS, REPLY_PRIMING_TOKENS, Budget
from engine.types import Priority, SectionKind

QueryFn = Callable[[Any], "str | None"]

_MAX_SHRINKS = 6
_SEPARATOR = "\n\n"


def render_entry(e: Entry) -> str:
    """An entry as section text, always starting with its id."""
    if e.text.startswith(f"[#{e.id} "):
        return e.text  # stubs, summaries, file reads and memories carry their header already
    return f"[#{e.id} {e.kind}]\n{e.text}"


def render_window(window: Window) -> str:
    return _SEPARATOR.join(render_entry(e) for e in window.entries)


def default_query(pipe: Any) -> str | None:
    """The text of the last two messages of the pipeline's history plus anything pending: what the
    agent is working on now, which is what BM25 should rank the store's items against."""
    from engine.artifacts import Text, ToolCall, ToolResult

    parts: list[Any] = []
    for msg in pipe.history[-2:]:  # a slice: the history may hold old messages on disk
        parts.extend(msg.parts)
    parts.extend(pipe.pending)
    texts: list[str] = []
    for p in parts:
        if isinstance(p, Text):
            texts.append(p.text)
        elif isinstance(p, ToolResult):
            texts.append(p.content)
        elif isinstance(p, ToolCall):
            texts.append(p.arguments)
    q = "\n".join(texts).strip()
    return q or None


class StoreSource:
    """The binder registered by `attach_store` (callable with the section budget)."""

    def __init__(
        self,
        pipe: Any,
        store: ContextStore,
        section_id: str,
        query_fn: QueryFn | None,
        *,
        sticky: bool,
        mirror_history: bool,
    ) -> None:
        self.pipe = pipe
        self.store = store
        self.section_id = section_id
        self.query_fn = query_fn if query_fn is not None else default_query
        self.sticky = sticky
        self.folder = MessageFolder(store) if mirror_history else None
        self.last_window: Window | None = None
        self.last_text = ""
        self._lock = threading.Lock()  # Bind runs binders in worker threads; a store is one-at-a-time

    def __call__(self, budget: int) -> str:
        with self._lock:
            return self._bind(int(budget))

    def _bind(self, budget: int) -> str:
        if budget <= REPLY_PRIMING_TOKENS + MESSAGE_OVERHEAD_TOKENS:
            return ""  # no room for even one item: an empty section, not an error
        pipe = self.pipe
        if self.folder is not None:
            self.folder.fold(pipe.history, pipe.pending)
        query = self.query_fn(pipe)
        counter = pipe.counter
        tok = counter.tokenizer
        ask = budget
        window: Window | None = None
        text = ""
        for _ in range(_MAX_SHRINKS):
            # margin 0: the section budget is already what the planner can give this section.
            # advance_turn=False: a window re-requested smaller is the same engine turn, and moving the
            # store's turn per attempt made recency and sticky growth count turns that never happened.
            # The turn moves once, below, after the window that went in is recorded at this turn.
            window = self.store.context_get(
                Budget(ask, margin=0.0), model=tok, query=query, sticky=self.sticky, advance_turn=False
            )
            text = render_window(window)
            over = counter.count(text) - budget
            if over <= 0:
                break
            ask -= over + 8  # headers and separators the store did not count: ask for less
            if ask <= REPLY_PRIMING_TOKENS + MESSAGE_OVERHEAD_TOKENS:
                text = ""
                break
        else:
            text = ""  # could not fit (pathological tokenizer disagreement): an empty section
        assert window is not None
        self.store.record_binding(self.section_id, int(pipe.turn))
        self.store.advance_turn()
        self.last_window, self.last_text = window, text
        return text


def attach_store(
    pipe: Any,
    store: ContextStore,
    section_id: str = "memory",
    query_fn: QueryFn | None = None,
    *,
    kind: SectionKind | str = SectionKind.MEMORY,
    budget: int = 4000,
    priority: Priority = Priority.NORMAL,
    sticky: bool = True,
    mirror_history: bool = False,
    timeout_s: float = 2.0,
    name: str = "",
) -> StoreSource:
    """Register a store-backed section on `pipe` and return its binder.

    `budget` is the section's token budget (the source's estimate and max_tokens; Bind passes it to
    the binder). `query_fn(pipe)` gives the BM25 query for the turn (default: the last messages).
    `kind` must not be history (the pipeline builds that itself): use memory (default) or context.
    """
    k = SectionKind(kind)
    if k is SectionKind.HISTORY:
        raise ConfigError(
            "the pipeline builds the history section itself; attach the store as a memory or context section"
        )
    if budget <= 0:
        raise ConfigError(f"store section budget must be a positive number of tokens, got {budget}")
    src = StoreSource(pipe, store, section_id, query_fn, sticky=sticky, mirror_history=mirror_history)
    pipe.add_source(
        section_id,
        k,
        binder=src,
        priority=priority,
        estimate=budget,
        max_tokens=budget,
        timeout_s=timeout_s,
        name=name or f"context store ({section_id})",
    )
    return src
