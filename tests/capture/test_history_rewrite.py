"""An agent that compacts its own history: after some turns it replaces the older ones with a summary and
sends a shorter history (the task and the last exchange kept, as OpenHands' condensers do). That request
does not extend the one before, and the tap (and the proxy, which journals through it) fed the whole new
history to the engine again as new messages: the recording's engine history held every kept message
twice, and the summary, and nothing said the agent had rewritten its history. Now the rewrite is a new
base: the as-sent request is journaled whole (`actual` base 0), only the messages after the last one the
engine knew are fed, and the turn's trace says what the rewrite did (`cp-inspect explain` shows it).
Real openai and anthropic SDKs through the proxy (and the tap) against the stand-in."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anthropic
import openai
from typer.testing import CliRunner

from engine.capture.tap import tap
from engine.recording.journal import trace_of
from tests.capture.conftest import MINI, Proxied, errors, events_of, mini_env, run_env, run_no_tui, verify_ok
from tests.capture.standin import StandIn

SYSTEM = "You are a careful coding agent."
TASK = "Look around the repository, then finish."
SUMMARY = "Summary of the work so far: listed the files and read a.py."
SCRIPT: list[str | dict[str, str]] = [{"bash": "ls"}, {"bash": "cat a.py"}, {"bash": "cat b.py"},
                                      {"bash": "pytest"}, "Done."]
OPENAI_TOOLS: list[Any] = [{"type": "function", "function": {
    "name": "bash", "description": "Run a command",
    "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}}]
ANTHROPIC_TOOLS: list[Any] = [{"name": "bash", "description": "Run a command", "input_schema": {
    "type": "object", "properties": {"command": {"type": "string"}}}}]
COMPACT_AFTER = 3  # replies; the fourth request is the rewritten one (turn 3)


def _openai_agent(client: openai.OpenAI) -> None:
    """A chat-completions loop that compacts once: the task, a summary, the last call and its result."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": TASK}]
    for i in range(len(SCRIPT)):
        r = client.chat.completions.create(model="gpt-4o", messages=messages, tools=OPENAI_TOOLS)  # type: ignore[arg-type]
        msg = r.choices[0].message
        if not msg.tool_calls:
            return
        messages.append(msg.model_dump(exclude_none=True))
        for call in msg.tool_calls:
            out = json.loads(call.function.arguments)["command"]  # type: ignore[union-attr]
            messages.append({"role": "tool", "tool_call_id": call.id, "content": f"ran: {out} ({i})"})
        if i + 1 == COMPACT_AFTER:
            messages = messages[:2] + [{"role": "user", "content": SUMMARY}] + messages[-2:]


def _anthropic_agent(client: anthropic.Anthropic) -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": TASK}]
    for i in range(len(SCRIPT)):
        r = client.messages.create(model="claude-sonnet-4", max_tokens=256, system=SYSTEM,
                                   messages=messages, tools=ANTHROPIC_TOOLS)  # type: ignore[arg-type]
        uses = [b for b in r.content if b.type == "tool_use"]
        if not uses:
            return
        messages.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in r.content]})
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": b.id, "content": f"ran: {b.input.get('command')} ({i})"}  # type: ignore[union-attr]
            for b in uses]})
        if i + 1 == COMPACT_AFTER:
            # the summary as the user's text, then the last exchange (Anthropic takes consecutive user turns)
            messages = messages[:1] + [{"role": "user", "content": SUMMARY}] + messages[-2:]


def _texts(ev: dict[str, Any], blobs: dict[str, str]) -> list[str]:
    parts = [ev["part"]] if ev["k"] == "part" else ev.get("parts") or []
    return [blobs[p["h"]] for p in parts if p.get("t") in ("text", "result") and p.get("h") in blobs]


def _rewrite_recorded(path: Path) -> None:
    evs = events_of(path)
    blobs = {e["h"]: e["data"] for e in evs if e["k"] == "blob"}
    fed = [t for e in evs if e["k"] in ("part", "msg") for t in _texts(e, blobs)]
    # every message fed to the engine once: the task, each tool result, each reply
    assert fed.count(TASK) == 1, fed
    results = [t for t in fed if t.startswith("ran: ")]
    assert len(results) == len(set(results)) == len(SCRIPT) - 1, results
    replies = [e for e in evs if e["k"] == "msg" and e.get("role") == "assistant"]
    assert len(replies) == len(SCRIPT), len(replies)
    # the agent's summary sits before the last message the engine knew: its version of turns it holds
    assert SUMMARY not in fed
    # the as-sent request of the rewritten turn is a new base (the whole request), the next extends it
    actual = {e["turn"]: e for e in evs if e["k"] == "actual"}
    assert actual[COMPACT_AFTER]["base"] == 0 and len(actual[COMPACT_AFTER]["add"]) >= 4
    assert actual[COMPACT_AFTER + 1]["base"] == len(actual[COMPACT_AFTER]["add"])
    traces = {e["turn"]: trace_of(e) for e in evs if e["k"] == "turn"}
    rw = traces[COMPACT_AFTER].get("history_rewrite")
    assert rw is not None, "the rewritten turn's trace says nothing of the rewrite"
    assert rw["replaced"] == 1 and rw["new"] == 1 and rw["dropped"] == 4, rw
    assert all("history_rewrite" not in t for n, t in traces.items() if n != COMPACT_AFTER)
    assert not errors(path)
    verify_ok(path)
    from inspector.cli import app

    res = CliRunner().invoke(app, ["explain", str(path), "--turn", str(COMPACT_AFTER)])
    assert res.exit_code == 0, res.output
    assert "history rewritten by the agent" in res.output, res.output
    assert "1 of the agent's own (summaries, edits) in place of 4 it dropped, then 1 new" in res.output
    res = CliRunner().invoke(app, ["explain", str(path), "--turn", str(COMPACT_AFTER), "--json"])
    assert json.loads(res.output)["history_rewrite"] == rw


def test_a_rewritten_history_is_a_new_base_through_the_proxy_openai(proxied: Proxied, standin: StandIn) -> None:
    standin.script = list(SCRIPT)
    _openai_agent(openai.OpenAI(base_url=proxied.url + "/v1", api_key="k", max_retries=0))
    (path,) = proxied.finish()
    _rewrite_recorded(path)


def test_a_rewritten_history_is_a_new_base_through_the_proxy_anthropic(proxied: Proxied, standin: StandIn) -> None:
    standin.script = list(SCRIPT)
    _anthropic_agent(anthropic.Anthropic(base_url=proxied.url, api_key="k", max_retries=0))
    (path,) = proxied.finish()
    _rewrite_recorded(path)


def test_a_rewritten_history_is_a_new_base_through_the_tap(standin: StandIn, tmp_path: Path) -> None:
    standin.script = list(SCRIPT)
    rec = tmp_path / "t.cpsession"
    client = tap(openai.OpenAI(base_url=standin.url + "/v1", api_key="k", max_retries=0), record=rec)
    _openai_agent(client)
    client.contextpipe_tap.close()
    assert client.contextpipe_stats.errors == 0, client.contextpipe_stats.last_error
    _rewrite_recorded(rec)


def test_a_summary_after_everything_kept_is_fed_as_new(standin: StandIn, tmp_path: Path) -> None:
    """A compaction that keeps only the system prompt (Claude Code's: a summary and the next request):
    nothing else is known, so the summary and what follows are the new messages, the system prompt is
    not fed again (it became a user message), and nothing earlier is fed twice."""
    standin.script = ["First answer.", "Second answer.", "Third answer."]
    rec = tmp_path / "t.cpsession"
    client = tap(openai.OpenAI(base_url=standin.url + "/v1", api_key="k", max_retries=0), record=rec)
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": TASK}]
    for _ in range(2):
        r = client.chat.completions.create(model="gpt-4o", messages=messages)  # type: ignore[arg-type]
        messages += [{"role": "assistant", "content": r.choices[0].message.content},
                     {"role": "user", "content": "Go on."}]
    client.chat.completions.create(model="gpt-4o", messages=[  # type: ignore[arg-type]
        {"role": "system", "content": SYSTEM}, {"role": "user", "content": SUMMARY},
        {"role": "user", "content": "Now finish."}])
    client.contextpipe_tap.close()
    evs = events_of(rec)
    blobs = {e["h"]: e["data"] for e in evs if e["k"] == "blob"}
    fed = [t for e in evs if e["k"] in ("part", "msg") for t in _texts(e, blobs)]
    assert fed.count(TASK) == 1 and fed.count(SUMMARY) == 1 and fed.count("Now finish.") == 1, fed
    assert fed.count(SYSTEM) == 0, "the system prompt was fed again as a message"
    traces = {e["turn"]: trace_of(e) for e in evs if e["k"] == "turn"}
    assert traces[2]["history_rewrite"] == {"messages": 3, "kept": 1, "replaced": 0, "dropped": 4, "new": 2}
    verify_ok(rec)


def test_mini_swe_agent_compacting_its_history_through_run(tmp_path: Path) -> None:
    """A real agent, mini-swe-agent, through `cp-inspect run`, with an agent class that compacts before
    its fourth call (tests/capture/compacting_agent.py)."""
    import subprocess

    import pytest

    pytest.importorskip("minisweagent", reason="mini-swe-agent is in the test extra")
    from tests.capture.compacting_agent import SUMMARY as MINI_SUMMARY

    assert MINI is not None
    standin = StandIn(script=[{"bash": "echo step-one"}, {"bash": "echo step-two"}, {"bash": "echo step-three"},
                              {"bash": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"}]).start()
    try:
        rec = tmp_path / "rec"
        env = run_env(tmp_path, **mini_env(tmp_path / "mini-config"))
        work = tmp_path / "work"
        work.mkdir()
        p = subprocess.run(
            run_no_tui(rec, standin.url, MINI, "-y", "--exit-immediately", "-m", "openai/gpt-4o",
             "--agent-class", "tests.capture.compacting_agent.CompactingAgent",
             "-t", "Print step-one, step-two and step-three, then finish.", "-l", "10"),
            env=env, cwd=work, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL,
        )
        assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
        assert len(standin.requests) == 4
        sent = json.loads(standin.requests[3][2])["messages"]
        assert len(sent) == 5 and sent[2]["content"] == MINI_SUMMARY  # mini did compact
    finally:
        standin.stop()
    (path,) = sorted(rec.glob("*.cpsession"))
    evs = events_of(path)
    blobs = {e["h"]: e["data"] for e in evs if e["k"] == "blob"}
    fed = [t for e in evs if e["k"] in ("part", "msg") for t in _texts(e, blobs)]
    assert MINI_SUMMARY not in fed
    replies = [e for e in evs if e["k"] == "msg" and e.get("role") == "assistant"]
    assert len(replies) == 4, len(replies)
    traces = {e["turn"]: trace_of(e) for e in evs if e["k"] == "turn"}
    assert traces[3]["history_rewrite"] == {"messages": 5, "kept": 3, "replaced": 1, "dropped": 4, "new": 1}
    assert verify_ok(path) == 4
