"""The suite writes the project's bytecode when it starts (tests/support/bytecode.py), so that the
processes its tests start read it instead of compiling the project from source under
PYTHONDONTWRITEBYTECODE."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.bytecode import PACKAGES, ROOT, compile_project, fresh


def test_the_projects_bytecode_is_there_when_tests_run() -> None:
    if not os.access(ROOT / "engine", os.W_OK):
        pytest.skip("the tree is read-only: the suite could not write its bytecode")
    sources = [p for package in PACKAGES for p in (ROOT / package).rglob("*.py")]
    assert len(sources) > 300
    assert [str(p.relative_to(ROOT)) for p in sources if not fresh(p)] == []


def _imports_from_bytecode(root: Path) -> bool:
    """Whether a child under PYTHONDONTWRITEBYTECODE (as the suite's children run here) loads
    pkg.mod from its .pyc rather than compiling it (`python -v` names the code object's file)."""
    env = dict(os.environ, PYTHONPATH=str(root), PYTHONDONTWRITEBYTECODE="1")
    env.pop("PYTHONPYCACHEPREFIX", None)
    out = subprocess.run(
        [sys.executable, "-v", "-c", "import pkg.mod"], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    cached = importlib.util.cache_from_source(str(root / "pkg" / "mod.py"))
    return f"code object from {cached!r}" in out.stderr or f"code object from '{cached}'" in out.stderr


def test_a_child_reads_what_was_compiled_and_a_changed_source_is_compiled_again(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    mod = tmp_path / "pkg" / "mod.py"
    mod.write_text("X = 1\n")
    assert not _imports_from_bytecode(tmp_path)  # nothing written by the child itself
    assert compile_project(tmp_path, ("pkg",))
    assert fresh(mod) and _imports_from_bytecode(tmp_path)
    mod.write_text("X = 22\n")  # another size: the .pyc is stale
    assert not fresh(mod)
    assert compile_project(tmp_path, ("pkg",))
    assert fresh(mod) and _imports_from_bytecode(tmp_path)
