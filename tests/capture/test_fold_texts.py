"""The content export's fold (SessionFold with content: `cp-inspect export --content`) kept every text of
the session in `blobs`, so exporting a long recording held all its prompt text in memory at once. A
span carries only the newest messages (CONTENT_CAP characters), but an event may name any earlier text
again by its hash (each text is journaled once per session): the fold now keeps the recently used texts
within MAX_FOLD_TEXT and reads one it let go back from the recording by its hash. Real recording, the
real export command, received by the test OTLP receiver."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

pytest.importorskip("opentelemetry.exporter.otlp.proto.http", reason="the otel extra is not installed")

from engine import Pipeline  # noqa: E402
from engine.export import session_fold  # noqa: E402
from engine.export.session_fold import SessionFold  # noqa: E402
from tests.capture.conftest import events_of  # noqa: E402
from tests.fleet.otlp_receiver import OtlpReceiver  # noqa: E402

LIMIT = 200_000
TURNS = 30
OUTPUT = 20_000  # characters of each distinct tool output: TURNS of them are 3x LIMIT
REPEATED = "The same short note, said on the first turn and again on the last."


def _session(path: Path) -> None:
    pipe = Pipeline("claude-sonnet-4", "anthropic", 1_000_000, record=path, serve=False)
    pipe.identity("You are a careful coding agent.")
    pipe.add_tool("bash", "Run a command", {"type": "object", "properties": {"cmd": {"type": "string"}}})
    pipe.user(REPEATED)
    for i in range(TURNS):
        pipe.next_request()
        pipe.record_usage({"input_tokens": 100, "output_tokens": 5})
        (call,) = pipe.assistant(f"step {i}", tool_calls=[{"id": f"c{i}", "name": "bash", "arguments": "{}"}])
        pipe.tool_result(call.id, f"{i:06d} " + (chr(ord("a") + i % 26) * OUTPUT))
    pipe.user(REPEATED)  # named by its hash: its text was journaled on the first turn only
    pipe.next_request()
    pipe.record_usage({"input_tokens": 100, "output_tokens": 5})
    pipe.close()


def test_the_content_fold_keeps_a_bounded_set_of_texts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(session_fold, "MAX_FOLD_TEXT", LIMIT)
    path = tmp_path / "long.cpsession"
    _session(path)
    fold = SessionFold("anthropic", content=True)
    spans = [s for ev in events_of(path) if (s := fold.take(ev)) is not None]
    assert len(spans) == TURNS + 1
    held = sum(len(text) for text in fold.blobs.values())
    assert held <= LIMIT, f"the fold holds {held:,} characters of text (all {TURNS * OUTPUT:,} of the outputs)"


def test_export_content_reads_a_text_let_go_back_from_the_recording(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(session_fold, "MAX_FOLD_TEXT", LIMIT)
    monkeypatch.delenv("CONTEXTPIPE_REDACT", raising=False)
    path = tmp_path / "long.cpsession"
    _session(path)
    from inspector.cli import app

    with OtlpReceiver() as rx:
        res = CliRunner().invoke(app, ["export", str(path), "--otlp", rx.url, "--content"])
        assert res.exit_code == 0, res.output
        last = max(rx.calls, key=lambda c: c["attributes"]["contextpipe.turn"])
    messages = json.loads(last["attributes"]["gen_ai.input.messages"])
    texts = [p.get("content") for m in messages for p in m["parts"]]
    assert texts[-1] == REPEATED, texts[-3:]
