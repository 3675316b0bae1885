"""Compiled dataclass methods kept between runs of `cp-inspect`, as Python keeps compiled modules.

The `@dataclass` decorator writes each class's `__init__`, `__repr__`, `__eq__`, `__hash__` (and a frozen
class's `__setattr__`/`__delattr__`) as source text and compiles it with `exec` when the class is made.
The engine defines ~60 dataclasses on `cp-inspect simulate`'s path: ~280 compilations, ~60 ms of CPU of
every command's ~150 ms of imports (half of it), paid again by every process although the text is the
same each time.

`install()` gives the `dataclasses` module an `exec` of its own (a module global shadows the builtin)
that looks the text up in a table of code objects compiled by earlier runs (a marshal file beside the
package's bytecode, `cache_file()`) and runs the code found: the same code `exec` would compile from
that text (compiled here with no inherited `__future__` flags, as `dataclasses` compiles it), so every
class comes out the same. A text not in the table is compiled as before and `save()` adds it. The table
is keyed by the whole text, so a changed class misses and is compiled; a file written by another Python
(its magic number) or unreadable is ignored. Nothing is written when bytecode is not
(`sys.dont_write_bytecode`) or the directory is read-only.
"""

from __future__ import annotations

import builtins
import marshal
import os
import sys
from pathlib import Path
from types import CodeType
from typing import Any

# More entries than this on saving (texts of classes since changed): only this run's are kept.
MAX_ENTRIES = 2048

_table: dict[str, CodeType] = {}
_used: set[str] = set()
_new: dict[str, CodeType] = {}
_path: list[Path | None] = []  # the cache file install() read (empty list: not installed)


def cache_file() -> Path | None:
    """Where the table is kept: this package's bytecode directory (PYTHONPYCACHEPREFIX honoured), one
    file per Python version, like a module's .pyc."""
    try:
        from importlib.util import cache_from_source

        return Path(cache_from_source(str(Path(__file__).with_name("_dataclass_methods.py")))).with_suffix(
            ".marshal"
        )
    except (NotImplementedError, ValueError):  # no cache tag: an interpreter without bytecode caching
        return None


def _magic() -> bytes:
    from importlib.util import MAGIC_NUMBER

    return MAGIC_NUMBER


def load(path: Path) -> dict[str, CodeType]:
    """The table in `path`, or {} when it is missing, damaged or written by another Python version."""
    try:
        data = path.read_bytes()
    except OSError:
        return {}
    magic = _magic()
    if not data.startswith(magic):
        return {}
    try:
        table = marshal.loads(data[len(magic) :])
    except (EOFError, ValueError, TypeError):
        return {}
    if type(table) is not dict:
        return {}
    return {k: v for k, v in table.items() if type(k) is str and type(v) is CodeType}


def cached_exec(source: Any, globals: Any = None, locals: Any = None, /) -> None:
    """`exec` for the dataclasses module: a text it compiled before runs from the table."""
    if globals is None:  # as the builtin: the caller's namespaces (dataclasses always passes its own)
        frame = sys._getframe(1)
        globals = frame.f_globals
        if locals is None:
            locals = frame.f_locals
    if type(source) is str:
        code = _table.get(source)
        if code is None:
            # dont_inherit: this module's `from __future__ import annotations` must not reach the code
            # (dataclasses.py has no __future__ import: its methods' annotations are objects, not strings).
            code = _new[source] = _table[source] = compile(source, "<string>", "exec", dont_inherit=True)
        _used.add(source)
        source = code
    builtins.exec(source, globals, locals)


def install(path: Path | None = None) -> None:
    """Make the dataclasses module compile through the table (once per process; `path` for tests)."""
    if _path:
        return
    import dataclasses

    if getattr(dataclasses, "exec", None) is not None:  # someone else's shadow: leave it alone
        return
    path = cache_file() if path is None else path
    _path.append(path)
    if path is not None:
        _table.update(load(path))
    dataclasses.exec = cached_exec  # type: ignore[attr-defined]


def uninstall() -> None:
    """Undo install() (tests)."""
    import dataclasses

    if getattr(dataclasses, "exec", None) is cached_exec:
        del dataclasses.exec  # type: ignore[attr-defined]
    _path.clear()
    _table.clear()
    _used.clear()
    _new.clear()


def save() -> None:
    """Write the table with what this run compiled anew (nothing to do on a run that found it all)."""
    if not _new or not _path or _path[0] is None or sys.dont_write_bytecode:
        return
    path = _path[0]
    table = load(path)  # another process may have saved meanwhile
    table.update(_new)
    if len(table) > MAX_ENTRIES:
        table = {k: v for k, v in table.items() if k in _used}
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(_magic() + marshal.dumps(table))
        os.replace(tmp, path)  # readers see the old table or the new one, never half of one
    except OSError:
        try:
            tmp.unlink()
        except OSError:
            pass
        return
    _new.clear()
