"""The `ContextStore` facade: add originals, link them, and serve explained, budgeted windows."""

from __future__ import annotations

import functools
import os
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from itertools import compress
from pathlib import Path
from typing import Any, NamedTuple, ParamSpec, TypeVar

from ..errors import ConfigError
from ..hashing import content_hash, sha256_hex
from ..tokens import (
    MESSAGE_OVERHEAD_TOKENS,
    REPLY_PRIMING_TOKENS,
    Budget,
    CharTokenizer,
    Tokenizer,
    default_tokenizer,
)
from . import recorder
from .compaction import (
    RULES_VERSION,
    Summarizer,
    duplicate_text,
    json_shape,
    render_full,
    rule_summary,
    stub_text,
    subtask_body,
    summary_key,
)
from .config import StoreConfig
from .errors import PinsExceedBudgetError, StoreError, UnknownItemError
from .items import REFERENCE_LINKS, Item, ItemMeta, Kind, LinkKind
from .schema import connect, translate
from .scoring import bm25_relevance, query_terms, score_items
from .staleness import StaleWatcher, file_sha, normalise
from .window import MAX_CONSECUTIVE_MISSES, Dropped, DroppedList, Entry, Option, Shape, Window, make_shape

P = ParamSpec("P")
R = TypeVar("R")

MAX_BUDGET = 100_000_000


_new = tuple.__new__  # C-level NamedTuple construction (hundreds of entries per window)

_NO_FIT = "did not fit: lower value per token than what was kept"


class _Plan(NamedTuple):
    """Everything about a fresh solve that does not depend on the turn or the query's BM25 scores.

    Built once per change of the items (and per query only when JSON summaries depend on it), as flat
    parallel lists so a solve is a few list comprehensions, one sort and a short walk.
    """

    pins: list[ItemMeta]
    pin_cost: list[tuple[int, int]]
    excluded: list[tuple[ItemMeta, int, str]]  # (item, full cost, reason) never offered to the solver
    # Candidates (one per dedup group, the newest copy), in id order:
    cand: list[ItemMeta]
    cand_ids: list[int]
    cand_midx: list[int]  # index into the store's metas (and the per-call score list)
    shapes: list[Shape]
    full_cost: list[int]
    dup: list[tuple[int, tuple[int, ...]]]  # (candidate position, member meta indices) for groups > 1
    # Hull steps of every candidate, ordered by (candidate, level): cost of the step and value per token
    # of the step per unit of the candidate's weight (score x size).
    step_cand: list[int]
    step_level: list[int]
    step_dt: list[int]
    step_ratio: list[float]
    # Score parts that change only when the items do: base + refs + importance, the turn, staleness.
    static: list[float]
    turns: list[int]
    distinct_turns: frozenset[int]
    stale_idx: list[int]
    midx: dict[int, int]  # item id -> meta index
    pos_of: dict[int, int]  # meta index -> candidate position


_INF_RATIO = 1e300  # a free step (0 extra tokens) comes first, like an infinite value per token


def _translating(fn: Callable[P, R]) -> Callable[P, R]:
    """Public methods surface sqlite errors as StoreCorruptError / StoreLockedError with the file name."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except sqlite3.Error as exc:
            self = args[0]
            assert isinstance(self, ContextStore)
            raise translate(exc, self.path, self.timeout_s) from exc

    return wrapper


def tokenizer_for(model: str | Tokenizer | None) -> Tokenizer:
    """The tokenizer used to count a window for `model`.

    Every chat model is counted with cl100k_base (offline) unless the caller passes its own
    Tokenizer; "chars" selects the 4-characters-per-token estimate. Counts are cached per tokenizer
    name, so two tokenizers never share a cached count.
    """
    if model is None or isinstance(model, str):
        if model is not None and model.lower() in ("chars", "chars/4"):
            return _CHARS
        return default_tokenizer()
    return model


_CHARS = CharTokenizer()


def parse_budget(budget: int | Budget) -> Budget:
    if isinstance(budget, Budget):
        b = budget
    else:
        if isinstance(budget, bool) or not isinstance(budget, int):
            raise ConfigError(f"budget must be a whole number of tokens, got {budget!r}")
        if budget <= 0:
            raise ConfigError(f"budget must be a positive number of tokens, got {budget}")
        if budget > MAX_BUDGET:
            raise ConfigError(f"budget {budget} is absurd: no model has a window above {MAX_BUDGET:,} tokens")
        b = Budget(budget)
    if b.limit <= 0:
        raise ConfigError(f"budget must be a positive number of tokens, got {b.limit}")
    if b.usable <= REPLY_PRIMING_TOKENS + MESSAGE_OVERHEAD_TOKENS:
        raise ConfigError(f"budget {b.limit} is too small to hold even one message")
    return b


class ContextStore:
    """One SQLite file per run. Originals are never rewritten; windows, stubs and summaries are views.

    Not thread-safe: use one ContextStore per thread (several processes may share the file; SQLite's
    WAL mode and the busy timeout arbitrate).
    """

    def __init__(
        self,
        path: str | Path,
        *,
        config: StoreConfig | None = None,
        summarizer: Summarizer | None = None,
        summary_prompt_version: str = "v1",
        timeout_s: float = 5.0,
    ) -> None:
        self.path = os.fspath(path)
        self.timeout_s = timeout_s
        self.config = config or StoreConfig()
        self.summarizer = summarizer
        self.summary_prompt_version = summary_prompt_version
        self._conn = connect(self.path, timeout_s)
        self._metas: list[ItemMeta] = []
        self._by_id: dict[int, ItemMeta] = {}
        self._stale: frozenset[int] = frozenset()
        self._covering: frozenset[int] = frozenset()  # summary items that currently stand for others
        self._turn = 0
        self._dirty = True
        self._data_version = -1
        self._items: dict[int, Item] = {}  # originals are immutable, so this cache never goes stale
        self._counts: dict[str, dict[str, int]] = {}  # tokenizer -> text hash -> tokens
        self._counts_new: list[tuple[str, str, int]] = []
        self._memo: dict[tuple[Any, ...], int] = {}  # (tokenizer, id, form, variant) -> tokens
        self._last: dict[str, Window] = {}  # lane -> last window served (sticky state)
        self._is_json: dict[int, bool] = {}
        self._shapes: dict[tuple[Any, ...], Shape] = {}
        # (tokenizer, id, form, stale, query variant, duplicate_of) -> (text, tokens, kind, role):
        # an item's text in a form never changes, so a window is assembled from cached strings.
        self._forms: dict[tuple[Any, ...], tuple[str, int, str, str]] = {}
        self._gen = 0  # bumped whenever the in-memory item metadata changes
        self._has_json = False  # any JSON body: only then do summaries (and plans) depend on the query
        self._plan_cache: tuple[tuple[Any, ...], _Plan] | None = None
        self._watcher: StaleWatcher | None = None
        self.last_window_id = 0  # flight-recorder row of the last window served

    # ---- lifecycle --------------------------------------------------------------------------

    def close(self) -> None:
        if self._watcher is not None:
            self._watcher.stop()
            self._watcher = None
        self._conn.close()

    def __enter__(self) -> ContextStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- writing ----------------------------------------------------------------------------

    @_translating
    def add(
        self,
        body: str,
        kind: Kind | str = Kind.USER,
        *,
        pin: bool = False,
        importance: float = 0.0,
        source: str | None = None,
        file_hash: str | None = None,
        timestamp: float | None = None,
        links: Iterable[tuple[LinkKind | str, int]] = (),
    ) -> int:
        """Store an original and return its id. `links` are (kind, target id) from the new item."""
        k = kind if isinstance(kind, Kind) else Kind.parse(kind)
        if not isinstance(body, str):
            raise TypeError(f"item body must be str, got {type(body).__name__}")
        if not 0.0 <= float(importance) <= 1.0:
            raise ConfigError(f"importance must be between 0 and 1, got {importance}")
        if k is Kind.FILE_READ and source:
            source = normalise(source)
            if file_hash is None:
                file_hash = file_sha(source)
        link_list = [(lk if isinstance(lk, LinkKind) else LinkKind.parse(lk), int(dst)) for lk, dst in links]
        # Was the in-memory metadata current before this write? Then patch it instead of reloading
        # (a reload per add would make building a 5,000-item store quadratic).
        fresh = not self._dirty and self._current_data_version() == self._data_version
        digest = sha256_hex(body)
        self._begin()
        try:
            turn = self._read_turn()
            cur = self._conn.execute(
                "INSERT INTO items(kind, body, hash, turn, ts, source, file_hash, pinned, importance) "
                "VALUES (?,?,?,?,?,?,?,?,?)",
                (k.value, body, digest, turn, timestamp, source, file_hash, int(pin), float(importance)),
            )
            new_id = int(cur.lastrowid or 0)
            if k is Kind.FILE_READ and source and file_hash:
                self._conn.execute(
                    "INSERT INTO file_state(path, hash) VALUES (?, ?) ON CONFLICT(path) DO NOTHING",
                    (source, file_hash),
                )
            for lk, dst in link_list:
                self._insert_link(new_id, dst, lk)
            self._conn.execute("COMMIT")
        except BaseException:
            self._rollback()
            raise
        self._items[new_id] = Item(
            new_id, k, body, digest, turn, timestamp, source, file_hash, pin, float(importance)
        )
        simple = k is not Kind.SUMMARY and all(lk in REFERENCE_LINKS for lk, _ in link_list)
        if fresh and simple and (not self._metas or self._metas[-1].id < new_id):
            m = ItemMeta(new_id, k, digest, turn, source, file_hash, pin, float(importance))
            self._metas.append(m)
            self._by_id[new_id] = m
            self._gen += 1
            self._has_json = self._has_json or self._json_item(new_id)
            for _, dst in link_list:
                if dst in self._by_id:
                    self._by_id[dst].inbound += 1
        else:
            self._dirty = True
        return new_id

    def add_file_read(self, path: str | Path, body: str | None = None, **kw: Any) -> int:
        """Record that the agent read `path` (its current bytes are hashed for staleness checks)."""
        p = normalise(path)
        if body is None:
            try:
                body = Path(p).read_text(encoding="utf-8", errors="replace")
            except OSError as exc:
                raise StoreError(f"cannot read {p}: {exc.strerror}") from exc
        return self.add(body, Kind.FILE_READ, source=p, file_hash=file_sha(p), **kw)

    @_translating
    def link(self, src: int, dst: int, kind: LinkKind | str = LinkKind.CITES) -> None:
        lk = kind if isinstance(kind, LinkKind) else LinkKind.parse(kind)
        fresh = not self._dirty and self._current_data_version() == self._data_version
        self._begin()
        try:
            existed = self._conn.execute(
                "SELECT 1 FROM links WHERE src=? AND dst=? AND kind=?", (src, dst, lk.value)
            ).fetchone()
            self._insert_link(src, dst, lk)
            self._conn.execute("COMMIT")
        except BaseException:
            self._rollback()
            raise
        if fresh and lk in REFERENCE_LINKS and dst in self._by_id:
            if not existed:
                self._by_id[dst].inbound += 1
                self._gen += 1
        else:
            self._dirty = True

    @_translating
    def pin(self, item_id: int, pinned: bool = True) -> None:
        self._update_meta(item_id, "pinned", int(pinned))

    @_translating
    def set_importance(self, item_id: int, importance: float) -> None:
        if not 0.0 <= importance <= 1.0:
            raise ConfigError(f"importance must be between 0 and 1, got {importance}")
        self._update_meta(item_id, "importance", float(importance))

    # ---- reading ----------------------------------------------------------------------------

    @_translating
    def get(self, item_id: int) -> Item:
        return self._item(item_id)

    @_translating
    def expand(self, item_id: int) -> str:
        """The original behind a stub or summary. For a summary item: the originals it stands for."""
        item = self._item(item_id)
        if item.kind is Kind.SUMMARY:
            originals = self._originals(item_id)
            if originals:
                return "\n\n".join(render_full(self._item(i)) for i in originals)
        return item.body

    @staticmethod
    def expand_tool_schema() -> dict[str, Any]:
        """The JSON tool definition (OpenAI function style) that lets an agent call `expand`."""
        return {
            "type": "function",
            "function": {
                "name": "expand",
                "description": (
                    "Return the full original text of a context item that is shown only as a stub or "
                    "summary. Stubs and summaries start with [#ID kind ...]; pass that ID."
                ),
                "parameters": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "integer", "description": "the number after # in the stub"}
                    },
                    "required": ["id"],
                    "additionalProperties": False,
                },
            },
        }

    @_translating
    def advance_turn(self) -> int:
        """Move the turn counter on without serving a window (importers replaying a past run)."""
        self._begin()
        try:
            t = self._read_turn() + 1
            self._conn.execute("UPDATE meta SET value=? WHERE key='turn'", (str(t),))
            self._conn.execute("COMMIT")
        except BaseException:
            self._rollback()
            raise
        self._dirty = True
        return t

    @property
    def turn(self) -> int:
        self._refresh()
        return self._turn

    def __len__(self) -> int:
        self._refresh()
        return len(self._metas)

    @_translating
    def windows(self, turn: int) -> list[dict[str, Any]]:
        """Manifests of every window served at `turn` (flight recorder)."""
        return recorder.for_turn(self._conn, turn)

    @_translating
    def recorded_turns(self) -> list[int]:
        return recorder.turns(self._conn)

    @_translating
    def record_binding(self, source: str, pipe_turn: int, window_id: int | None = None) -> None:
        """Key a served window (default: the last one) by a Pipeline section and the pipeline's turn."""
        wid = self.last_window_id if window_id is None else int(window_id)
        if wid <= 0:
            raise StoreError("no window has been served yet: call context_get before record_binding")
        self._begin()
        try:
            recorder.bind(self._conn, source, pipe_turn, wid)
            self._conn.execute("COMMIT")
        except BaseException:
            self._rollback()
            raise

    @_translating
    def bound_window(self, source: str, pipe_turn: int) -> dict[str, Any] | None:
        """The manifest of the window bound into pipeline section `source` at `pipe_turn`, if any."""
        return recorder.bound(self._conn, source, pipe_turn)

    @_translating
    def bound_turns(self, source: str) -> list[int]:
        return recorder.bound_turns(self._conn, source)

    # ---- compaction -------------------------------------------------------------------------

    @_translating
    def summarize(self, ids: Sequence[int], *, roll_from: int | None = None) -> int:
        """Summarise items through the application's callback into a new summary item.

        With `roll_from`, the new summary covers that summary's originals plus `ids`, and is produced
        from those originals, never from the previous summary's text (errors do not compound).
        The text is cached by the hash of the originals plus the prompt version.
        """
        if self.summarizer is None:
            raise StoreError("no summarizer configured: pass summarizer=callable to ContextStore")
        originals: set[int] = set()
        for i in ids:
            originals |= set(self._originals(i)) if self._item(i).kind is Kind.SUMMARY else {i}
        if roll_from is not None:
            if self._item(roll_from).kind is not Kind.SUMMARY:
                raise StoreError(f"#{roll_from} is not a summary item; roll_from needs one")
            originals |= set(self._originals(roll_from))
        if not originals:
            raise StoreError("nothing to summarise: give at least one item id")
        ordered = sorted(originals)
        items = [self._item(i) for i in ordered]
        producer = f"callback:{self.summary_prompt_version}"
        key = summary_key([it.hash for it in items], producer)
        row = self._conn.execute("SELECT text FROM derived WHERE key=?", (key,)).fetchone()
        if row is not None:
            text = str(row[0])
        else:
            text = self.summarizer([render_full(it) for it in items])
            self._conn.execute(
                "INSERT OR IGNORE INTO derived(key, producer, text) VALUES (?,?,?)", (key, producer, text)
            )
        links: list[tuple[LinkKind | str, int]] = [(LinkKind.SUMMARIZES, i) for i in ordered]
        if roll_from is not None:
            links.append((LinkKind.SUPERSEDES, roll_from))
        return self.add(text, Kind.SUMMARY, source=f"summary of {len(ordered)} items", links=links)

    @_translating
    def collapse_subtask(self, step_ids: Sequence[int], result_id: int) -> int:
        """A finished subtask becomes one item: its result plus a link to its steps (no model needed)."""
        if not step_ids:
            raise StoreError("collapse_subtask needs the ids of the subtask's steps")
        result = self._item(result_id)
        for s in step_ids:
            self._item(s)  # raises UnknownItemError early, before anything is written
        covered = sorted(set(step_ids) | {result_id})
        body = subtask_body(sorted(set(step_ids)), result)
        return self.add(
            body, Kind.SUMMARY, source="subtask", links=[(LinkKind.SUMMARIZES, i) for i in covered]
        )

    # ---- staleness --------------------------------------------------------------------------

    @_translating
    def check_stale(self, paths: Iterable[str] | None = None) -> list[int]:
        """Re-hash tracked files (or just `paths`); return ids of file reads whose content is now old."""
        if paths is None:
            todo = [
                str(r[0])
                for r in self._conn.execute(
                    "SELECT DISTINCT source FROM items WHERE kind=? AND source IS NOT NULL ORDER BY source",
                    (Kind.FILE_READ.value,),
                )
            ]
        else:
            todo = sorted({normalise(p) for p in paths})
        if todo:
            self._begin()
            try:
                for p in todo:
                    self._conn.execute(
                        "INSERT INTO file_state(path, hash) VALUES (?, ?) ON CONFLICT(path) DO UPDATE SET hash=excluded.hash",
                        (p, file_sha(p)),
                    )
                self._conn.execute("COMMIT")
            except BaseException:
                self._rollback()
                raise
            self._dirty = True
        self._refresh()
        return sorted(self._stale)

    def watch(self) -> StaleWatcher:
        """Start a watchfiles thread over the directories of every file read so far."""
        if self._watcher is not None:
            self._watcher.stop()
        paths = [
            str(r[0])
            for r in self._conn.execute(
                "SELECT DISTINCT source FROM items WHERE kind=? AND source IS NOT NULL ORDER BY source",
                (Kind.FILE_READ.value,),
            )
        ]
        self._watcher = StaleWatcher(paths).start()
        return self._watcher

    def stale_ids(self) -> list[int]:
        self._drain_watcher()
        self._refresh()
        return sorted(self._stale)

    # ---- windows ----------------------------------------------------------------------------

    @_translating
    def context_get(
        self,
        budget: int | Budget,
        model: str | Tokenizer | None = None,
        query: str | None = None,
        *,
        sticky: bool = True,
        advance_turn: bool = True,
    ) -> Window:
        """Serve a window that fits `budget`: pins first (id order), then history in time order.

        sticky=True (default): reuse the previous window of this (tokenizer, budget) lane plus the
        items added since, and re-solve only when that would overflow; a re-solve fills to
        `resolve_fill` of the budget so the next turns can append again (the provider's prefix cache
        breaks once per compaction, not once per turn). sticky=False solves from scratch.
        Each served window is recorded; with advance_turn the store's turn counter moves on.
        """
        b = parse_budget(budget)
        tok = tokenizer_for(model)
        lane = f"{tok.name}:{b.limit}:{b.margin}"
        self._drain_watcher()
        self._refresh()
        terms = query_terms(query)
        window: Window | None = None
        notes: list[str] = []
        mode = "fresh"
        if sticky:
            prev: Window | dict[str, Any] | None = self._last.get(lane)
            if prev is None:
                prev = recorder.last_for_lane(self._conn, lane)
            if prev is not None:
                window, why = self._sticky(prev, b, tok, lane, query)
                if window is None:
                    mode = "resolved"
                    notes.append(why)
        if window is None:
            relevance = bm25_relevance(self._conn, terms, len(self._metas)) if terms else {}
            window = self._solve(b, tok, lane, query, terms, relevance, mode, sticky, notes)
        self._begin()
        try:
            self.last_window_id = recorder.record(self._conn, window)
            self._flush_counts()
            if advance_turn:
                self._conn.execute("UPDATE meta SET value=? WHERE key='turn'", (str(self._turn + 1),))
            self._conn.execute("COMMIT")
        except BaseException:
            self._rollback()
            raise
        if advance_turn:
            self._turn += 1
        self._last[lane] = window
        self._data_version = self._current_data_version()
        return window

    # ---- internals: solving -----------------------------------------------------------------

    def _solve(
        self,
        b: Budget,
        tok: Tokenizer,
        lane: str,
        query: str | None,
        terms: tuple[str, ...],
        relevance: dict[int, float],
        mode: str,
        sticky: bool,
        notes: list[str],
    ) -> Window:
        cfg = self.config
        plan = self._plan(tok, terms)
        pins, pin_cost = plan.pins, plan.pin_cost
        pinned_tokens = sum(t for _, t in pin_cost)
        if pinned_tokens + REPLY_PRIMING_TOKENS > b.usable:
            raise PinsExceedBudgetError(pinned_tokens + REPLY_PRIMING_TOKENS, b.usable, b.limit, pin_cost)

        # ---- scores: one float per item, from the cached static part, the turn and the query
        now = self._turn
        decay = 0.5 ** (1.0 / cfg.half_life_turns)
        pw = {t: (decay ** (now - t) if now > t else 1.0) for t in plan.distinct_turns}
        wr = cfg.w_recency
        rec_w = {t: wr * v for t, v in pw.items()}
        totals = [st + rec_w[t] for st, t in zip(plan.static, plan.turns, strict=True)]
        if relevance:
            wl = cfg.w_relevance
            midx = plan.midx
            for item_id, rel in relevance.items():
                i = midx.get(item_id)
                if i is not None:
                    totals[i] += wl * rel
        if plan.stale_idx:
            sf = cfg.stale_factor
            for i in plan.stale_idx:
                totals[i] *= sf

        cand, cand_midx, shapes, full_cost = plan.cand, plan.cand_midx, plan.shapes, plan.full_cost
        n = len(cand)
        room = b.usable - REPLY_PRIMING_TOKENS - pinned_tokens
        everything = sum(full_cost)
        chosen: dict[int, Option] = {}  # candidate position -> form
        if everything <= room:
            chosen = {p: shapes[p].options[0] for p in range(n)}  # all fit in full: nothing to decide
        else:
            if sticky:
                # Leave headroom so the next turns append without another cache-breaking re-solve.
                headroom = self._headroom(plan, b.usable)
                room = max(0, room - headroom)
                notes.append(
                    f"compacted: history needs {everything} tokens, {room} left after pins "
                    f"({headroom} tokens of headroom kept for the next turns' appends)"
                )
            if cfg.keep_recent_turns > 0:
                for p in range(n - 1, -1, -1):  # newest first
                    if now - cand[p].turn >= cfg.keep_recent_turns:
                        break
                    full = shapes[p].options[0]
                    if full.tokens <= room:
                        chosen[p] = full
                        room -= full.tokens
            self._knapsack(plan, totals, chosen, room)

        # ---- the window: pins, then chosen candidates in id order
        entries: list[Entry] = []
        imp_cap = 1.0
        for m in pins:
            entries.append(self._entry(tok, m, "full", totals[plan.midx[m.id]], ("pinned",), terms))
        for p in sorted(chosen):
            m = cand[p]
            total = totals[cand_midx[p]]
            reasons = self._reasons_for(
                m, pw[m.turn], relevance.get(m.id, 0.0), min(m.importance, imp_cap), total
            )
            entries.append(self._entry(tok, m, chosen[p].form, total, reasons, terms))

        explicit = [
            Dropped(m.id, m.kind.value, totals[plan.midx[m.id]], cost, reason)
            for m, cost, reason in plan.excluded
        ]
        if len(chosen) == n:
            nofit_ids: list[int] = []
            nofit_scores: list[float] = []
        else:
            keep = bytearray(b"\x01") * n  # C-level filtering: thousands of items are left out
            for p in chosen:
                keep[p] = 0
            nofit_ids = list(compress(plan.cand_ids, keep))
            nofit_scores = list(compress(map(totals.__getitem__, cand_midx), keep))
        by_id = self._by_id
        midx = plan.midx

        def lookup(item_id: int) -> tuple[str, int, str]:
            return by_id[item_id].kind.value, full_cost[plan.pos_of[midx[item_id]]], _NO_FIT

        dropped = DroppedList(explicit, nofit_ids, nofit_scores, lookup)
        return self._finish(b, tok, lane, query, mode, entries, dropped, notes, presorted=True)

    def _headroom(self, plan: _Plan, usable: int) -> int:
        """Tokens a sticky re-solve leaves free so the next turns can append without re-solving.

        Adaptive: the recent growth per turn (full cost of the items added over the last
        `growth_window_turns` turns) times `headroom_turns`, capped at (1 - resolve_fill) of the
        budget. When even that cap cannot hold one turn's growth, the next turn re-solves anyway, so
        no headroom is kept and the whole budget holds context instead.
        """
        cfg = self.config
        cap = int(usable * (1.0 - cfg.resolve_fill))
        if cap <= 0:
            return 0
        span = max(1, int(cfg.growth_window_turns))
        since = self._turn - span
        recent = 0
        for p in range(len(plan.cand) - 1, -1, -1):
            if plan.cand[p].turn < since:
                break
            recent += plan.full_cost[p]
        growth = recent / span
        if growth <= 0:
            return cap
        if growth > cap:
            return 0
        return min(cap, int(growth * cfg.headroom_turns))

    def _knapsack(self, plan: _Plan, totals: list[float], chosen: dict[int, Option], capacity: int) -> None:
        """Greedy multiple-choice knapsack over the plan's hull steps; adds to `chosen` in place.

        Each candidate's hull steps have strictly decreasing value per token, so sorting every step
        by (value per token desc, candidate, level) is exactly the order in which a heap over each
        candidate's next step would pop them (the sort is stable and steps are pre-ordered by
        candidate and level). A step that does not fit ends that candidate's upgrades; its most
        valuable cheaper off-hull form is taken if it fits. After MAX_CONSECUTIVE_MISSES misses in a
        row the budget is within a stub of full and the walk stops.
        """
        if capacity <= 0:
            return
        size = [s.size for s in plan.shapes]
        w = [totals[mi] * sz for mi, sz in zip(plan.cand_midx, size, strict=True)]
        for p, members in plan.dup:  # a duplicate group is worth its best member
            w[p] = max(totals[i] for i in members) * size[p]
        effs = [w[c] * r for c, r in zip(plan.step_cand, plan.step_ratio, strict=True)]
        order = sorted(range(len(effs)), key=effs.__getitem__, reverse=True)
        done: set[int] = set(chosen)
        if min(w, default=1.0) <= 0:
            done.update(p for p, x in enumerate(w) if x <= 0)
        level_of: dict[int, int] = {}
        shapes, step_cand, step_level, step_dt = plan.shapes, plan.step_cand, plan.step_level, plan.step_dt
        remaining = capacity
        misses = 0
        for j in order:
            c = step_cand[j]
            if c in done:
                continue
            dt = step_dt[j]
            if dt > remaining:
                misses += 1
                done.add(c)
                shape = shapes[c]
                lv = level_of.get(c)
                cur_t = shape.hull[lv].tokens if lv is not None else 0
                cur_f = shape.hull[lv].value if lv is not None else 0.0
                for o in shape.by_value:
                    if o.value <= cur_f:
                        break
                    if o.tokens - cur_t <= remaining:
                        remaining -= o.tokens - cur_t
                        level_of[c] = -1 - shape.options.index(o)  # negative = an off-hull option
                        misses = 0
                        break
                if misses >= MAX_CONSECUTIVE_MISSES or remaining <= 0:
                    break
                continue
            misses = 0
            remaining -= dt
            level_of[c] = step_level[j]
            if remaining <= 0:
                break
        for c, lv in level_of.items():
            shape = shapes[c]
            chosen[c] = shape.hull[lv] if lv >= 0 else shape.options[-1 - lv]

    def _sticky(
        self,
        prev: Window | dict[str, Any],
        b: Budget,
        tok: Tokenizer,
        lane: str,
        query: str | None,
    ) -> tuple[Window | None, str]:
        """Previous window + items added since, if it still fits and nothing it relied on changed.

        Retained entries keep their text, form and score from the window that chose them: their bytes
        must not move (that is the point), and re-scoring them would only churn the manifest.
        """
        prev_dropped: Sequence[Dropped] | None
        if isinstance(prev, Window):
            prev_entries = list(prev.entries)
            max_id = prev.max_item_id
            prev_dropped = prev.dropped  # immutable: shared, never copied
        else:  # from the flight recorder (another process served it): re-render from ids and forms
            prev_entries = []
            prev_terms = query_terms(prev.get("query"))
            for e in prev["items"]:
                m0 = self._by_id.get(int(e["id"]))
                if m0 is None:
                    return None, f"re-solved: item #{e['id']} of the previous window is unknown"
                dup = e.get("duplicate_of")
                prev_entries.append(
                    self._entry(
                        tok,
                        m0,
                        str(e["form"]),
                        float(e["score"]),
                        tuple(e["reasons"]),
                        prev_terms,
                        stale=bool(e["stale"]),
                        duplicate_of=int(dup) if dup is not None else None,
                    )
                )
            max_id = int(prev["max_item_id"])
            prev_dropped = None
        pins = [m.id for m in self._metas if m.pinned]
        if [e.id for e in prev_entries if e.pinned] != pins:
            return None, "re-solved: the set of pinned items changed"
        in_window_hash: dict[str, int] = {}
        for e in prev_entries:
            m = self._by_id.get(e.id)
            if m is None:
                return None, f"re-solved: item #{e.id} of the previous window is unknown"
            if not m.pinned and (m.covered_by is not None or m.superseded):
                return None, f"re-solved: #{m.id} is now covered by summary #{m.covered_by}"
            if e.form in ("full", "summary"):
                in_window_hash.setdefault(m.hash, m.id)
        new_metas: list[ItemMeta] = []
        for m in reversed(self._metas):  # only the tail is new: stop at the first old id
            if m.id <= max_id:
                break
            new_metas.append(m)
        new_metas.reverse()
        scores = score_items(new_metas, self._turn, {}, self._stale, self.config)
        entries = list(prev_entries)
        used = REPLY_PRIMING_TOKENS + sum(e.tokens for e in entries)
        for m in new_metas:
            if m.superseded:
                continue
            if m.kind is Kind.SUMMARY and m.id in self._covering:
                return None, f"re-solved: new summary #{m.id} replaces items"
            if m.covered_by is not None:
                continue
            if m.hash in in_window_hash:
                e = self._entry(
                    tok,
                    m,
                    "stub",
                    scores[m.id].total,
                    ("appended; duplicate content",),
                    (),
                    duplicate_of=in_window_hash[m.hash],
                )
            else:
                e = self._entry(tok, m, "full", scores[m.id].total, ("appended since previous window",), ())
                in_window_hash.setdefault(m.hash, m.id)
            entries.append(e)
            used += e.tokens
            if used > b.usable:
                return (
                    None,
                    f"re-solved: previous window plus new items needs more than {b.usable} usable tokens",
                )
        if prev_dropped is None:
            included = {e.id for e in entries}
            prev_dropped = [
                Dropped(
                    m.id,
                    m.kind.value,
                    0.0,
                    self._full_tokens(tok, m.id) + MESSAGE_OVERHEAD_TOKENS,
                    "left out at the last re-solve (sticky window)",
                )
                for m in self._metas
                if m.id not in included
            ]
        return self._finish(b, tok, lane, query, "sticky", entries, prev_dropped, [], presorted=True), ""

    def _finish(
        self,
        b: Budget,
        tok: Tokenizer,
        lane: str,
        query: str | None,
        mode: str,
        entries: list[Entry],
        dropped: Sequence[Dropped],
        notes: list[str],
        presorted: bool = False,
    ) -> Window:
        used = REPLY_PRIMING_TOKENS + sum(e.tokens for e in entries)
        if used > b.usable:  # the solver guarantees this; fail loudly rather than overrun a provider
            raise StoreError(f"internal error: window of {used} tokens exceeds usable budget {b.usable}")
        messages = [{"role": e.role, "content": e.text} for e in entries]
        return Window(
            budget=b.limit,
            usable=b.usable,
            used=used,
            mode=mode,
            turn=self._turn,
            lane=lane,
            tokenizer=tok.name,
            query=query,
            entries=tuple(entries),
            dropped=dropped if presorted else tuple(sorted(dropped, key=lambda d: d.id)),
            text_hash=content_hash(messages),
            max_item_id=self._metas[-1].id if self._metas else 0,
            notes=tuple(notes),
        )

    def _entry(
        self,
        tok: Tokenizer,
        m: ItemMeta,
        form: str,
        score: float,
        reasons: tuple[str, ...],
        terms: tuple[str, ...],
        *,
        stale: bool | None = None,
        duplicate_of: int | None = None,
    ) -> Entry:
        is_stale = (m.id in self._stale) if stale is None else stale
        variant = terms if form == "summary" and self._json_item(m.id) else ()
        key = (tok.name, m.id, form, is_stale, variant, duplicate_of)
        cached = self._forms.get(key)
        if cached is None:
            item = self._item(m.id)
            ft = self._full_tokens(tok, m.id)
            if form == "full":
                text = render_full(item)
                tokens = ft
            elif form == "summary":
                text = self._summary_text(item, terms)
                tokens = self._summary_tokens(tok, m.id, terms)
            elif duplicate_of is not None:
                text = duplicate_text(item, duplicate_of)
                tokens = self._count(tok, text)
            else:
                text = stub_text(item, ft, is_stale)
                tokens = self._stub_tokens(tok, m.id, ft, is_stale)
            cached = (text, tokens + MESSAGE_OVERHEAD_TOKENS, m.kind.value, m.kind.role)
            self._forms[key] = cached
        text, tokens, kind, role = cached
        if is_stale:
            reasons = (*reasons, "stale: the file changed on disk after this read")
        return _new(
            Entry, (m.id, kind, role, form, text, tokens, score, reasons, m.pinned, is_stale, duplicate_of)
        )

    def _reasons_for(
        self, m: ItemMeta, recency: float, relevance: float, importance: float, total: float
    ) -> tuple[str, ...]:
        out: list[str] = []
        if recency >= 0.5:
            out.append(f"recent ({self._turn - m.turn} turns ago)")
        if relevance > 0:
            out.append(f"relevant to query (bm25 {relevance:.2f})")
        if m.inbound:
            out.append(f"referenced by {m.inbound} item(s)")
        if importance > 0:
            out.append(f"importance {importance:g}")
        if not out:
            out.append(f"best value per token among the rest (score {total:.3f})")
        return tuple(out)

    # ---- internals: token counts and forms ----------------------------------------------------

    def _plan(self, tok: Tokenizer, terms: tuple[str, ...]) -> _Plan:
        """Everything about a solve that does not depend on scores, cached until the items change.

        Exclusions (superseded, covered by a summary, duplicates), the dedup groups, each item's
        shape, its hull steps and the static part of its score are recomputed only after a write;
        per call only the turn-dependent recency, the query's BM25 and the knapsack walk run.
        """
        key = (tok.name, self._gen, terms if self._has_json else ())
        if self._plan_cache is not None and self._plan_cache[0] == key:
            return self._plan_cache[1]
        cfg = self.config
        metas = self._metas
        midx = {m.id: i for i, m in enumerate(metas)}
        pins = [m for m in metas if m.pinned]
        pin_cost = [(m.id, self._full_tokens(tok, m.id) + MESSAGE_OVERHEAD_TOKENS) for m in pins]
        excluded: list[tuple[ItemMeta, int, str]] = []
        pinned_hashes = {m.hash: m.id for m in pins}
        # Dedup: the newest copy of each content hash represents the group (it sits where the agent
        # last saw it); older copies cost nothing. A copy of a pinned item is represented by the pin.
        members: dict[str, list[int]] = {}
        live: list[ItemMeta] = []
        for m in metas:
            if m.pinned:
                continue
            if m.superseded:
                excluded.append((m, self._cost(tok, m.id), "superseded by a rolled-forward summary"))
            elif m.covered_by is not None:
                excluded.append((m, self._cost(tok, m.id), f"covered by summary #{m.covered_by}"))
            elif m.hash in pinned_hashes:
                excluded.append((m, self._cost(tok, m.id), f"duplicate of pinned #{pinned_hashes[m.hash]}"))
            else:
                live.append(m)
                members.setdefault(m.hash, []).append(m.id)
        cand: list[ItemMeta] = []
        cand_midx: list[int] = []
        shapes: list[Shape] = []
        full_cost: list[int] = []
        dup: list[tuple[int, tuple[int, ...]]] = []
        step_cand: list[int] = []
        step_level: list[int] = []
        step_dt: list[int] = []
        step_ratio: list[float] = []
        for m in live:
            group = members[m.hash]
            rep = group[-1]  # metas are in id order: the last is the newest copy
            if rep != m.id:
                excluded.append((m, self._cost(tok, m.id), f"duplicate of #{rep}"))
                continue
            pos = len(cand)
            shape = self._shape(tok, m.id, m.id in self._stale, terms)
            cand.append(m)
            cand_midx.append(midx[m.id])
            shapes.append(shape)
            full_cost.append(shape.options[0].tokens)
            if len(group) > 1:
                dup.append((pos, tuple(midx[i] for i in group)))
            prev_t, prev_v = 0, 0.0
            for lv, o in enumerate(shape.hull):
                dt = o.tokens - prev_t
                step_cand.append(pos)
                step_level.append(lv)
                step_dt.append(dt)
                step_ratio.append(
                    (o.value - prev_v) / (dt if lv == 0 else max(1, dt)) if dt > 0 else _INF_RATIO
                )
                prev_t, prev_v = o.tokens, o.value
        base, wf, wi = cfg.base, cfg.w_refs, cfg.w_importance
        static = [
            base
            + (
                wf * (1.0 - 1.0 / (1.0 + m.inbound)) if m.inbound else 0.0
            )  # saturating: 1st citation counts most
            + wi * (m.importance if m.importance < 1.0 else 1.0)
            for m in metas
        ]
        turns = [m.turn for m in metas]
        stale_idx = [midx[i] for i in sorted(self._stale) if i in midx]
        plan = _Plan(
            pins,
            pin_cost,
            excluded,
            cand,
            [m.id for m in cand],
            cand_midx,
            shapes,
            full_cost,
            dup,
            step_cand,
            step_level,
            step_dt,
            step_ratio,
            static,
            turns,
            frozenset(turns),
            stale_idx,
            midx,
            {mi: p for p, mi in enumerate(cand_midx)},
        )
        self._plan_cache = (key, plan)
        return plan

    def _cost(self, tok: Tokenizer, item_id: int) -> int:
        return self._full_tokens(tok, item_id) + MESSAGE_OVERHEAD_TOKENS

    def _shape(self, tok: Tokenizer, item_id: int, stale: bool, terms: tuple[str, ...]) -> Shape:
        """An item's forms with their costs and value factors (full first), memoised per item."""
        cfg = self.config
        ft = self._full_tokens(tok, item_id)
        summary_variant: tuple[str, ...] = ()
        if ft > cfg.summary_min_tokens and self._json_item(item_id):
            summary_variant = terms
        key = (tok.name, item_id, stale, summary_variant)
        shape = self._shapes.get(key)
        if shape is None:
            opts = [
                Option("full", ft + MESSAGE_OVERHEAD_TOKENS, 1.0),
                Option(
                    "stub",
                    self._stub_tokens(tok, item_id, ft, stale) + MESSAGE_OVERHEAD_TOKENS,
                    cfg.stub_value,
                ),
            ]
            if ft > cfg.summary_min_tokens:
                st = self._summary_tokens(tok, item_id, terms)
                if st <= ft * (1.0 - cfg.summary_min_saving):
                    opts.append(Option("summary", st + MESSAGE_OVERHEAD_TOKENS, cfg.summary_value))
            shape = make_shape(opts, max(1, ft) ** cfg.size_exponent)
            self._shapes[key] = shape
        return shape

    def _json_item(self, item_id: int) -> bool:
        is_json = self._is_json.get(item_id)
        if is_json is None:
            body = self._item(item_id).body
            is_json = body.lstrip()[:1] in ("{", "[") and json_shape(body) is not None
            self._is_json[item_id] = is_json
        return is_json

    def _count(self, tok: Tokenizer, text: str) -> int:
        if not text:
            return 0
        table = self._counts.get(tok.name)
        if table is None:
            table = {
                str(h): int(n)
                for h, n in self._conn.execute(
                    "SELECT hash, tokens FROM token_counts WHERE tokenizer=?", (tok.name,)
                )
            }
            self._counts[tok.name] = table
        h = sha256_hex(text)
        n = table.get(h)
        if n is None:
            n = tok.count(text)
            table[h] = n
            self._counts_new.append((h, tok.name, n))
        return n

    def _flush_counts(self) -> None:
        if self._counts_new:
            self._conn.executemany(
                "INSERT OR IGNORE INTO token_counts(hash, tokenizer, tokens) VALUES (?,?,?)", self._counts_new
            )
            self._counts_new = []

    def _full_tokens(self, tok: Tokenizer, item_id: int) -> int:
        key = (tok.name, item_id, "full")
        n = self._memo.get(key)
        if n is None:
            n = self._count(tok, render_full(self._item(item_id)))
            self._memo[key] = n
        return n

    def _stub_tokens(self, tok: Tokenizer, item_id: int, full_tokens: int, stale: bool) -> int:
        key = (tok.name, item_id, "stub", stale)
        n = self._memo.get(key)
        if n is None:
            n = self._count(tok, stub_text(self._item(item_id), full_tokens, stale))
            self._memo[key] = n
        return n

    def _summary_text(self, item: Item, terms: tuple[str, ...]) -> str:
        return rule_summary(item, self.config.summary_target_tokens, terms)

    def _summary_tokens(self, tok: Tokenizer, item_id: int, terms: tuple[str, ...]) -> int:
        item = self._item(item_id)
        # Only JSON shapes depend on the query; keep the memo key small for everything else.
        variant = terms if self._json_item(item_id) else ()
        key = (tok.name, item_id, "summary", RULES_VERSION, self.config.summary_target_tokens, variant)
        n = self._memo.get(key)
        if n is None:
            n = self._count(tok, self._summary_text(item, terms))
            self._memo[key] = n
        return n

    # ---- internals: rows ----------------------------------------------------------------------

    def _item(self, item_id: int) -> Item:
        it = self._items.get(item_id)
        if it is not None:
            return it
        row = self._conn.execute(
            "SELECT id, kind, body, hash, turn, ts, source, file_hash, pinned, importance FROM items WHERE id=?",
            (int(item_id),),
        ).fetchone()
        if row is None:
            raise UnknownItemError(int(item_id), self.path)
        it = self._row_item(row)
        self._items[it.id] = it
        return it

    def _load_bodies(self) -> None:
        missing = [m.id for m in self._metas if m.id not in self._items]
        if not missing:
            return
        lo = min(missing)
        for row in self._conn.execute(
            "SELECT id, kind, body, hash, turn, ts, source, file_hash, pinned, importance FROM items WHERE id>=? "
            "ORDER BY id",
            (lo,),
        ):
            it = self._row_item(row)
            self._items.setdefault(it.id, it)

    @staticmethod
    def _row_item(row: Sequence[Any]) -> Item:
        return Item(
            int(row[0]),
            Kind(row[1]),
            str(row[2]),
            str(row[3]),
            int(row[4]),
            None if row[5] is None else float(row[5]),
            row[6],
            row[7],
            bool(row[8]),
            float(row[9]),
        )

    def _originals(self, summary_id: int) -> list[int]:
        return [
            int(r[0])
            for r in self._conn.execute(
                "SELECT dst FROM links WHERE src=? AND kind=? ORDER BY dst",
                (summary_id, LinkKind.SUMMARIZES.value),
            )
        ]

    def _insert_link(self, src: int, dst: int, kind: LinkKind) -> None:
        if src == dst:
            raise StoreError(f"an item cannot link to itself (#{src})")
        for i in (src, dst):
            if self._conn.execute("SELECT 1 FROM items WHERE id=?", (i,)).fetchone() is None:
                raise UnknownItemError(i, self.path)
        self._conn.execute(
            "INSERT OR IGNORE INTO links(src, dst, kind) VALUES (?,?,?)", (src, dst, kind.value)
        )

    def _update_meta(self, item_id: int, column: str, value: float | int) -> None:
        self._item(item_id)
        self._begin()
        try:
            self._conn.execute(f"UPDATE items SET {column}=? WHERE id=?", (value, item_id))
            self._conn.execute("COMMIT")
        except BaseException:
            self._rollback()
            raise
        self._items.pop(item_id, None)
        self._dirty = True

    def _begin(self) -> None:
        self._conn.execute("BEGIN IMMEDIATE")

    def _rollback(self) -> None:
        try:
            self._conn.execute("ROLLBACK")
        except sqlite3.Error:
            pass  # no transaction was open (BEGIN itself failed): nothing to undo

    def _read_turn(self) -> int:
        row = self._conn.execute("SELECT value FROM meta WHERE key='turn'").fetchone()
        return int(row[0]) if row else 0

    def _current_data_version(self) -> int:
        return int(self._conn.execute("PRAGMA data_version").fetchone()[0])

    def _drain_watcher(self) -> None:
        if self._watcher is not None:
            changed = self._watcher.drain()
            if changed:
                self.check_stale(changed)

    def _refresh(self) -> None:
        """Reload body-less metadata if this process wrote, or another process committed, since last time."""
        dv = self._current_data_version()
        if not self._dirty and dv == self._data_version:
            return
        self._turn = self._read_turn()
        metas = [
            ItemMeta(int(r[0]), Kind(r[1]), str(r[2]), int(r[3]), r[4], r[5], bool(r[6]), float(r[7]))
            for r in self._conn.execute(
                "SELECT id, kind, hash, turn, source, file_hash, pinned, importance FROM items ORDER BY id"
            )
        ]
        by_id = {m.id: m for m in metas}
        refs = tuple(k.value for k in REFERENCE_LINKS)
        superseded = {
            int(r[0])
            for r in self._conn.execute("SELECT dst FROM links WHERE kind=?", (LinkKind.SUPERSEDES.value,))
        }
        covering: set[int] = set()
        for src, dst, kind in self._conn.execute("SELECT src, dst, kind FROM links ORDER BY src, dst, kind"):
            target = by_id.get(int(dst))
            if target is None:
                continue
            if kind in refs:
                target.inbound += 1
            elif kind == LinkKind.SUMMARIZES.value and int(src) not in superseded:
                covering.add(int(src))
                target.covered_by = max(target.covered_by or 0, int(src))
        for i in superseded:
            if i in by_id:
                by_id[i].superseded = True
        stale = {
            int(r[0])
            for r in self._conn.execute(
                "SELECT i.id FROM items i JOIN file_state f ON f.path = i.source "
                "WHERE i.kind=? AND i.file_hash IS NOT NULL AND i.file_hash != f.hash",
                (Kind.FILE_READ.value,),
            )
        }
        if self._stale != frozenset(stale):
            self._last.clear()  # stale flags alter stub text; let the sticky path re-read the record
        self._metas, self._by_id = metas, by_id
        self._covering = frozenset(covering)
        self._stale = frozenset(stale)
        self._load_bodies()
        self._dirty = False
        self._data_version = dv
        self._gen += 1
        self._has_json = any(
            self._json_item(m.id) for m in metas if self._items[m.id].body.lstrip()[:1] in "{["
        )
