"""The recording proxy meeting what it cannot use, run as another user (see test_permissions.py): a port
that is taken or privileged, an upstream that does not answer, a client that sends a malformed request.
One line and exit 1 when it cannot start (and no record directory left behind); once it runs, a bad
request is the client's error and the proxy serves on."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.unprivileged import IS_ROOT, Sandbox, one_line, sandbox


@pytest.fixture
def sb() -> Iterator[Sandbox]:
    with sandbox() as s:
        yield s


def test_a_taken_port_is_one_line_and_leaves_no_record_directory(sb: Sandbox) -> None:
    # The proxy made its --record-dir, then could not listen, and left the empty directory behind.
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    try:
        for cmd in (["proxy"], ["run", "--no-tui"]):
            rec = sb.home / "rec"
            tail = ["--", "true"] if cmd[0] == "run" else []
            before = sb.files()
            r = sb.cli(*cmd, "--port", str(port), "--record-dir", str(rec), *tail, timeout=60)
            assert r.returncode == 1, r.stderr
            line = one_line(r.stderr)
            assert f"could not listen on 127.0.0.1:{port}: address already in use" in line, line
            assert "--port 0 for a free one" in line
            assert sb.files() == before, sorted(sb.files() - before)
    finally:
        taken.close()


@pytest.mark.skipif(not IS_ROOT, reason="root may listen below 1024; the child user may not")
def test_a_privileged_port_says_so(sb: Sandbox) -> None:
    r = sb.cli("proxy", "--port", "80", "--record-dir", str(sb.home / "rec"), timeout=60)
    assert r.returncode == 1
    assert "permission denied (a port below 1024 needs privileges)" in one_line(r.stderr)
    assert not (sb.home / "rec").exists()


def _start_proxy(sb: Sandbox, upstream: str) -> tuple[subprocess.Popen[bytes], str]:
    state = sb.home / "state.json"
    argv = [sys.executable, "-m", "inspector", "proxy", "--port", "0", "--no-serve", "--upstream", upstream]
    argv += ["--record-dir", str(sb.home / "rec"), "--state-file", str(state)]
    px = sb.popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while not state.exists():
        assert px.poll() is None and time.monotonic() < deadline, px.communicate()
        time.sleep(0.05)
    return px, str(json.loads(state.read_text())["url"])


def _post(url: str, body: bytes) -> tuple[int, bytes]:
    req = urllib.request.Request(
        url + "/v1/messages",
        data=body,
        headers={"content-type": "application/json", "x-api-key": "k", "anthropic-version": "2023-06-01"},
    )
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def _raw(url: str, data: bytes) -> bytes:
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.sendall(data)
        chunks = []
        while chunk := s.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def test_an_unreachable_upstream_and_a_malformed_request_are_the_clients_errors(sb: Sandbox) -> None:
    dead = socket.socket()
    dead.bind(("127.0.0.1", 0))  # bound, never listening: connections to it are refused
    upstream = f"http://127.0.0.1:{dead.getsockname()[1]}"
    px, url = _start_proxy(sb, upstream)
    try:
        body = json.dumps(
            {
                "model": "claude-3-5-sonnet-20241022",
                "max_tokens": 5,
                "messages": [{"role": "user", "content": "hi"}],
            }
        ).encode()
        status, answer = _post(url, body)
        assert status == 502, answer
        err = json.loads(answer)["error"]
        assert err["type"] == "api_error"
        assert f"could not reach the upstream {upstream}/v1/messages" in err["message"]
        assert "check --upstream and your network" in err["message"]
        # Not HTTP at all, then a request line with bytes no method has: 400 each, nothing recorded.
        for junk in (b"GARBAGE\r\n\r\n", b"\x00\xff" * 64 + b"\r\n\r\n"):
            assert _raw(url, junk).startswith(b"HTTP/1.0 400 Bad Request"), junk
        assert px.poll() is None  # serving on: the next call is answered as the first was
        assert _post(url, body)[0] == 502
    finally:
        px.terminate()
        out, err_text = px.communicate(timeout=60)
        dead.close()
    assert px.returncode == 0, err_text
    assert b"Traceback" not in err_text and b"Traceback" not in out, err_text
    # the same call sent again after its 502 is an attempt of the one failed turn (engine/capture/proxy/retries.py)
    assert b"1 call, 1 error, 1 retried attempt" in out, out
    recs = list((sb.home / "rec").glob("*.cpsession"))
    assert len(recs) == 1
    r = sb.cli("verify", str(recs[0]))
    assert r.returncode == 0, r.stderr


def test_a_record_directory_that_is_a_file_is_said_before_listening(sb: Sandbox) -> None:
    f = sb.writable_file("rec", b"not a directory")
    r = sb.cli("proxy", "--port", "0", "--record-dir", str(f), timeout=60)
    assert r.returncode == 1
    assert f"cannot create the record directory {f}" in one_line(r.stderr)
    assert Path(f).read_bytes() == b"not a directory"
