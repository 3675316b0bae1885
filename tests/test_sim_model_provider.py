"""`simulate --model M` without --provider simulates M as the provider that serves M would serve it.

Before the twenty-first session the recorded provider's rules stayed: `--model claude-sonnet-4-5` on a
DeepSeek recording priced OpenAI's automatic prefix cache at Claude's prices (no cache write premium,
reads Anthropic gives only at cache_control breakpoints), and the note told the user to name a model
with --model, which they had just done.
"""

from __future__ import annotations

import json
from pathlib import Path

from engine.importers import load
from engine.importers.ingest import ingest
from engine.sim.simulate import SimSettings, simulate_file

SYSTEM = "You are a careful coding agent working in a large repository. " * 250  # ~3,000 tokens


def _deepseek_recording(tmp_path: Path) -> Path:
    lines = []
    msgs: list[dict[str, str]] = [{"role": "system", "content": SYSTEM}]
    for k in range(3):
        msgs.append({"role": "user", "content": f"step {k}: look at file_{k}.py"})
        reply = f"Looked at file_{k}.py."
        lines.append(
            json.dumps(
                {
                    "provider": "deepseek",
                    "timestamp": 1_700_000_000 + 30 * k,
                    "request": {"model": "deepseek-chat", "messages": list(msgs)},
                    "response": {
                        "model": "deepseek-chat",
                        "choices": [{"message": {"role": "assistant", "content": reply}}],
                        "usage": {"prompt_tokens": 3000 + 20 * k, "completion_tokens": 8},
                    },
                }
            )
        )
        msgs.append({"role": "assistant", "content": reply})
    log = tmp_path / "ds.jsonl"
    log.write_text("\n".join(lines) + "\n")
    pipe, _ = ingest(load(log), tmp_path / "ds.cpsession")
    pipe.close()
    return tmp_path / "ds.cpsession"


def test_a_named_model_brings_its_providers_rules(tmp_path: Path) -> None:
    rec = _deepseek_recording(tmp_path)
    r = simulate_file(rec, SimSettings(model="claude-sonnet-4-5", calibrate=False))
    assert (r.engine_provider, r.cache_rules) == ("anthropic", "anthropic")
    for name in ("pipeline", "gates_closed", "as_sent"):
        col = r.policies[name]
        assert col is not None and col.cache_rules == "anthropic"
        assert col.totals.cache_write > 2_500  # Anthropic bills the first write at 1.25x
        assert col.turns[1].cache_read_tokens > 2_500  # and reads it back at the breakpoint
    assert any("--model claude-sonnet-4-5 is served by anthropic" in n for n in r.notes)
    assert not any("cache rules applied at" in n for n in r.notes)


def test_a_named_provider_still_decides_and_the_note_says_how_to_align(tmp_path: Path) -> None:
    rec = _deepseek_recording(tmp_path)
    r = simulate_file(rec, SimSettings(model="claude-sonnet-4-5", provider="openai", calibrate=False))
    assert (r.engine_provider, r.cache_rules) == ("openai", "openai")
    assert any("choose --provider anthropic" in n for n in r.notes)


def test_a_model_of_the_recorded_provider_changes_nothing(tmp_path: Path) -> None:
    rec = _deepseek_recording(tmp_path)
    r = simulate_file(rec, SimSettings(model="deepseek-reasoner", calibrate=False))
    assert r.cache_rules == "deepseek" and r.engine_provider == "openai"
    assert not any("is served by" in n for n in r.notes)
