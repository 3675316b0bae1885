"""The standard library's `inspect` module loaded on first use, not when `dataclasses` is imported.

`dataclasses` imports `inspect` at its top, and `inspect` imports `ast`, `dis`, `tokenize`, `linecache`
and more: ~5 ms of CPU of every `cp-inspect` command's start-up (`python -X importtime`: 4.9 of the
6.1 ms `import dataclasses` takes), yet `dataclasses` reads it only to write a docstring for a class
that has none (`inspect.signature`; every engine dataclass has its own, tests/test_dataclass_docs.py),
and `cp-inspect simulate` never reads it at all.

`defer()` puts a stand-in module in `sys.modules` while `inspect` is not imported yet. An `import
inspect` finds the stand-in (its dunders are its own: the import system reads `__spec__` and finds a
module that is not initializing), and the first attribute read on it that the stand-in lacks imports
the real module, copies its namespace into the stand-in (so a module that imported the stand-in reads
the real functions directly from then on) and answers from it. Every later `import inspect` gets the
real module. A module attribute set on the stand-in before that first read is the caller's own and is
kept (not overwritten by the real module's).
"""

from __future__ import annotations

import _thread
import importlib
import sys
import types
from typing import Any

_lock = _thread.allocate_lock()


class _Deferred(types.ModuleType):
    """`inspect` until something reads from it (see module doc)."""

    def __getattr__(self, name: str) -> Any:
        # Only names the stand-in lacks come here (a module's __getattr__): its dunders never do.
        with _lock:  # two threads' first reads import it once and fill the stand-in once
            real = _load(self)
        return getattr(real, name)


def _load(stand_in: _Deferred) -> types.ModuleType:
    real = sys.modules.get("inspect")
    if real is None or real is stand_in:
        sys.modules.pop("inspect", None)
        try:
            real = importlib.import_module("inspect")
        except BaseException:
            sys.modules.setdefault("inspect", stand_in)
            raise
    own = stand_in.__dict__
    for key, value in real.__dict__.items():
        if key not in own or key.startswith("__"):
            own[key] = value
    return real


def defer() -> bool:
    """Put the stand-in in place when `inspect` is not imported yet; whether it did."""
    if "inspect" in sys.modules:
        return False
    sys.modules["inspect"] = _Deferred("inspect", "The standard library's inspect, loaded on first use.")
    return True
