"""Proxy overhead: time to first byte and total time through `cp-inspect proxy` vs straight to the upstream.

Three processes, as in real use: the stand-in upstream (tests/capture/standin.py, streaming its events
`--delay` seconds apart), the proxy (`cp-inspect proxy`, recording and serving every session, as
`cp-inspect run` starts it), and this client (http.client, one keep-alive connection to each).
Each round sends the same request direct and through the proxy, in alternating order (interleaved,
so drift hits both alike); the added time is the per-round difference. Streamed calls measure the
first SSE bytes (time to first token); non-streamed calls the first body byte. A proxy that buffered
the stream would add about (events x delay) to the first byte; one that does not adds a constant.

CPU: the proxy process's user+system time per call (from /proc), beside the client's wall time.

`--gap` pauses between rounds as an agent does while it runs a tool; with no gap the proxy's recorder
(journaling the previous call in its own thread) competes with the next call for the interpreter.

`--forward-only` runs the proxy without its recorder, to tell forwarding cost from recording cost.

Run:  .venv/bin/python benchmarks/bench_proxy.py [--rounds 200] [--delay 0.002] [--history-kb 200] [--gap 0.02]
      [--forward-only]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def _start_standin(delay: float) -> tuple[subprocess.Popen[bytes], int]:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    p = subprocess.Popen(
        [sys.executable, "-m", "tests.capture.standin", "--port", str(port), "--delay", str(delay)],
        env=ENV,
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    _wait_port(port)
    return p, port


def _wait_port(port: int) -> None:
    import socket

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"nothing listens on port {port}")


def _start_proxy(upstream: str, work: Path, forward_only: bool) -> tuple[subprocess.Popen[bytes], int]:
    state = work / "proxy.json"
    extra = ["--forward-only"] if forward_only else []
    p = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "inspector.cli",
            "proxy",
            "--port",
            "0",
            "--upstream",
            upstream,
            "--record-dir",
            str(work / "rec"),
            "--state-file",
            str(state),
            *extra,
        ],
        env={**ENV, "XDG_RUNTIME_DIR": str(work)},
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while not state.exists():
        if time.monotonic() > deadline or p.poll() is not None:
            raise SystemExit("the proxy did not start")
        time.sleep(0.05)
    url = json.loads(state.read_text())["url"]
    return p, int(url.rsplit(":", 1)[1])


def _cpu(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _call(conn: http.client.HTTPConnection, body: bytes) -> tuple[float, float, int]:
    """(seconds to the first body bytes, seconds to the end, body length)."""
    t0 = time.perf_counter()
    conn.request(
        "POST",
        "/v1/chat/completions",
        body=body,
        headers={"content-type": "application/json", "authorization": "Bearer sk-bench"},
    )
    resp = conn.getresponse()
    first = resp.read1(65536)
    t1 = time.perf_counter()
    rest = resp.read()
    t2 = time.perf_counter()
    if resp.status != 200:
        raise SystemExit(f"HTTP {resp.status}: {(first + rest)[:200]!r}")
    return t1 - t0, t2 - t0, len(first) + len(rest)


def _pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def _body(stream: bool, history_kb: int, round_no: int) -> bytes:
    msgs: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a benchmark agent."},
        {"role": "user", "content": "Fix the bug."},
    ]
    filler = "x" * 1000
    for i in range(history_kb):
        msgs.append({"role": "assistant" if i % 2 == 0 else "user", "content": f"{i} {filler}"})
    # One conversation that grows by a message per round, as an agent's does (the recorder sees a real
    # session, not the same request repeated).
    msgs.append({"role": "user", "content": f"round {round_no}"})
    body: dict[str, Any] = {"model": "gpt-4o", "messages": msgs, "stream": stream}
    if stream:
        body["stream_options"] = {"include_usage": True}
    return json.dumps(body).encode()


def run(rounds: int, delay: float, history_kb: int, gap: float, forward_only: bool) -> None:
    standin, sport = _start_standin(delay)
    work = Path(tempfile.mkdtemp(prefix="bench-proxy-"))
    proxy, pport = _start_proxy(f"http://127.0.0.1:{sport}", work, forward_only)
    try:
        direct = http.client.HTTPConnection("127.0.0.1", sport, timeout=60)
        via = http.client.HTTPConnection("127.0.0.1", pport, timeout=60)
        print(
            f"rounds {rounds} per mode, stand-in event delay {delay * 1000:g} ms, "
            f"history {history_kb} KB per request; proxy pid {proxy.pid} "
            f"({'forwarding only' if forward_only else 'recording + serving'})"
        )
        print(
            f"{'mode':<12}{'TTFB direct p50/p95':>22}{'via proxy p50/p95':>20}{'added p50/p95':>18}"
            f"{'total added p50/p95':>22}{'proxy CPU/call':>16}"
        )
        for stream in (True, False):
            for i in range(10):  # warm up connections, the proxy's recorder and the stand-in
                _call(direct, _body(stream, history_kb, -1))
                _call(via, _body(stream, history_kb, -1 - i))
            d_first: list[float] = []
            p_first: list[float] = []
            add_first: list[float] = []
            add_total: list[float] = []
            cpu0 = _cpu(proxy.pid)
            for r in range(rounds):
                if gap:
                    time.sleep(gap)
                body = _body(stream, history_kb, r + (0 if stream else 100_000))
                if r % 2 == 0:
                    d = _call(direct, body)
                    p = _call(via, body)
                else:
                    p = _call(via, body)
                    d = _call(direct, body)
                assert p[2] == d[2], "the proxy changed the body length"
                d_first.append(d[0])
                p_first.append(p[0])
                add_first.append(p[0] - d[0])
                add_total.append(p[1] - d[1])
            cpu = (_cpu(proxy.pid) - cpu0) / rounds
            ms = 1000.0
            print(
                f"{'streamed' if stream else 'unstreamed':<12}"
                f"{_pct(d_first, 0.5) * ms:>10.2f}/{_pct(d_first, 0.95) * ms:<10.2f}"
                f"{_pct(p_first, 0.5) * ms:>9.2f}/{_pct(p_first, 0.95) * ms:<9.2f}"
                f"{_pct(add_first, 0.5) * ms:>8.2f}/{_pct(add_first, 0.95) * ms:<8.2f}"
                f"{_pct(add_total, 0.5) * ms:>10.2f}/{_pct(add_total, 0.95) * ms:<10.2f}"
                f"{cpu * ms:>10.2f} ms"
            )
            print(
                f"{'':<12}mean added TTFB {statistics.mean(add_first) * ms:.2f} ms; ratio via/direct "
                f"TTFB p50 {_pct(p_first, 0.5) / _pct(d_first, 0.5):.2f}"
            )
    finally:
        for p in (proxy, standin):
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(60)
            except subprocess.TimeoutExpired:
                p.kill()
    recs = list((work / "rec").glob("*.cpsession"))
    print(f"recorded {len(recs)} session file(s) in {work / 'rec'}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--delay", type=float, default=0.002, help="seconds between the stand-in's SSE events")
    ap.add_argument("--history-kb", type=int, default=0, help="extra history per request, in KB")
    ap.add_argument("--gap", type=float, default=0.0, help="seconds between rounds (an agent's tool time)")
    ap.add_argument("--forward-only", action="store_true", help="the proxy records nothing (its baseline)")
    args = ap.parse_args()
    run(args.rounds, args.delay, args.history_kb, args.gap, args.forward_only)


if __name__ == "__main__":
    main()
