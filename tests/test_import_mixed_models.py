"""A log whose calls name more than one model or provider is imported as one of them, and says so.

Simulate prices and caches a whole session as one model served by one provider. The model used to be
the first call's and the provider the commonest over every call, so a log of one Claude call followed by
two gpt-4o calls came out as "claude-sonnet-4-5 via openai" (OpenAI cache rules at Claude prices) with
no note at all.
"""

from __future__ import annotations

import json
from pathlib import Path

from engine.importers.proxy_jsonl import every_call


def _openai(model: str, text: str, served: str | None = None) -> dict[str, object]:
    return {
        "request": {"model": model, "messages": [{"role": "user", "content": text}]},
        "response": {
            "model": served or model,
            "choices": [{"message": {"role": "assistant", "content": "ok"}}],
            "usage": {"prompt_tokens": 9, "completion_tokens": 1},
        },
    }


def _anthropic(model: str, text: str) -> dict[str, object]:
    return {
        "request": {
            "model": model,
            "max_tokens": 64,
            "system": "s",
            "messages": [{"role": "user", "content": text}],
        },
        "response": {
            "type": "message",
            "model": model,
            "role": "assistant",
            "content": [{"type": "text", "text": "ok"}],
            "usage": {"input_tokens": 9, "output_tokens": 1},
        },
    }


def _write(path: Path, lines: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def test_mixed_models_import_as_the_commonest_with_a_note(tmp_path: Path) -> None:
    log = _write(
        tmp_path / "mixed.jsonl",
        [_anthropic("claude-sonnet-4-5", "a"), _openai("gpt-4o", "b"), _openai("gpt-4o", "c")],
    )
    s = every_call(log)
    assert (s.model, s.provider) == ("gpt-4o", "openai")
    notes = s.meta["notes"]
    assert len(notes) == 1
    assert "gpt-4o (2), claude-sonnet-4-5 (1)" in notes[0] and "priced as gpt-4o via openai" in notes[0]


def test_a_tie_keeps_model_and_provider_together(tmp_path: Path) -> None:
    s = every_call(
        _write(tmp_path / "tie.jsonl", [_openai("gpt-4o", "a"), _anthropic("claude-sonnet-4-5", "b")])
    )
    assert (s.model, s.provider) == ("gpt-4o", "openai")  # not gpt-4o via anthropic
    assert s.meta["notes"]


def test_one_model_gives_no_note(tmp_path: Path) -> None:
    # The request names the alias, the reply the dated snapshot; a failed call only has the alias.
    failed = {
        "request": {"model": "gpt-4o", "messages": [{"role": "user", "content": "z"}]},
        "response": None,
    }
    s = every_call(
        _write(
            tmp_path / "one.jsonl",
            [
                _openai("gpt-4o", "a", "gpt-4o-2024-08-06"),
                failed,
                _openai("gpt-4o", "b", "gpt-4o-2024-08-06"),
            ],
        )
    )
    assert (s.model, s.provider) == ("gpt-4o-2024-08-06", "openai")
    assert s.meta["notes"] == []
