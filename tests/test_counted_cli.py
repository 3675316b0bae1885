"""Counts in what the CLI prints read right at one and at many: "1 recording skipped", "2 recordings
skipped", where they read "1 recording(s) skipped" (and "none of the 1 recording(s) could be read")."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from inspector.cli import app
from tests.test_fork import parent_pipeline

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "demo_sessions" / "scout-anthropic.cpsession"
OTHER = ROOT / "demo_sessions" / "scout-openai.cpsession"


def _run(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(app, list(args))
    return res.exit_code, res.output


def _garbage(path: Path) -> Path:
    path.write_bytes(b"not a recording at all\n")
    return path


def test_report_counts_skipped_recordings_and_unpriced_sessions(tmp_path: Path) -> None:
    from engine.pipeline import Pipeline

    one = _garbage(tmp_path / "bad1.cpsession")
    code, out = _run("report", str(DEMO), str(one))
    assert code == 0, out
    assert "\n1 recording skipped: not in the totals" in out, out
    # One session of a model with no price (the plural is in tests/fleet/test_otel_agent_span.py).
    rec = tmp_path / "mystery.cpsession"
    p = Pipeline("mystery-1", provider="openai", window=8000, record=rec, serve=False)
    p.identity("You are careful.")
    p.user("hi")
    p.next_request()
    p.record_usage({"prompt_tokens": 100, "completion_tokens": 5})
    p.assistant("ok")
    p.close()
    code, out = _run("report", str(DEMO), str(rec))
    assert code == 0, out
    assert "skipped 1 session whose model has no price: mystery-1 (1)" in out, out


def test_export_counts_sessions_skipped_and_damaged_recordings(tmp_path: Path) -> None:
    pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
    from tests.fleet.otlp_receiver import OtlpReceiver
    from tests.test_recording_paths import corrupt_copy

    bad = [_garbage(tmp_path / f"bad{i}.cpsession") for i in (1, 2)]
    cut = [corrupt_copy(tmp_path / f"cut{i}.cpsession")[0] for i in (1, 2)]
    with OtlpReceiver() as rx:
        code, out = _run("export", str(DEMO), str(OTHER), *map(str, bad), *map(str, cut), "--otlp", rx.url)
        assert code == 0, out
        assert "model-call spans from 4 sessions, each session's under its invoke_agent span" in out, out
        assert (
            "; 2 recordings skipped (see above); 2 damaged recordings exported up to their damage" in out
        ), out
        code, out = _run("export", str(cut[0]), "--otlp", rx.url)
        assert code == 0, out
        assert "exported 20 model-call spans from 1 session, " in out, out
        assert "; 1 damaged recording exported up to their damage (see above)" in out, out
        early = corrupt_copy(tmp_path / "early.cpsession", turn=1)[0]  # one call precedes the damage
        code, out = _run("export", str(early), "--otlp", rx.url)
        assert code == 0 and "exported the 1 model call before the damage" in out, out
        assert "exported 1 model-call span from 1 session, " in out, out
        # Nothing readable: "none of the 1 recording(s) could be read" named no file.
        code, out = _run("export", str(bad[0]), "--otlp", rx.url)
        assert code == 1 and f"{bad[0]} could not be read" in out and "none of" not in out, out
        code, out = _run("export", *map(str, bad), "--otlp", rx.url)
        assert code == 1 and "none of the 2 recordings could be read" in out, out


def test_simulate_policies_counts_its_recordings(tmp_path: Path) -> None:
    code, out = _run("simulate", str(DEMO), "--policies", "all")
    assert code == 0, out
    assert "SIMULATE --policies: 1 recording, window " in out, out
    copy = tmp_path / "again.cpsession"
    shutil.copy(OTHER, copy)
    code, out = _run("simulate", str(DEMO), str(copy), "--policies", "all")
    assert code == 0, out
    assert "SIMULATE --policies: 2 recordings, window " in out, out


def _tree(tmp_path: Path, forks: int) -> tuple[Path, list[Path]]:
    """A parent recording that forks `forks` recorded sub-agents of one turn each."""
    tmp_path.mkdir()
    parent = tmp_path / "parent.cpsession"
    p = parent_pipeline("anthropic", parent)
    kids = []
    for t in range(forks + 1):
        req = p.next_request()
        p.record_usage({"input_tokens": req.trace["final_tokens"], "output_tokens": 20})
        calls = p.assistant(f"step {t}", tool_calls=[{"id": f"c{t}", "name": "bash", "arguments": "{}"}])
        p.tool_result(calls[0].id, "output\n" * 40)
        if t < forks:
            path = tmp_path / f"child{t}.cpsession"
            child = p.fork(f"subtask {t}", record=path)
            cr = child.next_request()
            child.record_usage({"input_tokens": cr.trace["final_tokens"], "output_tokens": 20})
            child.assistant("done")
            child.close()
            kids.append(path)
    p.close()
    return parent, kids


def test_forks_counts_the_sub_agents_left_out_and_the_forks_it_could_not_read(tmp_path: Path) -> None:
    parent, kids = _tree(tmp_path / "three", 3)
    code, out = _run("forks", str(parent), str(kids[0]))
    assert code == 0, out
    assert f"{parent} forked 2 sub-agents not given ({kids[1].name}, {kids[2].name})" in out, out
    code, out = _run("forks", str(parent), str(kids[0]), str(kids[1]))
    assert code == 0 and f"{parent} forked 1 sub-agent not given ({kids[2].name})" in out, out
    for k in kids[1:]:
        k.unlink()
    code, out = _run("forks", str(parent))
    assert code == 0, out  # the one still there is read
    kids[0].unlink()
    code, out = _run("forks", str(parent))
    assert code == 2 and f"none of the 3 recorded forks of {parent} could be read (the warnings" in out, out
    parent, kids = _tree(tmp_path / "one", 1)
    kids[0].unlink()
    code, out = _run("forks", str(parent))
    # It read "none of the 1 recorded fork(s) of ... could be read".
    assert code == 2 and f"the recorded fork of {parent} could not be read (the warnings above" in out, out


def test_save_prompt_counts_the_received_turns() -> None:
    from inspector.screens.save import SaveScreen

    assert SaveScreen("cp-1.cpsession", 1).question().startswith("Save 1 received turn to this file ")
    assert SaveScreen("cp-1.cpsession", 2).question().startswith("Save 2 received turns to this file ")
