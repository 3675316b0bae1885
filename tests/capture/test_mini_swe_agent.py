"""A real third-party agent, unchanged: mini-swe-agent (models through litellm) under `cp-inspect run`.

The stand-in upstream scripts two replies that call mini's `bash` tool: one harmless command, then
mini's own end-of-task convention (`echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT` as the first output
line makes its environment raise Submitted). mini finds the proxy only through the environment
`cp-inspect run` sets (OPENAI_BASE_URL / ANTHROPIC_BASE_URL, read by litellm). No network: litellm's
price map is read locally (LITELLM_LOCAL_MODEL_COST_MAP, set by `run`).
Checked: mini succeeds, every call is recorded with the provider's usage (Anthropic cache writes
included, through litellm's Anthropic path), the recording verifies, and mini's own trajectory,
imported, reports the same usage.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from engine.importers import load
from tests.capture.conftest import MINI, errors, events_of, mini_env, run_env, run_no_tui, usages, verify_ok
from tests.capture.standin import StandIn

pytest.importorskip("minisweagent", reason="mini-swe-agent is in the test extra: pip install -e '.[test]'")
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("model", "expect"),
    [
        ("openai/gpt-4o", {"input_tokens": 2048, "output_tokens": 12, "cache_read_tokens": 1920}),
        (
            "anthropic/claude-sonnet-4-5",
            {
                "input_tokens": 21 + 3400 + 1200,
                "output_tokens": 17,
                "cache_read_tokens": 3400,
                "cache_write_tokens": 1200,
            },
        ),
    ],
)
def test_mini_swe_agent_through_run(tmp_path: Path, model: str, expect: dict[str, int]) -> None:
    assert MINI is not None, "the `mini` executable is missing although minisweagent imports"
    standin = StandIn(
        # the middle reply has no tool call: mini answers it with a format error and leaves it out of
        # its history, which the recording's engine history must not take for a rewritten one
        script=[
            {"bash": "echo step-one"},
            "I will look around first.",
            {"bash": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"},
        ]
    ).start()
    try:
        rec, traj = tmp_path / "rec", tmp_path / "mini.traj.json"
        env = run_env(tmp_path, **mini_env(tmp_path / "mini-config"), ANTHROPIC_API_KEY="sk-ant-test-mini")
        cmd = run_no_tui(
            rec,
            standin.url,
            MINI,
            "-y",
            "--exit-immediately",
            "-m",
            model,
            "-t",
            "Print step-one, then finish.",
            "-l",
            "1",
            "-o",
            str(traj),
        )
        work = tmp_path / "work"
        work.mkdir()
        p = subprocess.run(
            cmd, env=env, cwd=work, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL
        )
        assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
        assert "step-one" in p.stdout
        assert len(standin.requests) == 3  # all of mini's calls went through the proxy
        files = sorted(rec.glob("*.cpsession"))
        assert len(files) == 1, p.stderr
        us = usages(files[0])
        assert len(us) == 3 and not errors(files[0])
        for u in us:
            assert {k: u[k] for k in expect} == expect
        assert verify_ok(files[0]) == 3
        # each reply fed to the engine once (the whole conversation was fed again after the dropped one)
        replies = [e for e in events_of(files[0]) if e["k"] == "msg" and e.get("role") == "assistant"]
        assert len(replies) == 3, replies
        # mini's own record of the run agrees with the proxy's.
        assert json.loads(traj.read_text())["info"]["exit_status"] == "Submitted"
        imp = load(traj)
        # (mini's trajectory keeps the calls whose replies it kept: the dropped one is not among them)
        kept = [us[0], us[2]]
        assert [c.usage.input_tokens if c.usage else None for c in imp.calls] == [u["input_tokens"] for u in kept]
        assert (
            b"sk-test-mini" not in files[0].read_bytes() and b"sk-ant-test-mini" not in files[0].read_bytes()
        )
    finally:
        standin.stop()
