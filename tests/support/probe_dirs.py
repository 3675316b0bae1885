"""Short private runtime directories for probe sockets.

A Unix socket path must fit in 107 bytes, and pytest's tmp_path is often longer than that with a pid
socket under it: each probe test made its own directory under /tmp for that. The `rtdir` fixture in
tests/conftest.py gives one per test, with XDG_RUNTIME_DIR pointing at it for that test alone (a test
that set the variable by hand left it naming a removed directory for every later test of the process).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def short_runtime_dir(prefix: str = "cpt-") -> Iterator[Path]:
    """`<new dir under /tmp>/rt`: not created (the probe creates it 0700 itself); the whole new directory
    is removed on exit. The XDG_RUNTIME_DIR that puts sockets in it is the yielded path's parent."""
    base = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    try:
        yield base / "rt"
    finally:
        shutil.rmtree(base, ignore_errors=True)
