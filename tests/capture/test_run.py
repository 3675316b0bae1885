"""`cp-inspect run -- CMD`: a real child agent (openai SDK, configured only by its environment) through
the proxy to the stand-in; its exit code comes back; every call is recorded and verifies.
Also `cp-inspect proxy` as a process: a free port printed, SIGTERM finishes the recordings."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.capture.conftest import errors, run_env, run_no_tui, usages, verify_ok
from tests.capture.standin import StandIn
from tests.support.ctrl_c import ctrl_c_as_in_a_terminal

ROOT = Path(__file__).resolve().parents[2]


def test_run_no_tui_records_child_and_returns_its_exit_code(
    standin: StandIn, tmp_path: Path, rtdir: Path
) -> None:
    rec = tmp_path / "rec"
    cmd = run_no_tui(
        rec,
        standin.url,
        sys.executable,
        "-m",
        "tests.capture.script_agent",
        "--turns",
        "4",
        "--stream",
        "--exit",
        "3",
    )
    p = subprocess.run(cmd, env=run_env(rtdir), cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert p.returncode == 3, p.stderr
    assert "turn 3: Hello from the stand-in." in p.stdout  # the agent's output reaches the terminal
    assert "session 1 (gpt-4o): 4 calls, 0 errors" in p.stderr
    files = sorted(rec.glob("*.cpsession"))
    assert len(files) == 1
    assert [u["cache_read_tokens"] for u in usages(files[0])] == [1920] * 4
    assert not errors(files[0])
    assert verify_ok(files[0]) == 4
    assert list(rtdir.glob("contextpipe/*.sock")) == []  # the proxy cleaned up its probe sockets


def test_run_of_one_call_says_one_call(standin: StandIn, tmp_path: Path, rtdir: Path) -> None:
    cmd = [sys.executable, "-m", "inspector.cli", "run", "--no-tui", "--record-dir", str(tmp_path / "rec"),
           "--upstream", standin.url, "--", sys.executable, "-m", "tests.capture.script_agent", "--turns", "1"]
    p = subprocess.run(cmd, env=run_env(rtdir), cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, p.stderr
    assert "session 1 (gpt-4o): 1 call, 0 errors -> " in p.stderr, p.stderr
    # The agent has the terminal: the run says how to watch it from another (it said nothing of it, and
    # an agent that asks questions has to run so: the TUI gives it no input)
    watch = re.search(r"watch it from another terminal: cp-inspect attach (\d+)\.1 ", p.stderr)
    assert watch is not None, p.stderr
    (recorded,) = (tmp_path / "rec").glob("*.cpsession")
    assert f"-{watch[1]}-s1-" in recorded.name  # the proxy's pid: the session attach opens


def test_run_without_command_says_what_to_do(tmp_path: Path, rtdir: Path) -> None:
    p = subprocess.run(
        [sys.executable, "-m", "inspector.cli", "run", "--no-tui"],
        env=run_env(rtdir),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 2 and "give the agent's command after `--`" in p.stderr
    assert "Traceback" not in p.stderr


def test_run_missing_command(standin: StandIn, tmp_path: Path, rtdir: Path) -> None:
    p = subprocess.run(
        run_no_tui(
            tmp_path,
            standin.url,
            "no-such-agent-binary-xyz",
        ),
        env=run_env(rtdir),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 1 and "cannot start 'no-such-agent-binary-xyz'" in p.stderr
    assert "Traceback" not in p.stderr


def test_proxy_command_free_port_and_sigterm(standin: StandIn, tmp_path: Path, rtdir: Path) -> None:
    import openai

    rec = tmp_path / "rec"
    px = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "inspector.cli",
            "proxy",
            "--port",
            "0",
            "--record-dir",
            str(rec),
            "--upstream",
            standin.url,
        ],
        env=run_env(rtdir),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert px.stdout is not None
        line = px.stdout.readline()
        assert "listening on http://127.0.0.1:" in line, line
        url = line.split("listening on ")[1].split()[0]
        client = openai.OpenAI(base_url=url + "/v1", api_key="k", max_retries=0)
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
        deadline = time.monotonic() + 60
        while not list(rec.glob("*.cpsession")) and time.monotonic() < deadline:
            time.sleep(0.05)
        out = subprocess.run(
            [sys.executable, "-m", "inspector.cli", "ps"],
            env=run_env(rtdir),
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout
        assert f"{px.pid}.1" in out and "gpt-4o" in out
    finally:
        px.send_signal(signal.SIGTERM)
        rest = px.communicate(timeout=60)[0]
    # One session of one call, counted in words ("1 session(s)" and "1 calls, 0 errors" before).
    assert px.returncode == 0 and "); 1 session\n" in rest, rest
    assert ": 1 call, 0 errors" in rest, rest
    files = list(rec.glob("*.cpsession"))
    assert len(files) == 1 and verify_ok(files[0]) == 1


def test_proxy_refuses_remote_host_without_flag(tmp_path: Path, rtdir: Path) -> None:
    p = subprocess.run(
        [sys.executable, "-m", "inspector.cli", "proxy", "--host", "0.0.0.0", "--record-dir", str(tmp_path)],
        env=run_env(rtdir),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 2 and "--allow-remote" in p.stderr and "Traceback" not in p.stderr


def test_run_on_a_taken_port_says_so_once_and_leaves_no_log(tmp_path: Path, rtdir: Path) -> None:
    # It said "cp-inspect: the proxy exited with code 1: cp-inspect: the proxy could not listen on
    # 127.0.0.1:N: [Errno 98] error while attempting to bind on address ('127.0.0.1', N): address already
    # in use (...)", and left the proxy's log, which held only that line, in the record directory.
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        rec = tmp_path / "rec"
        cmd = [sys.executable, "-m", "inspector.cli", "run", "--no-tui", "--port", str(port), "--record-dir",
               str(rec), "--", sys.executable, "-c", "pass"]
        p = subprocess.run(cmd, env=run_env(rtdir), cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 1, p.stderr
    assert p.stderr == (
        f"cp-inspect: the proxy could not listen on 127.0.0.1:{port}: address already in use: another program "
        "listens there (try another --port, or --port 0 for a free one)\n"
    ), p.stderr
    assert not rec.exists()  # nor the record directory the run made for it (it was left empty)


def test_ctrl_c_before_the_first_call_is_said_as_such(tmp_path: Path, rtdir: Path) -> None:
    # Ctrl-C while the agent had not called its model yet: "the agent exited with status 130 before
    # making one (its output says why)", as if it had failed. The terminal's Ctrl-C is a SIGINT to the
    # foreground process group: the run and the agent both.
    cmd = [sys.executable, "-m", "inspector.cli", "run", "--no-tui", "--record-dir", str(tmp_path / "rec"), "--",
           sys.executable, "-c", "import time; time.sleep(60)"]
    p = subprocess.Popen(cmd, env=run_env(rtdir), cwd=ROOT, stderr=subprocess.PIPE, text=True, start_new_session=True,
                         preexec_fn=ctrl_c_as_in_a_terminal)
    try:
        assert p.stderr is not None
        said = []
        for line in p.stderr:  # the proxy is up and the agent started
            said.append(line)
            if "watch it from another terminal" in line:
                break
        time.sleep(0.5)
        os.killpg(p.pid, signal.SIGINT)
        rest = p.stderr.read()
        assert p.wait(60) == 130
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    assert "the agent was ended by SIGINT (Ctrl-C) before making one\n" in rest, "".join(said) + rest
    assert "its output says why" not in rest


def test_ps_shows_a_run_sessions_agent_command_not_the_proxys(standin: StandIn, tmp_path: Path, rtdir: Path) -> None:
    # A `cp-inspect run`'s sessions are served by its proxy process: ps (and top) showed each as
    # "python -m inspector.cli proxy --port 0 --record-dir ... --state-file /tmp/cp-run-.../proxy.json",
    # so two runs' sessions read alike and neither said which agent it was.
    agent = [sys.executable, "-c", "import time; from tests.capture.script_agent import main; main(); time.sleep(60)"]
    cmd = [sys.executable, "-m", "inspector.cli", "run", "--no-tui", "--record-dir", str(tmp_path / "rec"),
           "--upstream", standin.url, "--", *agent, "--turns", "1"]
    p = subprocess.Popen(cmd, env=run_env(rtdir), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            ps = subprocess.run([sys.executable, "-m", "inspector.cli", "ps", "--json"], env=run_env(rtdir), cwd=ROOT,
                                capture_output=True, text=True, timeout=60)
            rows = [r for r in json.loads(ps.stdout or "[]") if r["session"] == 1]
            if rows and rows[0]["turns"]:
                break
            assert time.monotonic() < deadline, ps.stdout + ps.stderr
            time.sleep(0.2)
        assert rows[0]["command"] == shlex.join([*agent, "--turns", "1"]), rows
    finally:
        os.killpg(p.pid, signal.SIGTERM)
        p.wait(60)
