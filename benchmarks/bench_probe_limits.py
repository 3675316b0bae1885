"""What hostile numbers of clients cost an agent: descriptors and memory (issue 10, items 1 and 2).

    .venv/bin/python benchmarks/bench_probe_limits.py [--nofile 1024] [--connections 1100]
                                                      [--events 500000] [--clients 200]

1. Descriptors: a real agent (Pipeline with serve=True and a binder, so next_request() runs
   asyncio.run, which needs descriptors for its selector) under `ulimit -n NOFILE` while this script
   opens CONNECTIONS same-uid connections and holds them. Reported: turns the agent completed, how
   many clients it served, how many connections were refused and why, and its open descriptors.
2. Memory: an agent whose journal holds EVENTS events, with CLIENTS idle clients attached (they
   connect and never read; the client cap is raised to CLIENTS for this). Reported: RSS before and
   with the clients, traced Python memory per client, and how long until a closed client's memory is
   released (the agent notices at once; the figure is its own measurement).
"""

from __future__ import annotations

import argparse
import os
import selectors
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

DESCRIPTOR_AGENT = textwrap.dedent(
    """
    import os, resource, sys
    limit = int(sys.argv[1])
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard))
    from engine.pipeline import Pipeline
    pipe = Pipeline("claude-sonnet-4", "anthropic", 16000, serve=True)
    pipe.identity("You are a careful coding agent.")
    async def ctx(budget):
        return "context"
    pipe.add_source("ctx", "context", binder=ctx)
    pipe.user("go")
    print("READY", pipe.probe.path, flush=True)
    t = 0
    for line in sys.stdin:
        if line.strip() == "exit":
            break
        try:
            req = pipe.next_request()
            pipe.record_usage({"input_tokens": 100, "output_tokens": 5})
            calls = pipe.assistant("x", [{"id": f"c{t}", "name": "bash", "arguments": "{}"}])
            pipe.tool_result(calls[0].id, "ok")
            t += 1
            print("OK", t, pipe.probe.client_count, len(os.listdir("/proc/self/fd")), flush=True)
        except Exception as exc:
            print("FAIL", type(exc).__name__, exc, flush=True)
    pipe.close()
    """
)

MEMORY_AGENT = textwrap.dedent(
    """
    import gc, resource, sys, time, tracemalloc
    from engine.pipeline import Pipeline
    n_events, n_clients = int(sys.argv[1]), int(sys.argv[2])
    pipe = Pipeline("claude-sonnet-4", "anthropic", 16000, serve=True)
    for i in range(n_events):
        pipe.journal.append({"k": "blob", "h": f"{i:064x}", "data": "x" * 100})
    gc.collect()
    def rss():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * 4096
    tracemalloc.start()
    base, rss0 = tracemalloc.get_traced_memory()[0], rss()
    print("READY", pipe.probe.path, flush=True)
    while pipe.probe.client_count < n_clients:
        time.sleep(0.01)
    last, still = None, 0
    while still < 10:
        time.sleep(0.05)
        now = [(s.sent_events, s.buffered_bytes) for s in pipe.probe.stats()]
        still = still + 1 if now == last else 0
        last = now
    for i in range(5000):  # live events while they are attached
        pipe.journal.append({"k": "msg", "i": i})
    time.sleep(0.5)
    gc.collect()
    traced, rss1 = tracemalloc.get_traced_memory()[0] - base, rss()
    print("ATTACHED", traced, rss0, rss1, flush=True)
    sys.stdin.readline()
    t0 = time.monotonic()
    while pipe.probe.client_count:
        time.sleep(0.001)
    freed = time.monotonic() - t0
    gc.collect()
    print("CLOSED", freed, tracemalloc.get_traced_memory()[0] - base, flush=True)
    pipe.close()
    """
)


def env_for(rt: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "XDG_RUNTIME_DIR": str(rt), **(extra or {})}
    env.pop("CONTEXTPIPE_SERVE", None)
    return env


def descriptors(nofile: int, connections: int) -> None:
    rt = Path(tempfile.mkdtemp(prefix="cpl-", dir="/tmp"))
    p = subprocess.Popen(
        [sys.executable, "-c", DESCRIPTOR_AGENT, str(nofile)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env_for(rt),
    )
    assert p.stdin is not None and p.stdout is not None
    path = p.stdout.readline().split()[1]
    sel = selectors.DefaultSelector()
    held: list[socket.socket] = []
    refused: dict[str, int] = {}
    not_connected = 0
    turns_ok = turns_failed = 0
    served = fds = 0
    t0 = time.monotonic()
    while len(held) + not_connected < connections or time.monotonic() - t0 < 3.0:
        for _ in range(min(100, connections - len(held) - not_connected)):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.setblocking(False)
            try:
                s.connect(path)
            except OSError:
                s.close()
                not_connected += 1  # the backlog was full
                continue
            held.append(s)
            sel.register(s, selectors.EVENT_READ)
        p.stdin.write("turn\n")
        p.stdin.flush()
        reply = p.stdout.readline().split()
        if reply and reply[0] == "OK":
            turns_ok += 1
            served, fds = int(reply[2]), int(reply[3])
        else:
            turns_failed += 1
        for key, _ in sel.select(0.05):
            s = key.fileobj
            assert isinstance(s, socket.socket)
            try:
                data = s.recv(65536)
            except OSError:
                data = b""
            sel.unregister(s)
            for code in ("too_many_clients", "too_many_open_files"):
                if code.encode() in data:
                    refused[code] = refused.get(code, 0) + 1
    p.stdin.write("exit\n")
    p.stdin.flush()
    p.wait(60)
    for s in held:
        s.close()
    shutil.rmtree(rt, ignore_errors=True)
    print(
        f"descriptors: ulimit -n {nofile}, {connections} connection attempts ({len(held)} connected, "
        f"{not_connected} found the backlog full): agent turns ok {turns_ok}, failed {turns_failed}; "
        f"clients served {served}; refused {refused}; agent's open descriptors {fds}; exit {p.returncode}"
    )


def memory(events: int, clients: int) -> None:
    rt = Path(tempfile.mkdtemp(prefix="cpl-", dir="/tmp"))
    p = subprocess.Popen(
        [sys.executable, "-c", MEMORY_AGENT, str(events), str(clients)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env_for(rt, {"CONTEXTPIPE_PROBE_MAX_CLIENTS": str(clients)}),
    )
    assert p.stdin is not None and p.stdout is not None
    path = p.stdout.readline().split()[1]
    socks = []
    while len(socks) < clients:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(path)
        except BlockingIOError:  # the backlog is full: the agent admits a few clients per second
            s.close()
            time.sleep(0.05)
            continue
        socks.append(s)
    _, traced, rss0, rss1 = p.stdout.readline().split()
    for s in socks:
        s.close()
    p.stdin.write("go\n")
    p.stdin.flush()
    _, freed, left = p.stdout.readline().split()
    p.wait(60)
    shutil.rmtree(rt, ignore_errors=True)
    print(
        f"memory: journal of {events} events, {clients} idle clients: RSS {int(rss0) / 2**20:.0f} MB -> "
        f"{int(rss1) / 2**20:.0f} MB; traced per client {int(traced) / clients / 1024:.0f} KiB "
        f"(HIGH_WATER 256 KiB); all {clients} released {float(freed) * 1e3:.0f} ms after the sockets "
        f"closed, {int(left) / 1024:.0f} KiB still traced"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nofile", type=int, default=1024)
    ap.add_argument("--connections", type=int, default=1100)
    ap.add_argument("--events", type=int, default=500_000)
    ap.add_argument("--clients", type=int, default=200)
    args = ap.parse_args()
    descriptors(args.nofile, args.connections)
    memory(args.events, args.clients)


if __name__ == "__main__":
    main()
