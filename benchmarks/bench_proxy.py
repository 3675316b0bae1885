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

`--fresh` measures what the keep-alive rounds never meet: a one-shot client, a new process on a new
connection, making one call the upstream answers at once (non-streamed), as a script, a cached or local
model's client, or an agent whose SDK does not pool connections does. The proxy looks up which process made
a connection's first call (engine/capture/proxy/peer.py) and the answer's last bytes wait for that look-up
(forward._peer_known): what this adds is the difference to the same call straight to the upstream. Each
round runs the client subprocess once per target (direct, the proxy, and with `--ab DIR` a second proxy run
from the tree DIR), in rotating order; the child times its own call (connect to last byte) and prints it.

`--lookup` times the look-up itself (peer.peer_process: the client socket's inode, then the process holding
it), in a process of its own for this tree and, with `--ab DIR`, for DIR, alternating: a client process
that connects to a listening socket and waits, looked up as the proxy looks up a connection's first call.
Three kinds of client: `new` (a process started for the call, each round), `known` (one process, a new
connection each round: an agent whose SDK does not pool), `unknown` (the same, but not remembered as a
client: the first call of an agent that was running before).

Run:  .venv/bin/python benchmarks/bench_proxy.py [--rounds 200] [--delay 0.002] [--history-kb 200] [--gap 0.02]
      [--forward-only]
      .venv/bin/python benchmarks/bench_proxy.py --fresh [--rounds 40] [--ab /tmp/start47]
      .venv/bin/python benchmarks/bench_proxy.py --lookup [--rounds 100] [--ab /tmp/start47]
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


def _start_proxy(
    upstream: str, work: Path, forward_only: bool, tree: Path = REPO
) -> tuple[subprocess.Popen[bytes], int]:
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
        env={**ENV, "PYTHONPATH": str(tree), "XDG_RUNTIME_DIR": str(work)},
        cwd=tree,
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


# The one-shot client of --fresh: times one non-streamed call on a new connection, closes, prints seconds.
FRESH_CLIENT = """
import http.client, json, sys, time
body = json.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": "one-shot " + sys.argv[3]}]})
t0 = time.perf_counter()
conn = http.client.HTTPConnection(sys.argv[1], int(sys.argv[2]), timeout=60)
conn.request("POST", "/v1/chat/completions", body, {"content-type": "application/json",
             "authorization": "Bearer sk-bench", "connection": "close"})
resp = conn.getresponse()
data = resp.read()
t1 = time.perf_counter()
conn.close()
assert resp.status == 200, (resp.status, data[:200])
print(t1 - t0)
"""


def fresh(rounds: int, ab: Path | None) -> None:
    standin, sport = _start_standin(0.0)
    work = Path(tempfile.mkdtemp(prefix="bench-proxy-"))
    procs = [standin]
    targets: list[tuple[str, int, int | None]] = [("direct", sport, None)]
    try:
        for name, tree in (("proxy", REPO), *((("base", ab),) if ab is not None else ())):
            (work / name).mkdir()
            p, port = _start_proxy(f"http://127.0.0.1:{sport}", work / name, False, tree)
            procs.append(p)
            targets.append((name, port, p.pid))
        print(
            f"--fresh: {rounds} rounds, one-shot client processes, a non-streamed call answered at once; "
            f"targets {', '.join(t[0] for t in targets)}" + (f" (base: {ab})" if ab else "")
        )
        times: dict[str, list[float]] = {t[0]: [] for t in targets}
        cpu0 = {t[0]: _cpu(t[2]) for t in targets if t[2] is not None}
        for r in range(-3, rounds):  # three warm-up rounds
            order = targets[r % len(targets) :] + targets[: r % len(targets)]
            for name, port, _ in order:
                out = subprocess.run(
                    [sys.executable, "-c", FRESH_CLIENT, "127.0.0.1", str(port), f"{name}-{r}"],
                    capture_output=True,
                    text=True,
                    timeout=120,
                    env=ENV,
                )
                if out.returncode != 0:
                    raise SystemExit(f"the client failed against {name}: {out.stderr[-400:]}")
                if r >= 0:
                    times[name].append(float(out.stdout))
            if r == -1:
                cpu0 = {t[0]: _cpu(t[2]) for t in targets if t[2] is not None}
        ms = 1000.0
        d = times["direct"]
        print(
            f"{'target':<8}{'call p50/p95 ms':>18}{'added p50/p95 ms':>19}{'mean added':>12}{'proxy CPU/call':>16}"
        )
        for name, _, pid in targets:
            t = times[name]
            added = [a - b for a, b in zip(t, d, strict=True)]
            cpu = f"{(_cpu(pid) - cpu0[name]) / rounds * ms:>13.2f} ms" if pid is not None else ""
            print(
                f"{name:<8}{_pct(t, 0.5) * ms:>9.2f}/{_pct(t, 0.95) * ms:<8.2f}"
                f"{_pct(added, 0.5) * ms:>10.2f}/{_pct(added, 0.95) * ms:<8.2f}"
                f"{statistics.mean(added) * ms:>12.2f}{cpu}"
            )
    finally:
        for p in reversed(procs):
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(60)
            except subprocess.TimeoutExpired:
                p.kill()


# The --lookup child: as the proxy, looks up clients' connections; prints "kind wall_ms cpu_ms" a look-up.
LOOKUP = """
import os, socket, subprocess, sys, time
from engine.capture.proxy import peer
rounds = int(sys.argv[1])
srv = socket.socket()
srv.bind(("127.0.0.1", 0))
srv.listen(64)
port = srv.getsockname()[1]
CLIENT = (
    "import socket, sys\\n"
    "for line in sys.stdin:\\n"
    "    s = socket.create_connection(('127.0.0.1', %d)); print('ok', flush=True)\\n" % port
)
if hasattr(peer, "warm"):  # what this tree's proxy does when it starts listening
    peer.warm()
    peer._pool().submit(lambda: None).result()

def timed(kind, forget):
    conn, addr = srv.accept()
    if forget:
        peer._RECENT.clear()
    t0, c0 = time.perf_counter(), time.thread_time()
    found = peer.peer_process(addr[:2], conn.getsockname()[:2])
    wall, cpu = time.perf_counter() - t0, time.thread_time() - c0
    assert found is not None, kind
    print(kind, wall * 1e3, cpu * 1e3, flush=True)
    return conn, found.pid

held = []
one = subprocess.Popen([sys.executable, "-c", CLIENT], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
for r in range(rounds):
    child = subprocess.Popen([sys.executable, "-c", CLIENT], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    child.stdin.write("go\\n"); child.stdin.flush(); child.stdout.readline()
    conn, pid = timed("new", False)
    assert pid == child.pid
    child.kill(); child.wait(); conn.close()
    for kind in ("known", "unknown"):
        one.stdin.write("go\\n"); one.stdin.flush(); one.stdout.readline()
        conn, pid = timed(kind, kind == "unknown")
        assert pid == one.pid
        held.append(conn)
one.kill()
"""


def lookup(rounds: int, ab: Path | None) -> None:
    trees = [("this", REPO), *((("base", ab),) if ab is not None else ())]
    got: dict[tuple[str, str], list[tuple[float, float]]] = {}
    per_process = 10
    for start in range(0, rounds, per_process):
        for name, tree in trees if (start // per_process) % 2 == 0 else trees[::-1]:
            out = subprocess.run(
                [sys.executable, "-c", LOOKUP, str(min(per_process, rounds - start))],
                capture_output=True,
                text=True,
                timeout=300,
                env={**ENV, "PYTHONPATH": str(tree)},
                cwd=tree,
            )
            if out.returncode != 0:
                raise SystemExit(f"the look-up child failed in {tree}: {out.stderr[-600:]}")
            for line in out.stdout.splitlines():
                kind, wall, cpu = line.split()
                got.setdefault((name, kind), []).append((float(wall), float(cpu)))
    print(
        f"--lookup: {rounds} look-ups of each kind a tree, processes alternating"
        + (f" (base: {ab})" if ab else "")
    )
    print(f"{'tree':<6}{'client':<9}{'wall p50/p95 ms':>18}{'CPU p50/p95 ms':>18}")
    for kind in ("new", "known", "unknown"):
        for name, _ in trees:
            xs = got[(name, kind)]
            w, c = [x[0] for x in xs], [x[1] for x in xs]
            print(
                f"{name:<6}{kind:<9}{_pct(w, 0.5):>9.3f}/{_pct(w, 0.95):<8.3f}{_pct(c, 0.5):>9.3f}/{_pct(c, 0.95):<8.3f}"
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--delay", type=float, default=0.002, help="seconds between the stand-in's SSE events")
    ap.add_argument("--history-kb", type=int, default=0, help="extra history per request, in KB")
    ap.add_argument("--gap", type=float, default=0.0, help="seconds between rounds (an agent's tool time)")
    ap.add_argument("--forward-only", action="store_true", help="the proxy records nothing (its baseline)")
    ap.add_argument(
        "--fresh", action="store_true", help="one-shot client processes, a new connection each call"
    )
    ap.add_argument("--lookup", action="store_true", help="time the look-up of a connection's client itself")
    ap.add_argument("--ab", type=Path, help="with --fresh or --lookup: the baseline tree, alternating")
    args = ap.parse_args()
    if args.lookup:
        lookup(args.rounds, args.ab)
        return
    if args.fresh:
        fresh(args.rounds, args.ab)
        return
    run(args.rounds, args.delay, args.history_kb, args.gap, args.forward_only)


if __name__ == "__main__":
    main()
