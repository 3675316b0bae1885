"""`cp-inspect attach / explain / find` given the pid `cp-inspect proxy` prints: the proxy serves each
conversation on a socket of its own (`PID.N` in `ps`), none on its pid. It was told "process PID is not
serving the probe ... Start the agent with serve=True or with CONTEXTPIPE_SERVE=1": the wrong way for a
process that serves. Now the error names the conversations it serves; a conversation number it does not
serve is said the same way. A real proxy (this process) in front of the stand-in, the real openai SDK."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import openai
from typer.testing import CliRunner

from engine.probe.runtime_dir import default_runtime_dir
from inspector.cli import app
from tests.capture.conftest import Proxied


def _converse(url: str, system: str) -> None:
    client = openai.OpenAI(base_url=url + "/v1", api_key="k", max_retries=0)
    messages: list[Any] = [{"role": "system", "content": system}, {"role": "user", "content": "Count files."}]
    client.chat.completions.create(model="gpt-4o", messages=messages)


async def test_the_proxys_own_pid_names_the_conversations_it_serves(proxied: Proxied, rtdir: Path) -> None:
    await asyncio.to_thread(_converse, proxied.url, "You are the main agent.")
    await asyncio.to_thread(_converse, proxied.url, "You are a sub-agent.")
    assert proxied.recorder.flush(60)
    pid = os.getpid()
    sockets = sorted(p.name for p in default_runtime_dir().glob(f"{pid}*.sock"))
    assert sockets == [f"{pid}.1.sock", f"{pid}.2.sock"], sockets
    runner = CliRunner()
    for command in (["explain", str(pid)], ["find", str(pid), "files"]):
        r = runner.invoke(app, command)
        assert r.exit_code == 1, r.output
        assert f"process {pid} serves 2 conversations ({pid}.1, {pid}.2), each on its own socket" in r.output
        assert f"e.g. {pid}.1" in r.output and "serve=True" not in r.output, r.output
    r = runner.invoke(app, ["explain", f"{pid}.9"])
    assert r.exit_code == 1 and f"({pid}.1, {pid}.2), but none numbered 9" in r.output, r.output
    r = runner.invoke(app, ["explain", f"{pid}.2"])  # (a conversation it serves: explained, as before)
    assert r.exit_code == 0 and r.output.startswith("EXPLAIN turn 0"), r.output
