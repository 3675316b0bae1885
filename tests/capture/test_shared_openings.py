"""Conversations that share an opening (the same system prompt and task) through one proxy: a restart (the
agent run again on the same task), parallel attempts (best-of-n, a batch runner's workers on one
instance) and a fork (a step asked again and answered anew). Keyed by the opening alone they were one
session: each new start was journaled as a "history rewrite" of the one before, and interleaved attempts
were rewrites of each other every turn. Now each is its own session (engine.capture.lineage), the later
ones noted on their first turn (`conversation_branch`, printed by `cp-inspect explain`), while an agent
compacting its own history stays in its session (tests/capture/test_history_rewrite.py).
Real openai and anthropic SDKs (streamed and not), and a real mini-swe-agent, against the stand-in."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from typer.testing import CliRunner

from engine.capture.proxy.recording import Recorder
from engine.capture.proxy.server import ProxyServer
from engine.recording.journal import trace_of
from tests.capture.conftest import MINI, Proxied, errors, events_of, mini_env, run_env, run_no_tui, verify_ok
from tests.capture.standin import StandIn
from tests.capture.test_history_rewrite import SCRIPT, _openai_agent, _rewrite_recorded

ROOT = Path(__file__).resolve().parents[2]
SYSTEM = "You are a careful coding agent."
TASK = "Fix the failing test."


def _traces(path: Path) -> dict[int, dict[str, Any]]:
    return {e["turn"]: trace_of(e) for e in events_of(path) if e["k"] == "turn"}


def _replies(path: Path) -> list[str]:
    evs = events_of(path)
    blobs = {e["h"]: e["data"] for e in evs if e["k"] == "blob"}
    out = []
    for e in evs:
        if e["k"] == "msg" and e.get("role") == "assistant":
            out += [blobs.get(p.get("h"), "") for p in e.get("parts") or [] if p.get("t") == "text"]
    return out


def _explain(path: Path, turn: int) -> str:
    from inspector.cli import app

    res = CliRunner().invoke(app, ["explain", str(path), "--turn", str(turn)])
    assert res.exit_code == 0, res.output
    return res.output


def _no_rewrite(path: Path) -> None:
    assert all("history_rewrite" not in t for t in _traces(path).values()), _traces(path)


def test_a_restart_is_a_new_session_and_its_compaction_stays_in_it(
    proxied: Proxied, standin: StandIn
) -> None:
    """The same agent run twice on one task through one proxy: the second run's first request is the
    first run's opening again. It was journaled into the first run's session as a rewrite of its history;
    now it is session 2, 'same opening as session 1', and each run's own compaction is a rewrite of its
    own session (the compacted request holds that run's last reply)."""
    client = openai.OpenAI(base_url=proxied.url + "/v1", api_key="k", max_retries=0)
    for _ in range(2):
        standin.script = list(SCRIPT)
        _openai_agent(client)
    first, second = proxied.finish()
    _rewrite_recorded(first)
    _rewrite_recorded(second)
    assert "conversation_branch" not in _traces(first)[0]
    assert _traces(second)[0]["conversation_branch"] == {
        "kind": "same_opening",
        "session": 1,
        "turn": 0,
        "at_message": 2,
    }
    assert all("conversation_branch" not in t for n, t in _traces(second).items() if n)
    out = _explain(second, 0)
    assert "same opening as session 1: a new conversation (a restart or another attempt" in out, out
    res = CliRunner().invoke(
        __import__("inspector.cli").cli.app, ["explain", str(second), "--turn", "0", "--json"]
    )
    assert json.loads(res.output)["conversation_branch"]["kind"] == "same_opening"


def test_parallel_attempts_streamed_are_a_session_each(proxied: Proxied, standin: StandIn) -> None:
    """Three attempts of one task at once (threads, streamed chat completions): their requests interleave,
    each extending its own history; each is its own session of four turns, none a rewrite."""
    n_attempts, n_turns = 3, 4
    standin.script = [f"Attempt answer {i}." for i in range(n_attempts * n_turns)]
    client = openai.OpenAI(base_url=proxied.url + "/v1", api_key="k", max_retries=0)
    got: dict[int, list[str]] = {}
    start = threading.Barrier(n_attempts)

    def attempt(a: int) -> None:
        messages: Any = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": TASK}]
        start.wait()
        texts = []
        for t in range(n_turns):
            stream = client.chat.completions.create(
                model="gpt-4o",
                messages=messages,
                stream=True,
                stream_options={"include_usage": True},
            )
            text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
            texts.append(text)
            messages += [{"role": "assistant", "content": text}, {"role": "user", "content": f"Go on ({t})."}]
        got[a] = texts

    threads = [threading.Thread(target=attempt, args=(a,)) for a in range(n_attempts)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(60)
    paths = proxied.finish()
    assert len(paths) == n_attempts, paths
    assert sorted(tuple(_replies(p)) for p in paths) == sorted(tuple(v) for v in got.values())
    for i, p in enumerate(paths):
        assert len(_traces(p)) == n_turns and not errors(p)
        _no_rewrite(p)
        branch = _traces(p)[0].get("conversation_branch")
        assert branch == (
            None if i == 0 else {"kind": "same_opening", "session": 1, "turn": 0, "at_message": 2}
        )
        verify_ok(p)


def _anthropic_turn(client: anthropic.Anthropic, messages: Any) -> str:
    with client.messages.stream(
        model="claude-sonnet-4", max_tokens=256, system=SYSTEM, messages=messages
    ) as s:
        return "".join(s.text_stream)


def test_interleaved_attempts_and_a_fork_anthropic_streamed(proxied: Proxied, standin: StandIn) -> None:
    """Two attempts stepped in turn (A1 B1 A2 B2 ...), streamed through the anthropic SDK; then attempt A
    goes back and asks its second step again (another sample), and goes on from the new answer while A's
    first line also goes on. The re-asked step is a new session forked from A at message 4 (A's turn 1:
    the system prompt, the task, A's first reply, "Go on."); each line keeps its own session."""
    standin.script = [f"Reply {i}." for i in range(20)]
    client = anthropic.Anthropic(base_url=proxied.url, api_key="k", max_retries=0)
    lines: dict[str, list[dict[str, Any]]] = {
        "A": [{"role": "user", "content": TASK}],
        "B": [{"role": "user", "content": TASK}],
    }

    def step(name: str) -> None:
        text = _anthropic_turn(client, lines[name])
        lines[name] += [{"role": "assistant", "content": text}, {"role": "user", "content": "Go on."}]

    for _ in range(3):
        step("A")
        step("B")
    lines["F"] = lines["A"][:3]  # A's turn-1 request: the task, A's first reply, "Go on."
    step("F")
    step("A")
    step("F")
    a, b, f = proxied.finish()
    assert len(_traces(a)) == 4 and len(_traces(b)) == 3 and len(_traces(f)) == 2
    for p in (a, b, f):
        _no_rewrite(p)
        assert not errors(p)
        verify_ok(p)
    assert _traces(b)[0]["conversation_branch"]["kind"] == "same_opening"
    assert _traces(f)[0]["conversation_branch"] == {"kind": "fork", "session": 1, "turn": 1, "at_message": 4}
    # each recording's replies are its own line's, in order
    for p, name in ((a, "A"), (b, "B"), (f, "F")):
        mine = [m["content"] for m in lines[name] if m["role"] == "assistant"]
        assert _replies(p)[-len(mine[-2:]) :] == mine[-2:]
    assert _replies(f)[0] == lines["A"][1]["content"]  # the fork holds the shared messages, then its own
    out = _explain(f, 0)
    assert "forked from session 1 at message 4 (the request of its turn 1 asked again, answered anew)" in out


def test_an_edited_history_without_the_reasoning_stays_a_rewrite(proxied: Proxied, standin: StandIn) -> None:
    """DeepSeek's reasoner: its replies carry reasoning_content, which the agent must not send back, so no
    request holds a reply as it came. When the agent also edits an old message (clears an old output),
    the request shares only the opening with what was journaled, then a reply: that is not a new
    conversation (the reply is the one that was got, without its reasoning) but this one rewritten."""
    standin.script = [f"Step {i}." for i in range(4)]
    client = openai.OpenAI(base_url=proxied.url + "/deepseek", api_key="k", max_retries=0)
    messages: Any = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": TASK}]
    for t in range(4):
        if t == 3:
            messages[3] = {"role": "user", "content": "[old output cleared]"}
        r = client.chat.completions.create(model="deepseek-reasoner", messages=messages)
        messages += [
            {"role": "assistant", "content": r.choices[0].message.content},
            {"role": "user", "content": f"output {t}"},
        ]
    (path,) = proxied.finish()
    traces = _traces(path)
    assert len(traces) == 4 and "conversation_branch" not in traces[0]
    assert traces[3]["history_rewrite"]["replaced"] == 1, traces[3]
    verify_ok(path)


def test_a_failed_first_call_asked_again_stays_in_its_session(proxied: Proxied, standin: StandIn) -> None:
    """An opening asked again after its call failed (no reply: an SDK retry) is the same session."""
    client = openai.OpenAI(base_url=proxied.url + "/v1", api_key="k", max_retries=0)
    msgs: Any = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": TASK}]
    with pytest.raises(openai.APIStatusError):
        client.chat.completions.create(model="gpt-4o-error500", messages=msgs)
    standin.script = ["Fine now."]
    client.chat.completions.create(model="gpt-4o-error500"[:6], messages=msgs)
    (path,) = proxied.finish()
    assert len(_traces(path)) == 2
    _no_rewrite(path)


def test_the_index_is_bounded_with_the_live_sessions(standin: StandIn, tmp_path: Path, rtdir: Path) -> None:
    """Ten restarts through a proxy that keeps two sessions' state: the index holds the two live ones."""
    rec = Recorder(tmp_path / "rec", serve=False, max_kept=2)
    server = ProxyServer({"openai": standin.url}, rec).start()
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="k", max_retries=0)
    msgs: Any = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": TASK}]
    try:
        for i in range(10):
            standin.script = [f"Run {i}."]
            client.chat.completions.create(model="gpt-4o", messages=msgs)
        assert rec.flush(30)
        assert len(rec.lineage) == 2 and len(rec.sessions) == 2 and len(rec.let_go) == 8
    finally:
        server.stop()
        rec.close()


def test_mini_swe_agent_run_twice_through_one_proxy(
    proxied: Proxied, standin: StandIn, tmp_path: Path
) -> None:
    """A real agent, mini-swe-agent, run twice with the same task through one long-running proxy (as a
    harness retrying a task does): two recordings, the second noted as the first's opening again."""
    pytest.importorskip("minisweagent", reason="mini-swe-agent is in the test extra")
    from inspector.proxy_cli import agent_env

    assert MINI is not None
    standin.script = [{"bash": "echo step-one"}, {"bash": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"}] * 2
    before = len(standin.requests)
    env = agent_env(
        proxied.url,
        {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "XDG_RUNTIME_DIR": str(tmp_path),
            **mini_env(tmp_path / "mini-config"),
        },
    )
    work = tmp_path / "work"
    work.mkdir()
    for _ in range(2):
        p = subprocess.run(
            [
                MINI,
                "-y",
                "--exit-immediately",
                "-m",
                "openai/gpt-4o",
                "-t",
                "Print step-one, then finish.",
                "-l",
                "5",
            ],
            env=env,
            cwd=work,
            capture_output=True,
            text=True,
            timeout=600,
            stdin=subprocess.DEVNULL,
        )
        assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert len(standin.requests) - before == 4
    first, second = proxied.finish()
    for path in (first, second):
        assert verify_ok(path) == 2 and not errors(path)
        _no_rewrite(path)
    branch = _traces(second)[0]["conversation_branch"]
    assert branch["kind"] == "same_opening" and branch["session"] == 1 and branch["turn"] == 0


def test_run_says_which_session_has_another_ones_opening(
    standin: StandIn, tmp_path: Path, rtdir: Path
) -> None:
    """`cp-inspect run -- AGENT` whose agent does its task twice: the summary names both sessions and says
    the second has the first one's opening."""
    env = run_env(rtdir)
    standin.script = []
    rec = tmp_path / "rec"
    cmd = run_no_tui(
        rec,
        standin.url,
        sys.executable,
        "-m",
        "tests.capture.script_agent",
        "--turns",
        "2",
        "--runs",
        "2",
    )
    p = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, p.stderr
    assert "session 1 (gpt-4o): 2 calls, 0 errors ->" in p.stderr, p.stderr
    assert "session 2 (gpt-4o): 2 calls, 0 errors (same opening as session 1) ->" in p.stderr, p.stderr
    assert len(sorted(rec.glob("*.cpsession"))) == 2


# ------------------------------------------------------------------ the tap (in-process SDK wrapping)


def test_a_restart_through_the_tap_is_a_recording_of_its_own(standin: StandIn, tmp_path: Path) -> None:
    """One tapped client used for two runs of the same task: as through the proxy, the second run is its
    own conversation (recorded next to the first, RUN-s2.cpsession, noted 'same opening as session 1'),
    and each run's compaction a rewrite of its own. It was one recording, the second run a rewrite."""
    from engine.capture.tap import tap

    rec = tmp_path / "t.cpsession"
    client = tap(openai.OpenAI(base_url=standin.url + "/v1", api_key="k", max_retries=0), record=rec)
    for _ in range(2):
        standin.script = list(SCRIPT)
        _openai_agent(client)
    client.contextpipe_tap.close()
    assert client.contextpipe_stats.errors == 0, client.contextpipe_stats.last_error
    second = tmp_path / "t-s2.cpsession"
    assert sorted(tmp_path.glob("*.cpsession")) == [second, rec]
    _rewrite_recorded(rec)
    _rewrite_recorded(second)
    assert _traces(second)[0]["conversation_branch"] == {
        "kind": "same_opening",
        "session": 1,
        "turn": 0,
        "at_message": 2,
    }
    assert any("conversation 2: same opening as session 1" in n for n in client.contextpipe_stats.notes)


def test_parallel_attempts_through_one_tapped_async_client(standin: StandIn, tmp_path: Path) -> None:
    """Attempts run at once with asyncio.gather on one tapped AsyncAnthropic client, streamed: each its
    own conversation and recording, every turn in its own, none a rewrite."""
    import asyncio

    from engine.capture.tap import tap

    n_attempts, n_turns = 3, 3
    standin.script = [f"Async answer {i}." for i in range(n_attempts * n_turns)]
    rec = tmp_path / "a.cpsession"
    client = tap(anthropic.AsyncAnthropic(base_url=standin.url, api_key="k", max_retries=0), record=rec)

    async def attempt() -> list[str]:
        messages: Any = [{"role": "user", "content": TASK}]
        texts = []
        for t in range(n_turns):
            async with client.messages.stream(
                model="claude-sonnet-4", max_tokens=256, system=SYSTEM, messages=messages
            ) as s:
                text = "".join([x async for x in s.text_stream])
            texts.append(text)
            messages += [{"role": "assistant", "content": text}, {"role": "user", "content": f"Go on ({t})."}]
        return texts

    async def run() -> list[list[str]]:
        return list(await asyncio.gather(*(attempt() for _ in range(n_attempts))))

    got = asyncio.run(run())
    client.contextpipe_tap.close()
    assert client.contextpipe_stats.errors == 0, client.contextpipe_stats.last_error
    paths = [rec, tmp_path / "a-s2.cpsession", tmp_path / "a-s3.cpsession"]
    assert sorted(tmp_path.glob("*.cpsession")) == sorted(paths)
    # (each reply twice but the last: the stand-in's stream ends with a tool call the agent does not send
    # back, so its copy of the reply is fed as well, as the tap does for a reply left out)
    assert sorted(tuple(dict.fromkeys(_replies(p))) for p in paths) == sorted(tuple(t) for t in got)
    for p in paths:
        assert len(_traces(p)) == n_turns and not errors(p)
        _no_rewrite(p)
        verify_ok(p)
