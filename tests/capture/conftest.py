"""Fixtures for the proxy tests: the stand-in upstream, a proxy with its recorder, recording readers."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("aiohttp", reason="the proxy needs aiohttp (installed by the project's dependencies)")

from engine.capture.proxy.recording import Recorder  # noqa: E402
from engine.capture.proxy.server import ProxyServer  # noqa: E402
from engine.recording.cpsession import RecordingReader  # noqa: E402
from engine.recording.journal import unpack_event  # noqa: E402
from engine.recording.replay import Replayer  # noqa: E402
from tests.capture.standin import StandIn  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def run_env(runtime_dir: Path, **extra: str) -> dict[str, str]:
    """The environment of an agent a test runs through the proxy (`cp-inspect run -- AGENT`): this
    checkout importable, the probe's sockets in `runtime_dir`, `extra` on top, and none of the tester's
    base URLs (OPENAI_BASE_URL and the like), which would send the agent's calls past the proxy."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_RUNTIME_DIR": str(runtime_dir), **extra}
    for k in ("OPENAI_BASE_URL", "OPENAI_API_BASE", "ANTHROPIC_BASE_URL", "ANTHROPIC_API_BASE"):
        env.pop(k, None)
    return env


def run_no_tui(rec: Path, upstream: str, *agent: str) -> list[str]:
    """`cp-inspect run --no-tui` of `agent` (its command line), recording into `rec`, its calls forwarded
    to `upstream` (the stand-in): the command line the tests start it with."""
    cli = [sys.executable, "-m", "inspector.cli", "run", "--no-tui", "--record-dir", str(rec)]
    return [*cli, "--upstream", upstream, "--", *agent]


# mini-swe-agent's console script beside this interpreter (the test extra installs it), else on PATH.
MINI = shutil.which("mini", path=str(Path(sys.executable).parent)) or shutil.which("mini")


def mini_env(config_dir: Path) -> dict[str, str]:
    """What a real mini-swe-agent is run with here: a test key (the stand-in takes any), no set-up wizard,
    no start-up banner, its configuration in `config_dir` (not the tester's), and its cost look-up's failure
    on the stand-in's model ignored."""
    return {
        "OPENAI_API_KEY": "sk-test-mini",
        "MSWEA_CONFIGURED": "true",
        "MSWEA_SILENT_STARTUP": "1",
        "MSWEA_GLOBAL_CONFIG_DIR": str(config_dir),
        "MSWEA_COST_TRACKING": "ignore_errors",
    }


@pytest.fixture(scope="module")
def standin() -> Iterator[StandIn]:
    s = StandIn().start()
    yield s
    s.stop()


@pytest.fixture
def rtdir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    # Probe sockets go to a private runtime dir per test (short path: Unix socket paths are limited).
    d = tmp_path_factory.mktemp("rt")
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(d))
    return d


class Proxied:
    def __init__(self, server: ProxyServer, recorder: Recorder, record_dir: Path) -> None:
        self.server, self.recorder, self.record_dir = server, recorder, record_dir

    @property
    def url(self) -> str:
        return self.server.url

    def finish(self) -> list[Path]:
        """Stop the proxy, finish the recordings; the .cpsession files, in session order."""
        self.server.stop()
        self.recorder.close()
        return [info.path for info, _ in self.recorder.sessions.values()]


@pytest.fixture
def proxied(standin: StandIn, tmp_path: Path, rtdir: Path) -> Iterator[Proxied]:
    rec = Recorder(tmp_path / "rec", serve=True)
    server = ProxyServer(
        {"anthropic": standin.url, "openai": standin.url, "deepseek": standin.url}, rec
    ).start()
    p = Proxied(server, rec, tmp_path / "rec")
    yield p
    server.stop()
    rec.close()


def events_of(path: Path) -> list[dict[str, Any]]:
    with RecordingReader.open(path) as r:
        return [unpack_event(e) for e in r.events()]


def usages(path: Path) -> list[dict[str, Any]]:
    """Each call's usage figures (without the finish reason kept beside them: see `finish_reasons`)."""
    return [{k: v for k, v in e["usage"].items() if k != "finish_reason"}
            for e in events_of(path) if e.get("k") == "usage"]


def finish_reasons(path: Path) -> list[str | None]:
    """Why each reply stopped, as the provider said it (kept with the usage for the OpenTelemetry export)."""
    return [e["usage"].get("finish_reason") for e in events_of(path) if e.get("k") == "usage"]


def errors(path: Path) -> list[dict[str, Any]]:
    return [e for e in events_of(path) if e.get("k") == "error"]


def verify_ok(path: Path) -> int:
    report = Replayer(events_of(path)).verify()
    assert report.ok, report.mismatches[:1]
    return report.turns
