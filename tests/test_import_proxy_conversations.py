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
        "imported conversation 1 of 3 (3 calls); the others: 2: 2 calls on gpt-4o, 'Fix the bug.' (same opening "
        "as 1: a restart or another attempt); 3: 1 call on gpt-4o-mini, 'Name this chat.'; import another "
        "with --conversation N"
    ]
    assert imp.model == "gpt-4o"  # the title call's model is another conversation's, not a mix
    out = tmp_path / "a.cpsession"
    pipe, _ = ingest(imp, out)
    pipe.close()
    assert verify_ok(out) == 3
    second = parse_lines(log.read_text(), str(log), conversation=2)
    assert [c.response.tool_calls[0].id for c in second.calls if c.response] == ["call_b0", "call_b1"]
    assert second.meta["notes"][0].startswith(
        "imported conversation 2 of 3 (2 calls, same opening as 1: a restart or another attempt); the others: "
        "1: 3 calls on gpt-4o, 'Fix the bug.'; 3: "
    )
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


def test_the_listing_names_restarts_and_forks_and_conversation_picks_one(tmp_path: Path) -> None:
    """A run, a fork of it (its turn-1 request asked again and answered anew, going on from there) and a
    restart: the listing numbers each as --conversation takes it and says which began as which; a number
    past the count is refused with the count (the CLI: exit 2, one line)."""
    from typer.testing import CliRunner

    from engine.importers import NoSuchConversation, conversation_list
    from inspector.cli import app

    fork_reply = _reply("f", 1)
    fork = _history("a", 1)
    lines = [_run("a", 0), _run("a", 1), _run("a", 2), _run("a", 3), _line(fork, fork_reply)]
    fork += [fork_reply, {"role": "tool", "tool_call_id": "call_f1", "content": "out f1"}]
    lines += [_line(fork, _reply("f", 2)), _run("r", 0)]
    log = _write(tmp_path, lines)
    imp = load(log)
    assert imp.meta["conversations"] == [4, 2, 1]
    assert conversation_list(imp) == [
        "1: 4 calls on gpt-4o, 'Fix the bug.'",
        "2: 2 calls on gpt-4o, 'Fix the bug.' (forked from 1 at message 4)",
        "3: 1 call on gpt-4o, 'Fix the bug.' (same opening as 1: a restart or another attempt)",
    ]
    forked = load(log, conversation=2)
    assert [c.response.tool_calls[0].id for c in forked.calls if c.response] == ["call_f1", "call_f2"]
    assert "(2 calls, forked from 1 at message 4)" in forked.meta["notes"][0]
    with pytest.raises(NoSuchConversation, match="has 3 conversations; conversation 5 does not exist"):
        load(log, conversation=5)
    with pytest.raises(NoSuchConversation, match="holds one conversation"):
        load(Path(__file__).parent / "fixtures" / "synthetic" / "mini_repr_strings.traj.json", conversation=2)

    r = CliRunner()
    res = r.invoke(app, ["import", "auto", str(log), "--list"])
    assert res.exit_code == 0, res.output
    assert res.output.splitlines() == [f"{log}: 3 conversations", *(f"  {x}" for x in conversation_list(imp))]
    out = tmp_path / "fork.cpsession"
    res = r.invoke(app, ["import", "auto", str(log), "--conversation", "2", "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert "imported conversation 2 of 3" in res.output and verify_ok(out) == 2
    res = r.invoke(
        app, ["import", "auto", str(log), "--conversation", "5", "-o", str(tmp_path / "x.cpsession")]
    )
    assert res.exit_code == 2 and not (tmp_path / "x.cpsession").exists()
    assert res.output.strip().splitlines() == [
        f"cp-inspect: --conversation 5: {log} holds 3 conversations (1 to 3); "
        f"`cp-inspect import auto {log} --list` lists them"
    ]
    res = r.invoke(app, ["import", "auto", str(log)])
    assert res.exit_code == 2 and "-o/--out" in res.output


def test_a_call_two_conversations_fit_as_well_is_said(tmp_path: Path) -> None:
    """Two attempts that both leave their first reply out (mini-swe-agent's format error) ask the same
    request: filed with the first attempt, and the note says the other fits it as well."""
    complaint = {"role": "user", "content": "Format error: run one command."}
    lines = [
        _line([SYSTEM, TASK], {"role": "assistant", "content": "One."}),
        _line([SYSTEM, TASK], {"role": "assistant", "content": "Two."}),
        _line([SYSTEM, TASK, complaint], {"role": "assistant", "content": "Three."}),
    ]
    imp = load(_write(tmp_path, lines))
    assert imp.meta["conversations"] == [2, 1]
    assert imp.meta["notes"][1] == (
        "call 1 of this conversation fits conversation 2 as well (an attempt that left its reply out, or a "
        "compaction that kept only the shared opening): filed with this one, the earliest it fits"
    )


def test_conversation_zero_is_one_line(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from inspector.cli import app

    log = _write(tmp_path, [_run("a", 0)])
    res = CliRunner().invoke(
        app, ["import", "auto", str(log), "--conversation", "0", "-o", str(tmp_path / "o")]
    )
    assert res.exit_code == 2
    assert res.output == (
        "cp-inspect: --conversation must be 1 or more (1 is the conversation with the most calls), got 0\n"
    )


def test_a_claude_trace_log_lists_and_picks_its_conversations(tmp_path: Path) -> None:
    """claude-trace logs are filed the same way: --conversation N picks one, the listing says which
    began as a restart of which."""
    from engine.importers import conversation_list
    from tests.test_import_hostile import _trace_line

    def ok(text: str) -> dict[str, Any]:
        body = {"type": "message", "role": "assistant", "content": [{"type": "text", "text": text}],
                "usage": {"input_tokens": 5, "output_tokens": 1}}  # fmt: skip
        return {"status_code": 200, "headers": {}, "body": body}

    first = {"model": "claude-sonnet-4", "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}]}
    more = {**first, "messages": [*first["messages"], {"role": "assistant", "content": "yo"},
                                  {"role": "user", "content": "and?"}]}  # fmt: skip
    src = tmp_path / "log.jsonl"
    src.write_text(
        "\n".join([_trace_line(first, ok("yo")), _trace_line(more, ok("so")), _trace_line(first, ok("hey"))])
    )
    imp = load(src)
    assert imp.format == "claude-trace" and imp.meta["conversations"] == [2, 1]
    assert conversation_list(imp) == [
        "1: 2 calls on claude-sonnet-4, 'hi'",
        "2: 1 call on claude-sonnet-4, 'hi' (same opening as 1: a restart or another attempt)",
    ]
    second = load(src, conversation=2)
    assert [c.response.content for c in second.calls if c.response] == ["hey"]
