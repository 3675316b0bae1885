"""Items in their window forms (full, stub, summary): text, token counts, shapes, entries, windows.

`Forms` is the store's collaborator for everything derived from an item's text; it owns those caches
(an original never changes, so none of them goes stale) and reads items through `StoreState`.
Token counts are cached per tokenizer by text hash (in memory and in `token_counts`), and per item
and form in a memo, so a solve over thousands of items never re-tokenises a body it has seen.
"""

from __future__ import annotations

import hashlib
import operator
from collections.abc import Callable, Sequence
from json.encoder import encode_basestring
from typing import Any

from engine.errors import ConfigError
from engine.hashing import sha256_hex
from engine.store.compaction import RULES_VERSION, duplicate_text, render_full, rule_summary, stub_text
from engine.store.errors import StoreError
from engine.store.items import Item, ItemMeta
from engine.store.state import StoreState
from engine.store.window import Dropped, Entry, Option, Shape, Window, make_shape
from engine.tokens import MESSAGE_OVERHEAD_TOKENS, REPLY_PRIMING_TOKENS, Budget, Tokenizer

_new = tuple.__new__
_MESSAGE_CACHE_MAX = 100_000


def _message_json(e: Entry) -> bytes:
    """canonical_json({"role": e.role, "content": e.text}), written out: sorted keys put "content"
    first, and the two string literals are what the canonical encoder writes (non-ASCII kept). A fresh
    window of ~900 messages paid ~20 ms in the JSON encoder's per-call set-up for these small dicts."""
    return ('{"content":' + encode_basestring(e.text) + ',"role":' + encode_basestring(e.role) + "}").encode()


_MESSAGE_CACHE_MAX = 200_000  # C-level NamedTuple construction (hundreds of entries per window)


class Forms:
    def __init__(self, state: StoreState) -> None:
        self.state = state
        # (tokenizer, form keys?) -> key -> tokens (see _table)
        self._counts: dict[tuple[str, bool], dict[str, int]] = {}
        self._counts_new: list[tuple[str, str, int]] = []
        self._memo: dict[tuple[Any, ...], int] = {}  # (tokenizer, id, form, variant) -> tokens
        self._shapes: dict[tuple[Any, ...], Shape] = {}
        # (tokenizer, id, form, stale, query variant, duplicate_of) -> (text, tokens, kind, role):
        # an item's text in a form never changes, so a window is assembled from cached strings.
        self._forms: dict[tuple[Any, ...], tuple[str, int, str, str]] = {}
        self._message_json: dict[int, tuple[str, str, bytes]] = {}  # id(text) -> (text, role, JSON)
        self._hash_state: dict[str, tuple[tuple[Entry, ...], Any]] = {}  # lane -> (entries, sha256 state)
        state.on_forget.append(self.forget)

    def forget(self) -> None:
        """Rows were rolled back (a batch or a summarize that failed): every cache here is keyed by item
        id, and the next item added takes a rolled-back item's id, so it was served with the old item's
        token count (a 4-token item counted as 2,503 in the window's budget)."""
        self._counts.clear()
        self._counts_new = []
        self._memo.clear()
        self._shapes.clear()
        self._forms.clear()
        self._message_json.clear()
        self._hash_state.clear()

    # ---- token counts -------------------------------------------------------------------------

    # Two kinds of keys share `token_counts`: "form:<id>:<form>:..." (an item's form, see _form_count)
    # and the SHA-256 hex of a text (see count), so the two ranges never overlap. Each is read on first
    # use: a reopened store's first solve finds every item's counts under form keys and never needs
    # the text hashes (half of the ~25,000 rows at 5,000 items).
    _FORM_RANGE = "hash >= 'form:' AND hash < 'form;'"  # ';' follows ':' in code-point order

    def _table(self, tok: Tokenizer, forms: bool = False) -> dict[str, int]:
        key = (tok.name, forms)
        table = self._counts.get(key)
        if table is None:
            where = self._FORM_RANGE if forms else f"NOT ({self._FORM_RANGE})"
            # hash is TEXT and tokens INTEGER (schema): the rows go into the dict as they come, at C
            # speed.
            table = dict(
                self.state.conn.execute(
                    f"SELECT hash, tokens FROM token_counts WHERE tokenizer=? AND {where}", (tok.name,)
                )
            )
            self._counts[key] = table
        return table

    def count(self, tok: Tokenizer, text: str) -> int:
        if not text:
            return 0
        table = self._table(tok)
        h = sha256_hex(text)
        n = table.get(h)
        if n is None:
            n = tok.count(text)
            if type(n) is not int or not 0 <= n < _MAX_COUNT:
                n = _checked(tok, n)
            table[h] = n
            self._counts_new.append((h, tok.name, n))
        return n

    def _form_count(
        self, tok: Tokenizer, key: tuple[Any, ...], text: Callable[[], str], pk: str | None = None
    ) -> int:
        """Tokens of one item's form, from the memo, else `token_counts` under the form's key, else
        counted. An original never changes, so (item id, form, variant, rules version) names its text:
        a new process reopening the store finds every count without rendering or hashing any text
        (that was most of the first solve of `cp-inspect ctx get`). `pk`, when given, is the stored
        key "form:" + the key's parts after the tokenizer joined by ":" (callers that know the key's
        layout format it directly: a reopened store's first solve looks up ~13,000)."""
        n = self._memo.get(key)
        if n is None:
            table = self._counts.get((tok.name, True))
            if table is None:
                table = self._table(tok, forms=True)
            if pk is None:
                pk = "form:" + ":".join(map(str, key[1:]))
            n = table.get(pk)
            if n is None:
                n = self.count(tok, text())
                table[pk] = n
                self._counts_new.append((pk, tok.name, n))
            self._memo[key] = n
        return n

    def flush_counts(self) -> None:
        """Save the counts made since the last write, inside the caller's write transaction. A get that
        writes nothing (serving._only_read; a read-only store) leaves them here until the next write, and
        a process that ends first does not save them: nothing a user sees is lost (a count is a function
        of the text and the tokenizer, so the next process counts the same texts to the same numbers;
        only its first solve takes longer). close() does not write them either: a write there could wait
        out the busy timeout behind another process's transaction."""
        if self._counts_new:
            self.state.conn.executemany(
                "INSERT OR IGNORE INTO token_counts(hash, tokenizer, tokens) VALUES (?,?,?)", self._counts_new
            )
            self._counts_new = []

    def full_tokens(self, tok: Tokenizer, item_id: int) -> int:
        key = (tok.name, item_id, "full", RULES_VERSION)
        n = self._memo.get(key)
        if n is None:
            n = self._form_count(
                tok,
                key,
                lambda: render_full(self.state.item(item_id)),
                f"form:{item_id}:full:{RULES_VERSION}",
            )
        return n

    def cost(self, tok: Tokenizer, item_id: int) -> int:
        return self.full_tokens(tok, item_id) + MESSAGE_OVERHEAD_TOKENS

    def stub_tokens(self, tok: Tokenizer, item_id: int, full_tokens: int, stale: bool) -> int:
        key = (tok.name, item_id, "stub", stale, RULES_VERSION)
        n = self._memo.get(key)
        if n is None:
            n = self._form_count(
                tok,
                key,
                lambda: stub_text(self.state.item(item_id), full_tokens, stale),
                f"form:{item_id}:stub:{stale}:{RULES_VERSION}",
            )
        return n

    def summary_text(self, item: Item, terms: tuple[str, ...]) -> str:
        return rule_summary(item, self.state.config.summary_target_tokens, terms)

    def summary_tokens(self, tok: Tokenizer, item_id: int, terms: tuple[str, ...]) -> int:
        item = self.state.item(item_id)
        # Only JSON shapes depend on the query; keep the memo key small for everything else.
        variant = terms if self.state.json_item(item_id) else ()
        key = (tok.name, item_id, "summary", RULES_VERSION, self.state.config.summary_target_tokens, variant)
        n = self._memo.get(key)
        if n is None:
            n = self._form_count(tok, key, lambda: self.summary_text(item, terms))
        return n

    # ---- shapes, entries and windows ----------------------------------------------------------

    def shape(self, tok: Tokenizer, item_id: int, stale: bool, terms: tuple[str, ...]) -> Shape:
        """An item's forms with their costs and value factors (full first), memoised per item."""
        cfg = self.state.config
        ft = self.full_tokens(tok, item_id)
        summary_variant: tuple[str, ...] = ()
        if ft > cfg.summary_min_tokens and self.state.json_item(item_id):
            summary_variant = terms
        key = (tok.name, item_id, stale, summary_variant)
        shape = self._shapes.get(key)
        if shape is None:
            opts = [
                Option("full", ft + MESSAGE_OVERHEAD_TOKENS, 1.0),
                Option(
                    "stub",
                    self.stub_tokens(tok, item_id, ft, stale) + MESSAGE_OVERHEAD_TOKENS,
                    cfg.stub_value,
                ),
            ]
            if ft > cfg.summary_min_tokens:
                st = self.summary_tokens(tok, item_id, terms)
                if st <= ft * (1.0 - cfg.summary_min_saving):
                    opts.append(Option("summary", st + MESSAGE_OVERHEAD_TOKENS, cfg.summary_value))
            shape = make_shape(opts, max(1, ft) ** cfg.size_exponent)
            self._shapes[key] = shape
        return shape

    def entry(
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
        is_stale = (m.id in self.state.stale) if stale is None else stale
        variant = terms if form == "summary" and self.state.json_item(m.id) else ()
        key = (tok.name, m.id, form, is_stale, variant, duplicate_of)
        cached = self._forms.get(key)
        if cached is None:
            item = self.state.item(m.id)
            ft = self.full_tokens(tok, m.id)
            if form == "full":
                text = render_full(item)
                tokens = ft
            elif form == "summary":
                text = self.summary_text(item, terms)
                tokens = self.summary_tokens(tok, m.id, terms)
            elif duplicate_of is not None:
                text = duplicate_text(item, duplicate_of)
                tokens = self.count(tok, text)
            else:
                text = stub_text(item, ft, is_stale)
                tokens = self.stub_tokens(tok, m.id, ft, is_stale)
            cached = (text, tokens + MESSAGE_OVERHEAD_TOKENS, m.kind.value, m.kind.role)
            self._forms[key] = cached
        text, tokens, kind, role = cached
        if is_stale:
            reasons = (*reasons, "stale: the file changed on disk after this read")
        return _new(
            Entry, (m.id, kind, role, form, text, tokens, score, reasons, m.pinned, is_stale, duplicate_of)
        )

    def _text_hash(self, lane: str, entries: Sequence[Entry]) -> str:
        """content_hash of the window's messages, continuing the lane's previous hash when the window
        starts with the previous window's entries (a sticky window: the same objects plus appends).

        Canonical JSON of a list is "[", the items' canonical JSON joined by ",", then "]": the hash
        state after the previous window's items is copied and fed only the appended messages.
        """
        prev = self._hash_state.get(lane)
        h: Any = None
        start = 0
        if prev is not None:
            old, state = prev
            k = len(old)
            if 0 < k <= len(entries) and all(map(operator.is_, old, entries[:k])):
                h, start = state.copy(), k
        if h is None:
            # A re-solve: new entries, but mostly texts served before (the form cache hands back the
            # same str objects), so each message's JSON is cached by its text's identity (the text is
            # kept beside it, so a recycled id never matches).
            frags = self._message_json
            if len(frags) > _MESSAGE_CACHE_MAX:
                frags.clear()
            parts = []
            for e in entries:
                hit = frags.get(id(e.text))
                if hit is None or hit[0] is not e.text or hit[1] != e.role:
                    hit = frags[id(e.text)] = (e.text, e.role, _message_json(e))
                parts.append(hit[2])
            h, start = hashlib.sha256(b"[" + b",".join(parts)), len(entries)
        for i in range(start, len(entries)):
            e = entries[i]
            if i:
                h.update(b",")
            h.update(_message_json(e))
        self._hash_state[lane] = (tuple(entries), h.copy())
        h.update(b"]")
        return str(h.hexdigest())

    def window(
        self,
        b: Budget,
        tok: Tokenizer,
        lane: str,
        query: str | None,
        mode: str,
        entries: list[Entry],
        dropped: Sequence[Dropped],
        notes: list[str],
    ) -> Window:
        """The served window; `dropped` must already be in id order (both solvers build it so)."""
        used = REPLY_PRIMING_TOKENS + sum(e.tokens for e in entries)
        if used > b.usable:  # the solver guarantees this; fail loudly rather than overrun a provider
            raise StoreError(f"internal error: window of {used} tokens exceeds usable budget {b.usable}")
        text_hash = self._text_hash(lane, entries)
        return Window(
            budget=b.limit,
            usable=b.usable,
            used=used,
            mode=mode,
            turn=self.state.turn,
            lane=lane,
            tokenizer=tok.name,
            query=query,
            entries=tuple(entries),
            dropped=dropped,
            text_hash=text_hash,
            max_item_id=self.state.metas[-1].id if self.state.metas else 0,
            notes=tuple(notes),
        )


# No text the store can hold has this many tokens; SQLite's INTEGER cannot hold more.
_MAX_COUNT = 1 << 62


def _checked(tok: Tokenizer, n: object) -> int:
    """An application's tokenizer that counts -5, 12.5, NaN or None for a text: a negative count let a
    window hold every item while reporting it 'used' fewer tokens than nothing; the others failed
    deep in the solve (a TypeError, OverflowError from SQLite). Any integer type (numpy's) is taken."""
    if not isinstance(n, bool):
        try:
            v = operator.index(n)  # type: ignore[arg-type]
        except TypeError:
            pass
        else:
            if 0 <= v < _MAX_COUNT:
                return v
    raise ConfigError(
        f"tokenizer {getattr(tok, 'name', tok)!r} counted {n!r} tokens for a text: its count() must return "
        "a whole number of tokens, 0 or more"
    )
