"""The SQLite context store: originals in, budgeted and explained windows out.

    store = ContextStore("run.db")
    store.add(task_text, "user", pin=True)
    ...
    window = store.context_get(12_000, model="gpt-4o", query=latest_message)
    messages = window_as_messages(window)      # [{"role", "content"}, ...] in send order
    manifest = window.manifest()               # what went in, in which form, and why

Never imports textual, typer or anything from inspector/panels/themes.
"""

from __future__ import annotations

from engine.store.compaction import Summarizer
from engine.store.config import StoreConfig
from engine.store.errors import (
    PinsExceedBudgetError,
    StoreCorruptError,
    StoreError,
    StoreLockedError,
    UnknownItemError,
)
from engine.store.items import Item, Kind, LinkKind
from engine.store.store import ContextStore, parse_budget, tokenizer_for
from engine.store.window import Dropped, Entry, Window, window_as_messages, window_manifest

__all__ = [
    "ContextStore",
    "Dropped",
    "Entry",
    "Item",
    "Kind",
    "LinkKind",
    "PinsExceedBudgetError",
    "StoreConfig",
    "StoreCorruptError",
    "StoreError",
    "StoreLockedError",
    "Summarizer",
    "UnknownItemError",
    "Window",
    "parse_budget",
    "tokenizer_for",
    "window_as_messages",
    "window_manifest",
]
