""".ci/run, what CI runs on a clean clone: the README's install and test command, and a last line that
says whether it passed and, if not, which step failed."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / ".ci" / "run"


def _readme_test_command() -> list[str]:
    text = (ROOT / "README.md").read_text()
    found = re.search(r"^Run the tests:\n\n\s+(.+)$", text, re.M)
    assert found, "the README's 'Run the tests:' command"
    return found.group(1).split(" && ")


def _ci_commands() -> list[str]:
    """The commands .ci/run runs, in order (not its comments, shell settings or messages)."""
    lines = [line.strip() for line in SCRIPT.read_text().splitlines()]
    return [line for line in lines if line and not line.startswith(("#", "set ", "cd ", "trap ", "echo "))]


def test_ci_runs_the_readmes_test_command_with_the_fleet_extra() -> None:
    venv, install, test = _readme_test_command()
    assert install == ".venv/bin/pip install -q -e '.[test]'"
    assert _ci_commands() == [
        venv,
        ".venv/bin/pip install -q --upgrade pip",
        install.replace("[test]", "[test,fleet]"),
        test,
    ]


def _fake_tools(bin_dir: Path, pip_status: int, pytest_status: int) -> None:
    """A `python3` on PATH whose `-m venv .venv` makes a .venv whose pip and python print a line and exit
    with the given statuses (what the script does around them is under test, not the tools)."""

    def script(path: Path, body: str) -> None:
        path.write_text("#!/bin/sh\n" + body)
        path.chmod(path.stat().st_mode | stat.S_IXUSR)

    venv_bin = "mkdir -p .venv/bin\n"
    venv_bin += f"printf '#!/bin/sh\\necho pip \"$*\"\\nexit {pip_status}\\n' > .venv/bin/pip\n"
    venv_bin += (
        "printf '#!/bin/sh\\necho FAILED tests/test_x.py::test_y - AssertionError\\n"
        f"exit {pytest_status}\\n' > .venv/bin/python\n"
    )
    venv_bin += "chmod +x .venv/bin/pip .venv/bin/python\n"
    script(bin_dir / "python3", venv_bin)


@pytest.mark.parametrize(
    ("pip_status", "pytest_status", "rc", "last"),
    [
        (0, 0, 0, "CI passed"),
        (0, 1, 1, "CI FAILED: exit 1 from: .venv/bin/python -m pytest -x -q"),
        (0, 137, 137, "CI FAILED: exit 137 from: .venv/bin/python -m pytest -x -q"),  # killed: no summary
        (2, 0, 2, "CI FAILED: exit 2 from: .venv/bin/pip install -q --upgrade pip"),
    ],
    ids=["passed", "a-test-failed", "pytest-killed", "install-failed"],
)
def test_the_logs_last_line_says_how_ci_ended(
    tmp_path: Path, pip_status: int, pytest_status: int, rc: int, last: str
) -> None:
    (tmp_path / ".ci").mkdir()
    shutil.copy(SCRIPT, tmp_path / ".ci" / "run")
    (tmp_path / "bin").mkdir()
    _fake_tools(tmp_path / "bin", pip_status, pytest_status)
    env = dict(os.environ, PATH=f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    out = subprocess.run(
        ["bash", str(tmp_path / ".ci" / "run")], env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == rc, out.stdout + out.stderr
    assert out.stdout.splitlines()[-1] == last, out.stdout


def test_a_stuck_test_prints_where_it_is(tmp_path: Path) -> None:
    """The suite's own configuration (pyproject.toml) has pytest print every thread's stack when a test
    runs past faulthandler_timeout: a CI log that ends in a hang names the test and the line. Here a
    test that sleeps past a timeout lowered to 1 s, run under the project's configuration."""
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert 300 <= config["faulthandler_timeout"] <= 1800
    (tmp_path / "test_stuck.py").write_text("import time\n\ndef test_stuck():\n    time.sleep(3)\n")
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-c",
            str(ROOT / "pyproject.toml"),
            "--rootdir",
            str(tmp_path),
            "-o",
            "faulthandler_timeout=1",
            str(tmp_path / "test_stuck.py"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Timeout (0:00:01)!" in out.stderr, out.stderr
    assert 'test_stuck.py", line 4 in test_stuck' in out.stderr, out.stderr
