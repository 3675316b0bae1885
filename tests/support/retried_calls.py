"""Recordings of calls the real anthropic SDK retried: the SDK goes through the real proxy
(engine/capture/proxy) to the stand-in upstream (tests/capture/standin.py), which answers 429 where a
test says, and the proxy records the session. What the TUI's retried-turn tests
(tests/tui/test_retried_turn_shown.py) and `report`'s (tests/fleet/test_report_retried_attempts.py)
open. The caller sets XDG_RUNTIME_DIR (the proxy's probe)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import anthropic
import pytest

from engine.capture.proxy.recording import Recorder
from engine.capture.proxy.server import ProxyServer
from tests.capture.standin import StandIn

Call = Callable[[list[Any]], Any]  # one messages.create on the conversation so far


def record_through_proxy(tmp_path: Path, calls: Callable[[Call, StandIn], None]) -> Path:
    """The recording of `calls(create, standin)`: `create(msgs)` is one messages.create through the proxy
    by a client that retries twice (as the SDK's default), `standin.failures` what the upstream answers
    first. The stand-in asks for a 10 ms wait before a retry, so a retried call costs no second."""
    standin = StandIn(retry_after="0.01").start()
    rec = Recorder(tmp_path / "rec")
    server = ProxyServer({"anthropic": standin.url}, rec).start()
    try:
        client = anthropic.Anthropic(base_url=server.url, api_key="k", max_retries=2)

        def create(msgs: list[Any]) -> Any:
            return client.messages.create(
                model="claude-sonnet-4", max_tokens=64, system="Be careful.", messages=msgs
            )

        calls(create, standin)
    finally:
        server.stop()
        rec.close()
        standin.stop()
    (path,) = [info.path for info, _ in rec.sessions.values()]
    return Path(path)


def record_retried(tmp_path: Path) -> Path:
    """Three calls of one conversation; the second met a 429 and was retried, then answered."""

    def calls(create: Call, standin: StandIn) -> None:
        msgs: list[Any] = [{"role": "user", "content": "List the files."}]
        for i in range(3):
            standin.failures[:] = [429] if i == 1 else []
            r = create(msgs)
            msgs += [{"role": "assistant", "content": "ok"}, {"role": "user", "content": f"Step {i}."}]
            assert r.usage.input_tokens > 0
        assert [h.get("x-stainless-retry-count") for _, h, _ in standin.requests] == ["0", "0", "1", "0"]

    return record_through_proxy(tmp_path, calls)


def record_all_failed(tmp_path: Path) -> Path:
    """Two calls; every attempt of the second met a 429 (the SDK gave up after its two retries)."""

    def calls(create: Call, standin: StandIn) -> None:
        msgs: list[Any] = [{"role": "user", "content": "List the files."}]
        create(msgs)
        msgs += [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "Step 1."}]
        standin.failures[:] = [429, 429, 429]
        with pytest.raises(anthropic.RateLimitError):
            create(msgs)
        assert len(standin.requests) == 4  # the first call, then the second's three attempts

    return record_through_proxy(tmp_path, calls)
