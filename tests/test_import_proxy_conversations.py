"""A proxy JSONL log holding several conversations is imported as the proxy files them live
(engine.capture.lineage): its largest conversation, the others named in a note, as claude-trace logs are.
Every line used to go into one session: a second run of the agent on the same task was a "history
rewrite" of the first at every other call, and an unrelated call a turn of it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from engine.importers import load
from engine.importers.ingest import ingest
from engine.importers.model import ImportFormatError
from engine.importers.proxy_jsonl import every_call, parse_lines
from tests.capture.conftest import verify_ok

SYSTEM = {"role": "system", "content": "You are a coding agent."}
TASK = {"role": "user", "content": "Fix the bug."}


def _reply(run: str, turn: int) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": f"call_{run}{turn}",
                "type": "function",
                "function": {"name": "bash", "arguments": '{"c": "ls"}'},
            }
        ],
    }


def _history(run: str, turns: int) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = [SYSTEM, TASK]
    for t in range(turns):
        msgs += [
            _reply(run, t),
            {"role": "tool", "tool_call_id": f"call_{run}{t}", "content": f"out {run}{t}"},
        ]
    return msgs


def _line(msgs: list[dict[str, Any]], reply: dict[str, Any], model: str = "gpt-4o") -> str:
    return json.dumps(
        {
            "request": {"model": model, "messages": msgs},
            "response": {
                "model": model,
                "choices": [{"message": reply, "finish_reason": "tool_calls"}],
                "usage": {"prompt_tokens": 100 + 10 * len(msgs), "completion_tokens": 5},
            },
        }
    )


def _run(run: str, turn: int) -> str:
    return _line(_history(run, turn), _reply(run, turn))


def _write(tmp_path: Path, lines: list[str]) -> Path:
    log = tmp_path / "log.jsonl"
    log.write_text("\n".join(lines) + "\n")
    return log


def test_two_runs_of_one_task_are_two_conversations(tmp_path: Path) -> None:
    """The agent run twice on one task through the logging proxy, the second while the first goes on,
    and a short unrelated call (a title): three conversations, the largest imported."""
    title = _line(
        [{"role": "user", "content": "Name this chat."}],
        {"role": "assistant", "content": "Bug"},
        "gpt-4o-mini",
    )
    log = _write(tmp_path, [_run("a", 0), _run("b", 0), _run("a", 1), title, _run("b", 1), _run("a", 2)])
    imp = load(log)
    assert imp.meta["conversations"] == [3, 2, 1]
    assert [c.response.tool_calls[0].id for c in imp.calls if c.response] == ["call_a0", "call_a1", "call_a2"]
    assert imp.meta["notes"] == [
        "imported conversation 1 of 3 (3 calls); the others: 2 call(s) on gpt-4o, 1 call(s) on gpt-4o-mini"
    ]
    assert imp.model == "gpt-4o"  # the title call's model is another conversation's, not a mix
    out = tmp_path / "a.cpsession"
    pipe, _ = ingest(imp, out)
    pipe.close()
    assert verify_ok(out) == 3
    second = parse_lines(log.read_text(), str(log), conversation=2)
    assert [c.response.tool_calls[0].id for c in second.calls if c.response] == ["call_b0", "call_b1"]
    assert len(every_call(log).calls) == 6  # read as a set of calls: every line, in order
    with pytest.raises(ImportFormatError, match="has 3 conversation"):
        parse_lines(log.read_text(), str(log), conversation=4)


def test_one_conversation_gives_no_note(tmp_path: Path) -> None:
    imp = load(_write(tmp_path, [_run("a", 0), _run("a", 1), _run("a", 2)]))
    assert imp.meta["conversations"] == [3] and imp.meta["notes"] == []


def test_responses_calls_chained_by_previous_response_id_are_one_conversation(tmp_path: Path) -> None:
    """Each request continued by previous_response_id holds only what is new (its opening differs every
    turn): it goes with the call whose response it names, as the proxy files it."""

    def line(text: str, rid: str, prev: str | None) -> str:
        req: dict[str, Any] = {"model": "gpt-4.1", "instructions": "S", "input": text}
        if prev is not None:
            req["previous_response_id"] = prev
        resp = {
            "id": rid,
            "object": "response",
            "model": "gpt-4.1",
            "status": "completed",
            "output": [
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": f"re {text}"}],
                }
            ],
            "usage": {"input_tokens": 50, "output_tokens": 3},
        }
        return json.dumps({"request": req, "response": resp})

    other = line("Unrelated.", "resp_x", None)
    log = _write(
        tmp_path,
        [
            line("one", "resp_1", None),
            other,
            line("two", "resp_2", "resp_1"),
            line("three", "resp_3", "resp_2"),
        ],
    )
    imp = load(log)
    assert imp.meta["conversations"] == [3, 1]
    assert [c.response.content for c in imp.calls if c.response] == ["re one", "re two", "re three"]
