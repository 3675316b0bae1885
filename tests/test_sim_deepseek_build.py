"""DeepSeek's serving build reaches simulate from a proxy log, and a change of build is said.

DeepSeek's disk cache persists differently by build (`system_fingerprint`; cachesim's
DEEPSEEK_PERSIST_BY_FINGERPRINT). Only the mini-swe-agent importer kept the build: proxy-jsonl logs lost it,
so a logged DeepSeek session on a best-effort build was simulated as always persisting. (The capture tap
still loses it: its `actual` event is journaled before the reply names the build.)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from engine.importers import load
from engine.importers.ingest import ingest
from engine.sim.simulate import SimSettings, simulate_file

HALF = "fp_eaab8d114b_prod0820_fp8_kvcache_new_kvcache"  # persist probability 0.5
FULL = "fp_eaab8d114b_prod0820_fp8_kvcache_new_kvcache_20260410"  # 1.0
SYSTEM = "You are a careful coding agent working in a large repository. " * 100


def _reply(k: int, fp: str) -> dict[str, Any]:
    return {
        "id": f"c{k}",
        "object": "chat.completion",
        "created": 1,
        "model": "deepseek-chat",
        "system_fingerprint": fp,
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": f"ok {k}"}}],
        "usage": {"prompt_tokens": 1300 + k, "completion_tokens": 2, "total_tokens": 1302 + k},
    }


def _log(tmp_path: Path, fps: list[str]) -> Path:
    lines, msgs = [], [{"role": "system", "content": SYSTEM}]
    for k, fp in enumerate(fps):
        msgs.append({"role": "user", "content": f"step {k}"})
        lines.append(
            json.dumps(
                {"provider": "deepseek", "request": {"model": "deepseek-chat", "messages": list(msgs)}, "response": _reply(k, fp)}
            )
        )
        msgs.append({"role": "assistant", "content": f"ok {k}"})
    log = tmp_path / "ds.jsonl"
    log.write_text("\n".join(lines) + "\n")
    return log


def _simulate(tmp_path: Path, log: Path) -> list[str]:
    pipe, _ = ingest(load(log), tmp_path / "ds.cpsession")
    pipe.close()
    return simulate_file(tmp_path / "ds.cpsession", SimSettings(calibrate=False)).notes


def test_a_proxy_log_keeps_the_build(tmp_path: Path) -> None:
    log = _log(tmp_path, [HALF, HALF])
    assert [c.fingerprint for c in load(log).calls] == [HALF, HALF]
    assert f"DeepSeek build {HALF}: persist probability 0.5" in _simulate(tmp_path, log)


def test_a_change_of_build_is_said(tmp_path: Path) -> None:
    notes = _simulate(tmp_path, _log(tmp_path, [HALF, FULL]))
    assert f"DeepSeek build {FULL}: persist probability 1.0" in notes
    assert any(f"also served by {HALF} (persist probability 0.5)" in n for n in notes)
