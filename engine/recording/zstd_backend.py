"""zstandard's C backend, loaded without running the `zstandard` package's __init__.

The package's __init__ imports `platform` to ask which interpreter runs it (CPython: the C backend),
and `platform.python_implementation()` parses `sys.version` with regular expressions it compiles
then: ~4-5 ms CPU of every command that opens a recording (`cp-inspect simulate`, `replay`), whose
goals are 1 s end to end. On CPython the answer is the C backend, so its compiled module is loaded
from the installed package's folder directly and registered as `zstandard.backend_c`: a later
`import zstandard` (the capture proxy's) runs its __init__, which takes that very module from
sys.modules, so the process holds one backend. Anything unexpected (another interpreter, another
layout, a module without what the recordings use) imports the package as before.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
from typing import Any

FULL = "zstandard.backend_c"
USED = ("ZstdCompressor", "ZstdDecompressor", "ZstdError", "COMPRESSOBJ_FLUSH_BLOCK")


def _backend_c() -> Any:
    """The C backend loaded from its file, or None (not CPython, not found, or lacking USED)."""
    if sys.implementation.name != "cpython" or os.environ.get("PYTHON_ZSTANDARD_IMPORT_POLICY"):
        return None  # another backend asked for: the package's __init__ chooses it
    spec = importlib.util.find_spec("zstandard")  # locates the package without importing it
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        names = sorted(
            n for n in os.listdir(folder) if n.startswith("backend_c.") and n.endswith((".so", ".pyd"))
        )
        if names:
            loader = importlib.machinery.ExtensionFileLoader(FULL, os.path.join(folder, names[0]))
            mod_spec = importlib.util.spec_from_loader(FULL, loader)
            if mod_spec is None:
                return None
            mod = importlib.util.module_from_spec(mod_spec)
            loader.exec_module(mod)
            return mod if all(hasattr(mod, n) for n in USED) else None
    return None


def load() -> Any:
    """A module with zstandard's ZstdCompressor, ZstdDecompressor, ZstdError and
    COMPRESSOBJ_FLUSH_BLOCK: the package when it is imported already, else its C backend alone."""
    for name in ("zstandard", FULL):
        mod = sys.modules.get(name)
        if mod is not None:
            return mod
    try:
        mod = _backend_c()
    except Exception:  # any failure to load it this way: the package, as before
        mod = None
    if mod is None:
        import zstandard

        return zstandard
    sys.modules[FULL] = mod
    return mod
