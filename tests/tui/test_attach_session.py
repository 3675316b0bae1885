"""Attached to one conversation of a process that serves several (a served fork, a proxy's session:
`PID.N` in `cp-inspect ps`): the status line and the save prompt name it PID.N. They said "pid PID" for
the parent and for each child alike, so a person attached to the child could take it for the parent,
and the save's default name was the parent's."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from textual.widgets import Input

from engine import Pipeline
from inspector.app import InspectorApp
from inspector.screens import SaveScreen
from inspector.sources.live import LiveSource


def _turn(p: Pipeline, tag: str) -> None:
    req = p.next_request()
    p.record_usage({"input_tokens": req.trace["final_tokens"], "output_tokens": 20})
    p.assistant(f"{tag}: looked at parse_header")
    p.user(f"{tag}: go on")


async def test_a_served_fork_is_named_pid_dot_session(monkeypatch: pytest.MonkeyPatch) -> None:
    rt = Path(tempfile.mkdtemp(prefix="cpt-", dir="/tmp"))  # a Unix socket path must stay short
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(rt))
    parent = Pipeline("claude-sonnet-4", serve=True)
    child = None
    try:
        parent.identity("You are a careful coding agent.")
        parent.user("Refactor the header parser.")
        _turn(parent, "parent")
        child = parent.fork("Find every caller of parse_header.", serve=True)
        _turn(child, "child")
        assert child.probe is not None
        session = int(child.probe.path.name.split(".")[1])  # PID.N.sock
        pid = os.getpid()
        app = InspectorApp(LiveSource(pid, session=session))
        async with app.run_test(size=(120, 40)) as pilot:
            for _ in range(100):
                await pilot.pause(0.05)
                if len(app.timeline):
                    break
            status = str(app.query_one("#status").render())
            assert f"pid {pid}.{session} " in status, status
            await pilot.press("s")
            await pilot.pause(0.1)
            assert isinstance(app.screen, SaveScreen)
            assert app.screen.query_one("#save-path", Input).value == f"cp-{pid}.{session}.cpsession"
            await pilot.press("escape")
        app.source.client.close()  # type: ignore[attr-defined]
    finally:
        if child is not None:
            child.close()
        parent.close()
        shutil.rmtree(rt, ignore_errors=True)
