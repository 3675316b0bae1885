"""What waking another thread costs, cold, on this machine (issue 15.4: engine.probe.handoff).

A paced agent's thread wakes the probe's thread once a turn, right after its model call, when nothing
of it is in cache. For each primitive, a thread blocks on it; the main thread sleeps --sleep seconds,
then wakes it, then sleeps 2 ms (where it releases the GIL, and so pays the hand-off to the woken
thread). Printed per primitive, medians over --wakes: the waker's thread clock over the wake and the
2 ms sleep, less the same with no wake (`none`, measured first and last, side by side in this process),
and the woken thread's clock per wake (from its wait's return to its next wait). Thread CPU beside the
wall time of the wake call alone.

    .venv/bin/python benchmarks/bench_wakeup.py [--wakes 16] [--sleep 0.5]
"""

from __future__ import annotations

import argparse
import os
import selectors
import socket
import statistics
import threading
import time
from collections.abc import Callable

Setup = Callable[[], tuple[Callable[[], object], Callable[[], object], Callable[[], object]]]


def _socketpair() -> tuple[Callable[[], object], Callable[[], object], Callable[[], object]]:
    r, w = socket.socketpair()
    r.setblocking(False)
    w.setblocking(False)
    sel = selectors.DefaultSelector()
    sel.register(r, selectors.EVENT_READ)

    def wait() -> None:
        sel.select()
        try:
            r.recv(64)
        except BlockingIOError:
            pass

    return (lambda: w.send(b"x")), wait, (lambda: (sel.close(), r.close(), w.close()))


def _pipe() -> tuple[Callable[[], object], Callable[[], object], Callable[[], object]]:
    r, w = os.pipe()
    os.set_blocking(r, False)
    sel = selectors.DefaultSelector()
    sel.register(r, selectors.EVENT_READ)

    def wait() -> None:
        sel.select()
        try:
            os.read(r, 64)
        except BlockingIOError:
            pass

    return (lambda: os.write(w, b"x")), wait, (lambda: (sel.close(), os.close(r), os.close(w)))


def _eventfd() -> tuple[Callable[[], object], Callable[[], object], Callable[[], object]]:
    fd = os.eventfd(0, os.EFD_NONBLOCK)
    sel = selectors.DefaultSelector()
    sel.register(fd, selectors.EVENT_READ)

    def wait() -> None:
        sel.select()
        try:
            os.eventfd_read(fd)
        except BlockingIOError:
            pass

    return (lambda: os.eventfd_write(fd, 1)), wait, (lambda: (sel.close(), os.close(fd)))


def _lock() -> tuple[Callable[[], object], Callable[[], object], Callable[[], object]]:
    lock = threading.Lock()
    lock.acquire()
    return lock.release, lock.acquire, (lambda: None)


def _condition() -> tuple[Callable[[], object], Callable[[], object], Callable[[], object]]:
    cond = threading.Condition()
    flag = [False]

    def wake() -> None:
        with cond:
            flag[0] = True
            cond.notify()

    def wait() -> None:
        with cond:
            while not flag[0]:
                cond.wait()
            flag[0] = False

    return wake, wait, (lambda: None)


PRIMITIVES: dict[str, Setup] = {
    "socketpair": _socketpair,
    "pipe": _pipe,
    "eventfd": _eventfd,
    "condition": _condition,
    "lock": _lock,
}


def run(name: str, setup: Setup, wakes: int, sleep: float) -> tuple[float, float, float]:
    """(waker's thread clock over wake + 2 ms sleep, woken thread's clock a wake, wall of the wake), us."""
    clock = time.thread_time_ns
    wake, wait, close = setup()
    woken: list[int] = []
    stop = [False]
    ready = threading.Event()

    def waiter() -> None:
        ready.set()
        while not stop[0]:
            t0 = clock()
            wait()
            woken.append(clock() - t0)

    thread = threading.Thread(target=waiter, daemon=True)
    thread.start()
    ready.wait()
    waker: list[int] = []
    wall: list[int] = []
    for _ in range(wakes):
        time.sleep(sleep)
        t0, w0 = clock(), time.perf_counter_ns()
        if name != "none":
            wake()
        wall.append(time.perf_counter_ns() - w0)
        time.sleep(0.002)
        waker.append(clock() - t0)
    stop[0] = True
    try:
        wake()
    except RuntimeError:
        pass  # (a lock released already)
    thread.join(2)
    close()
    med = statistics.median
    return (
        med(waker) / 1e3,
        (med(woken[:-1]) / 1e3 if name != "none" and len(woken) > 1 else 0.0),
        med(wall) / 1e3,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--wakes", type=int, default=16, help="wakes a primitive")
    ap.add_argument("--sleep", type=float, default=0.5, help="seconds before each wake (how cold)")
    args = ap.parse_args()
    print(f"load {os.getloadavg()[0]:.2f}")
    base0 = run("none", _lock, args.wakes, args.sleep)[0]
    rows = {name: run(name, setup, args.wakes, args.sleep) for name, setup in PRIMITIVES.items()}
    base1 = run("none", _lock, args.wakes, args.sleep)[0]
    base = (base0 + base1) / 2
    print(f"no wake: waker {base0:.1f} / {base1:.1f} us (thread clock over the 2 ms sleep, first and last)")
    for name, (waker, woken, wall) in rows.items():
        print(
            f"{name:11s} waker {waker - base:+6.1f} us (thread CPU, less no wake) | woken thread {woken:6.1f} us "
            f"a wake | wake call {wall:6.1f} us wall | both threads {waker - base + woken:6.1f} us"
        )
    print(f"load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
