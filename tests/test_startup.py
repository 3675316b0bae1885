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
    "engine.sim.simulate_pass",  # (simulate's build pass and column simulation, modules of their own)
    "engine.sim.simulate_column",
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


# ---- the first frame of `replay`: what it does not wait for ------------------------------------------

DEMO = ROOT / "demo_sessions" / "scout-anthropic.cpsession"

# Runs in a fresh process: `replay`'s own app (replay_command.replay_app) headless until the current turn is drawn,
# as benchmarks/bench_startup.py times it, on the demo recording read in chunks of 3 and 7 turns (a long
# recording in miniature: the first frame is drawn while the rest loads); then what had been imported,
# mounted and collected by then, and again once the app has settled.
FIRST_FRAME_PROBE = r'''
import asyncio, gc, json, sys
from pathlib import Path
from inspector.replay_command import replay_app
from inspector.sources.file import FileSource

FileSource.load_chunks.__defaults__ = (3, 7)
DEFERRED = ("pygments", "rich.syntax", "importlib.metadata", "engine.optimize")
CONTROLS = "Slider, Switch, Select, Button"
out = {}
async def main():
    app = replay_app(Path(sys.argv[1]))
    out["collector_off_while_starting"] = not gc.isenabled()
    first_frame_drawn = app.first_frame_drawn
    def probe():  # the app's "first frame drawn" (again until the footer is in), before the rest starts
        out["first"] = {
            "modules": [m for m in DEFERRED if m in sys.modules],
            "whatif_controls": len(app.query_one("#whatif").query(CONTROLS)),
            "turns": len(app.timeline),
            "collector_on": gc.isenabled(),
        }
        first_frame_drawn()
    app.first_frame_drawn = probe
    async with app.run_test(size=(120, 40)) as pilot:
        while not app.reader._drawn.is_set():  # the first screen is complete: the rest has started
            await asyncio.sleep(0.001)
        from tests.tui.conftest import settle  # (it imports pytest, which imports importlib.metadata)

        await settle(pilot)
        out["settled"] = {
            "turns": len(app.timeline),
            "whatif_controls": len(app.query_one("#whatif").query(CONTROLS)),
            "budget": app.query_one("#budget").value,
            "collector_on": gc.isenabled(),
            "frozen": gc.get_freeze_count(),
        }
        await pilot.press("enter")  # show the selected section: now the highlighter is imported
        await settle(pilot)
        out["content_shown"] = "pygments" in sys.modules
asyncio.run(main())
print(json.dumps(out))
'''


def _first_frame_probe(path: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", FIRST_FRAME_PROBE, str(path)], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def test_replay_first_frame_defers_what_it_does_not_show() -> None:
    """The first frame imports no syntax highlighter (no content is shown yet), no package metadata
    (a reader never needs the writer's version) and no optimizer (the cache layout reads the markers
    step's note from engine.marker_note), mounts none of the hidden What-if controls (the provider row
    either), and is drawn with the cyclic collector held off; all of them come after, and the app works
    as before."""
    out = _first_frame_probe(DEMO)
    assert out["collector_off_while_starting"]
    assert out["first"] == {"modules": [], "whatif_controls": 0, "turns": 3, "collector_on": False}
    settled = out["settled"]
    assert settled["turns"] > 3  # the rest of the recording, read after the first frame
    # 4 sliders, 7 switches, the provider selector and Reset; the sliders set to the turn
    assert settled["whatif_controls"] == 13 and settled["budget"] > 0
    assert settled["collector_on"] and settled["frozen"] > 0  # start-up's objects frozen, then collected again
    assert out["content_shown"]  # the highlighter still comes when a text is shown


def test_a_failed_replay_leaves_the_collector_on() -> None:
    """`replay` holds the collector off only for an app it starts: a bad turn or file, in a process that
    goes on (here under CliRunner), leaves it as it was."""
    import gc

    from typer.testing import CliRunner

    from inspector.cli import app

    assert gc.isenabled()
    for args in (["replay", str(DEMO), "--turn", "99999"], ["replay", str(ROOT / "no-such.cpsession")]):
        res = CliRunner().invoke(app, args)
        assert res.exit_code != 0
        assert gc.isenabled()
