"""The export against a real OTLP receiver: Arize Phoenix, started for the test, spans read back through its
REST API and checked attribute by attribute against the recording's own figures. Needs the `fleet` extra."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

# Phoenix runs in a process of its own (the `phoenix` fixture): this one only needs to know it is installed.
# Importing it here (pytest.importorskip) put ~500,000 objects (~290 MB) in the suite's process at
# collection, for the whole run: every full collection after that scanned them (0.66 s each here).
if importlib.util.find_spec("phoenix") is None:
    pytest.skip("Arize Phoenix is not installed: pip install -e '.[fleet]'", allow_module_level=True)

from engine.recording.cpsession import RecordingReader  # noqa: E402
from engine.recording.journal import trace_of, unpack_event  # noqa: E402
from tests.support import phoenix_server  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "demo_sessions" / "scout-anthropic.cpsession"


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read())


def _flat(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


@pytest.fixture
def phoenix() -> Any:
    """A Phoenix of the test's own: started early in the background when the suite collected this test
    (tests/support/phoenix_server.py), else now; stopped, and its working directory removed, after."""
    server = phoenix_server.take()
    try:
        failed = server.wait_up()
        if failed:
            pytest.fail(failed)
        yield server.base
    finally:
        server.stop()


@pytest.mark.slow
def test_spans_in_phoenix_equal_the_recording(phoenix: str) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "inspector.cli", "export", str(DEMO), "--otlp", phoenix],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    reader = RecordingReader.open(DEMO)
    traces = {
        e["turn"]: trace_of(e) for e in (unpack_event(x) for x in reader.events()) if e.get("k") == "turn"
    }
    spans: list[dict[str, Any]] = []
    deadline = time.monotonic() + 60
    while len(spans) < len(traces) + 1 and time.monotonic() < deadline:
        time.sleep(0.25)  # Phoenix ingests asynchronously
        spans = _get(f"{phoenix}/v1/projects/default/spans?limit=1000")["data"]
    assert len(spans) == len(traces) + 1  # a span per call, and the session's invoke_agent span
    (agent,) = [s for s in spans if s["name"] == "invoke_agent"]
    calls = [s for s in spans if s["name"] != "invoke_agent"]
    assert {s["parent_id"] for s in calls} == {agent["context"]["span_id"]}  # the calls are its children
    a = _flat(agent["attributes"])
    assert a["gen_ai.operation.name"] == "invoke_agent" and a["contextpipe.calls"] == len(traces)
    assert a["gen_ai.usage.input_tokens"] == sum(t["usage"]["input_tokens"] for t in traces.values())
    for span in calls:
        a = _flat(span["attributes"])
        t = traces[int(a["contextpipe.turn"])]
        u = t["usage"]
        assert a["gen_ai.request.model"] == t["model"]
        assert a["gen_ai.provider.name"] == "anthropic"
        assert a["gen_ai.usage.input_tokens"] == u["input_tokens"]
        assert a["gen_ai.usage.output_tokens"] == u["output_tokens"]
        assert a["gen_ai.usage.cache_read.input_tokens"] == u["cache_read_tokens"]
        assert a["gen_ai.usage.cache_creation.input_tokens"] == u["cache_write_tokens"]
        assert a["contextpipe.tier"] == t["tier"]
        assert a["contextpipe.pressure.predictive"] == pytest.approx(t["pressure"]["predictive"])
        assert a["contextpipe.cache_break"] == bool(t["cache_break"])
    assert len({s["context"]["trace_id"] for s in spans}) == 1
