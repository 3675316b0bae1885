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

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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
    from engine.store.paging import ExpandPage
    from engine.store.store import ContextStore, Reindexed, parse_budget, tokenizer_for
    from engine.store.window import Dropped, Entry, Window, window_as_messages, window_manifest

# Imported on first use (PEP 562): importing a light submodule such as `engine.store.items` runs this
# file first, and it should not cost the whole store (the CLI's start-up reads `Kind` for its help).
_LAZY = {
    "Summarizer": "engine.store.compaction",
    "StoreConfig": "engine.store.config",
    "PinsExceedBudgetError": "engine.store.errors",
    "StoreCorruptError": "engine.store.errors",
    "StoreError": "engine.store.errors",
    "StoreLockedError": "engine.store.errors",
    "UnknownItemError": "engine.store.errors",
    "Item": "engine.store.items",
    "Kind": "engine.store.items",
    "LinkKind": "engine.store.items",
    "ContextStore": "engine.store.store",
    "Reindexed": "engine.store.store",
    "ExpandPage": "engine.store.paging",
    "parse_budget": "engine.store.store",
    "tokenizer_for": "engine.store.store",
    "Dropped": "engine.store.window",
    "Entry": "engine.store.window",
    "Window": "engine.store.window",
    "window_as_messages": "engine.store.window",
    "window_manifest": "engine.store.window",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'engine.store' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "ContextStore",
    "Dropped",
    "Entry",
    "ExpandPage",
    "Item",
    "Kind",
    "LinkKind",
    "PinsExceedBudgetError",
    "Reindexed",
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
