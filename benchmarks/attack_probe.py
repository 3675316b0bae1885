"""Hostile same-uid clients against an agent's probe socket (issue 10: the agent must never be hurt).

    .venv/bin/python benchmarks/attack_probe.py SOCKET --mode ping|trickle|churn|readers|hold|mix
                                                [--clients N] [--seconds S]

Modes (each runs as fast as it can, reconnecting whenever the agent cuts it off):
  ping     N connections (default 4) that send ping frames without reading the pongs
  trickle  N connections (default 50) that each send one byte at a time
  churn    connect and close again, N at a time (default 8), reading nothing
  readers  N connections (default 200) that read and discard everything
  hold     N connections (default 300) that connect and then do nothing (descriptor exhaustion)
  mix      all of the above at once, one process each
  spin     no connection at all, one process burning CPU: the control for what any busy process
           beside the agent costs it on this machine

Prints READY once the first connections are made, then runs until --seconds pass (default: until
killed), then prints a summary line. Used by benchmarks/bench_probe.py --attack and tests/test_probe_hardening.py.
"""

from __future__ import annotations

import argparse
import os
import selectors
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from engine.recording.frames import encode_frame  # noqa: E402

PING = encode_frame({"k": "ping"})
DEFAULTS = {"ping": 4, "trickle": 50, "churn": 8, "readers": 200, "hold": 300, "spin": 0}


def connect(path: str, blocking: bool = False) -> socket.socket | None:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.setblocking(True)
        s.settimeout(1.0)
        s.connect(path)
        s.setblocking(blocking)
        return s
    except OSError:
        s.close()
        return None


class Stats:
    def __init__(self) -> None:
        self.connects = 0
        self.failed = 0
        self.sent = 0
        self.received = 0
        self.cut = 0


def run(path: str, mode: str, n: int, seconds: float | None) -> Stats:
    st = Stats()
    sel = selectors.DefaultSelector()
    socks: set[socket.socket] = set()

    def open_one() -> None:
        s = connect(path)
        if s is None:
            st.failed += 1
            return
        st.connects += 1
        socks.add(s)
        events = selectors.EVENT_READ
        if mode in ("ping", "trickle"):
            events |= selectors.EVENT_WRITE
        sel.register(s, events)

    def close_one(s: socket.socket) -> None:
        socks.discard(s)
        try:
            sel.unregister(s)
        except (KeyError, ValueError):
            pass
        s.close()

    if mode == "spin":
        print("READY", flush=True)
        end = None if seconds is None else time.monotonic() + seconds
        while end is None or time.monotonic() < end:
            sum(i * i for i in range(10_000))
        return st

    if mode == "churn":
        print("READY", flush=True)
        end = None if seconds is None else time.monotonic() + seconds
        while end is None or time.monotonic() < end:
            batch = [connect(path) for _ in range(n)]
            for s in batch:
                if s is None:
                    st.failed += 1
                else:
                    st.connects += 1
                    s.close()
        return st

    for _ in range(n):
        open_one()
    print("READY", flush=True)
    end = None if seconds is None else time.monotonic() + seconds
    burst = PING * 512
    byte_i = 0
    while end is None or time.monotonic() < end:
        while len(socks) < n:  # reconnect what the agent cut off
            before = len(socks)
            open_one()
            if len(socks) == before:
                time.sleep(0.01)
                break
        for key, mask in sel.select(0.05):
            s = key.fileobj
            assert isinstance(s, socket.socket)
            if mask & selectors.EVENT_READ:
                if mode == "hold":
                    # Hold the connection; notice only when the agent closes it.
                    try:
                        data = s.recv(65536, socket.MSG_PEEK)
                    except OSError:
                        data = b""
                    if not data:
                        st.cut += 1
                        close_one(s)
                    else:
                        sel.unregister(s)  # stop polling it: it stays open, unread
                    continue
                try:
                    data = s.recv(1 << 20)
                except OSError:
                    data = b""
                if not data:
                    st.cut += 1
                    close_one(s)
                    continue
                st.received += len(data)
            if mask & selectors.EVENT_WRITE and s in socks:
                try:
                    if mode == "ping":
                        st.sent += s.send(burst)
                    else:
                        st.sent += s.send(bytes([PING[byte_i % len(PING)]]))
                        byte_i += 1
                except BlockingIOError:
                    pass
                except OSError:
                    st.cut += 1
                    close_one(s)
    return st


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("socket", help="the agent's probe socket (<runtime dir>/<pid>.sock)")
    ap.add_argument("--mode", choices=[*DEFAULTS, "mix"], required=True)
    ap.add_argument("--clients", type=int, default=None)
    ap.add_argument("--seconds", type=float, default=None)
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    if args.mode == "mix":
        procs = [
            subprocess.Popen(
                [sys.executable, __file__, args.socket, "--mode", m]
                + ([] if args.seconds is None else ["--seconds", str(args.seconds)]),
                stdout=subprocess.PIPE,
                text=True,
            )
            for m in DEFAULTS
            if m not in ("hold", "spin")
        ]
        try:
            for p in procs:
                assert p.stdout is not None
                p.stdout.readline()
            print("READY", flush=True)
            for p in procs:
                p.wait()
        finally:
            for p in procs:
                p.terminate()
                p.wait()
        return
    st = run(args.socket, args.mode, args.clients or DEFAULTS[args.mode], args.seconds)
    print(
        f"{args.mode}: connects {st.connects} failed {st.failed} sent {st.sent} B received {st.received} B "
        f"cut off {st.cut} (pid {os.getpid()})",
        flush=True,
    )


if __name__ == "__main__":
    main()
