"""Items in their window forms (full, stub, summary): text, token counts, shapes, entries, windows.

Token counts are cached per tokenizer by text hash (in memory and in `token_counts`), and per item
and form in a memo, so a solve over thousands of items never re-tokenises a body it has seen.
"""

from __future__ import annotations

from collections.abc import Sequence

from engine.hashing import content_hash, sha256_hex
from engine.store.compaction import RULES_VERSION, duplicate_text, render_full, rule_summary, stub_text
from engine.store.errors import StoreError
from engine.store.items import Item, ItemMeta
from engine.store.state import StoreState
from engine.store.window import Dropped, Entry, Option, Shape, Window, make_shape
from engine.tokens import MESSAGE_OVERHEAD_TOKENS, REPLY_PRIMING_TOKENS, Budget, Tokenizer

_new = tuple.__new__  # C-level NamedTuple construction (hundreds of entries per window)


class ItemForms(StoreState):
    # ---- token counts -------------------------------------------------------------------------

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

    def _cost(self, tok: Tokenizer, item_id: int) -> int:
        return self._full_tokens(tok, item_id) + MESSAGE_OVERHEAD_TOKENS

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

    # ---- shapes, entries and windows ----------------------------------------------------------

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
    ) -> Window:
        """The served window; `dropped` must already be in id order (both solvers build it so)."""
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
            dropped=dropped,
            text_hash=content_hash(messages),
            max_item_id=self._metas[-1].id if self._metas else 0,
            notes=tuple(notes),
        )
