"""The project's bytecode written once when the suite starts, for the processes its tests start.

Under PYTHONDONTWRITEBYTECODE (set in some of our environments, and inherited by every child a test
starts) no process writes a .pyc, so each child that imports the project compiled every project module it
imported from source: ~0.1 s of CPU for a typer command line (0.26 s against 0.13 s for `explain FILE
--format json`), and tests/test_cli_argv.py starts ~480 of them (99 s user CPU and 145 s wall without
this, 70 s and 93 s with it, load 2-3). Where bytecode is written the first child writes it and this
finds nothing to do. Children still run with the environment they were given (the flag included, which
changes what the rank table and dataclass_code write): they only read the cache Python reads anyway, as
benchmarks/bench_startup.py's compile_tree does for its children."""

from __future__ import annotations

import importlib.util
import py_compile
import struct
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# What the tests' children import from the tree: the project's packages and the suite's helpers that
# run as programs (tests/support).
PACKAGES = ("engine", "inspector", "panels", "themes", "tests/support")


def fresh(source: Path) -> bool:
    """Whether `source` has bytecode the import system would use: a timestamp .pyc of this interpreter
    whose recorded mtime and size are the source's (compileall checks only the mtime: a file rewritten
    within the second it was compiled would be left stale, and compiled from source by every child)."""
    try:
        head = Path(importlib.util.cache_from_source(str(source))).read_bytes()[:16]
        st = source.stat()
    except OSError:
        return False
    if len(head) < 16 or head[:4] != importlib.util.MAGIC_NUMBER:
        return False
    flags, mtime, size = struct.unpack("<III", head[4:16])
    return flags == 0 and (mtime, size) == (int(st.st_mtime) & 0xFFFFFFFF, st.st_size & 0xFFFFFFFF)


def compile_project(root: Path = ROOT, packages: tuple[str, ...] = PACKAGES) -> bool:
    """Write the bytecode of every module of `packages` under `root` that has none or a stale one; False
    when one could not be written (a read-only tree: the children then compile from source as before)."""
    ok = True
    for package in packages:
        for source in sorted((root / package).rglob("*.py")):
            if fresh(source):
                continue
            try:  # TIMESTAMP: what imports write (py_compile's default is a hash under SOURCE_DATE_EPOCH)
                py_compile.compile(
                    str(source), doraise=True, invalidation_mode=py_compile.PycInvalidationMode.TIMESTAMP
                )
            except (OSError, py_compile.PyCompileError):
                ok = False
    return ok
