"""`cp-inspect simulate FILE` (the console script's plain path) ends without the interpreter's
teardown once it has printed everything (inspector/entry.py, exit_without_teardown): the same output
and exit status, and nothing left to free object by object."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "demo_sessions" / "scout-openai.cpsession"


def _run(code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path
    )


def _script(args: list[str], marker: Path, register: str = "") -> str:
    # An object whose finalizer writes `marker`: teardown runs it, an exit without teardown does not.
    return (
        "import sys\n"
        "from inspector import entry\n"
        f"class Torn:\n    def __del__(self, _open=open):\n        _open({str(marker)!r}, 'w').write('torn down')\n"
        "entry._torn = Torn()\n"
        f"{register}"
        f"sys.argv = ['cp-inspect', *{args!r}]\n"
        "entry.main()\n"
    )


def test_a_plain_simulate_prints_everything_and_skips_teardown(tmp_path: Path) -> None:
    marker = tmp_path / "torn"
    out = _run(_script(["simulate", str(DEMO), "--json"], marker), tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.rstrip().endswith("}") and '"pipeline"' in out.stdout  # the whole report, flushed
    assert not marker.exists()  # no teardown (on main the finalizer ran: this fails there)
    ref = subprocess.run(
        [sys.executable, "-m", "inspector.cli", "simulate", str(DEMO), "--json"],
        capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=120, cwd=tmp_path,
    )  # fmt: skip
    strip = lambda s: [ln for ln in s.splitlines() if '"elapsed_s"' not in ln]  # noqa: E731
    assert strip(out.stdout) == strip(ref.stdout)


def test_teardown_runs_when_something_waits_for_it_or_the_command_failed(tmp_path: Path) -> None:
    marker = tmp_path / "torn"
    # An atexit callback registered: the usual exit, which runs it.
    hook = tmp_path / "hook"
    out = _run(
        _script(
            ["simulate", str(DEMO)],
            marker,
            f"import atexit\natexit.register(lambda: open({str(hook)!r}, 'w').close())\n",
        ),
        tmp_path,
    )
    assert out.returncode == 0 and hook.exists() and marker.exists()
    # A failing command (no such file): its error and status, through the usual exit.
    marker.unlink()
    out = _run(_script(["simulate", str(tmp_path / "missing.cpsession")], marker), tmp_path)
    assert out.returncode != 0 and "missing.cpsession" in out.stdout + out.stderr and marker.exists()


def test_a_plain_simulate_never_collects_what_it_made(tmp_path: Path) -> None:
    """The collector stays off from the plain simulate's start to its exit: on main, simulate turned it
    back on as it returned, and the first allocation after that set off a collection that scanned every
    object the simulate had made (~7 ms CPU on a 930-turn session) just before the process ended."""
    seen = tmp_path / "collections"
    marker = tmp_path / "torn"
    watch = (
        "import gc\n"
        "def _seen(phase, info, _open=open):\n"
        "    if phase == 'start' and 'engine.sim.simulate' in sys.modules:\n"
        f"        _open({str(seen)!r}, 'a').write(str(info['generation']))\n"
        "gc.callbacks.append(_seen)\n"
    )
    out = _run(_script(["simulate", str(DEMO), "--json"], marker, watch), tmp_path)
    assert out.returncode == 0, out.stderr
    assert '"pipeline"' in out.stdout
    assert not seen.exists(), seen.read_text()
