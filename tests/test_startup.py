"""Start-up stays lazy: the CLI module (what `cp-inspect --help` runs) imports no engine machinery,
and the packages' public names still resolve on first use."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEAVY = [
    "engine.pipeline",
    "engine.store.store",
    "engine.sim.simulate",
    "engine.recording.cpsession",
    "textual",
]


def _loaded_after(code: str) -> list[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    probe = code + f"\nimport json, sys; print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    return list(json.loads(out.stdout.strip().splitlines()[-1]))


def test_cli_module_imports_no_engine_machinery() -> None:
    assert _loaded_after("import inspector.cli") == []


def test_help_runs_and_lists_the_commands() -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run(
        [sys.executable, "-m", "inspector.cli", "--help"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    for cmd in ("replay", "explain", "simulate", "ctx"):
        assert cmd in out.stdout


def test_public_names_resolve_on_first_use() -> None:
    assert _loaded_after("import engine, engine.store") == []
    assert "engine.pipeline" in _loaded_after("from engine import Pipeline")
    assert "engine.store.store" in _loaded_after("from engine.store import ContextStore")
    import engine
    import engine.store

    assert engine.Pipeline.__name__ == "Pipeline"
    assert engine.store.ContextStore.__name__ == "ContextStore"
    with pytest.raises(AttributeError):
        _ = engine.NoSuchThing  # type: ignore[attr-defined]
    with pytest.raises(AttributeError):
        _ = engine.store.NoSuchThing  # type: ignore[attr-defined]
