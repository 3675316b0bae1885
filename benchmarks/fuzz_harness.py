"""The fork runner and byte mutators the fuzz drivers (benchmarks/fuzz_*.py) share. Coverage-free: a seeded
mutation loop over valid inputs, each case run in a forked child with a memory limit (RLIMIT_AS) and a
time limit (alarm), so a hang, a runaway allocation or a crash is reported as such instead of taking the
driver down. The parent imports the engine once; a fork costs ~2 ms, not a ~0.3 s interpreter start.

Not a test (it runs for minutes); the regressions it found are tests. Usage: see each driver's docstring.
"""

from __future__ import annotations

import argparse
import copy
import os
import random
import resource
import signal
import struct
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

OK, RAISED, TIMEOUT, MEMORY, CRASH = "ok", "raised", "timeout", "memory", "crash"

INTERESTING_INTS = [0, 1, -1, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**63 - 1, -(2**63), 2**64 - 1]


@dataclass
class Outcome:
    status: str
    detail: str = ""
    seconds: float = 0.0


@dataclass
class Tally:
    cases: int = 0
    by_status: dict[str, int] = field(default_factory=dict)
    findings: dict[str, tuple[str, bytes | str]] = field(default_factory=dict)  # signature -> (detail, input)

    def add(self, out: Outcome, case: bytes | str) -> bool:
        self.cases += 1
        self.by_status[out.status] = self.by_status.get(out.status, 0) + 1
        if out.status == OK:
            return False
        sig = out.status + ":" + _signature(out.detail)
        if sig in self.findings:
            return False
        self.findings[sig] = (out.detail, case)
        return True


def _signature(detail: str) -> str:
    """The last traceback frame's file:line and the exception type: one finding, however many inputs hit it."""
    lines = [ln.strip() for ln in detail.strip().splitlines() if ln.strip()]
    where = [ln for ln in lines if ln.startswith('File "')]
    return (where[-1] if where else "") + " | " + (lines[-1].split(":")[0] if lines else "")


def _vm_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def run_forked(fn: Callable[[], None], *, timeout: float = 10.0, extra_mem: int = 1 << 30) -> Outcome:
    """Run fn() in a forked child: OK when it returns, RAISED with the traceback when it raises,
    TIMEOUT past `timeout` seconds, MEMORY when it allocates more than `extra_mem` over the parent."""
    limit = _vm_bytes() + extra_mem
    r, w = os.pipe()
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:  # the child
        os.close(r)
        code = 0
        msg = b""
        try:
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
            signal.signal(signal.SIGALRM, signal.SIG_DFL)
            signal.setitimer(signal.ITIMER_REAL, timeout)
            fn()
        except MemoryError:
            code, msg = 4, traceback.format_exc().encode()
        except BaseException:
            code, msg = 3, traceback.format_exc().encode()
        try:
            os.write(w, msg[-20000:])
        finally:
            os._exit(code)
    os.close(w)
    chunks = []
    while True:
        b = os.read(r, 65536)
        if not b:
            break
        chunks.append(b)
    os.close(r)
    _, status = os.waitpid(pid, 0)
    dt = time.perf_counter() - t0
    detail = b"".join(chunks).decode(errors="replace")
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        return Outcome(TIMEOUT if sig == signal.SIGALRM else CRASH, f"signal {sig}", dt)
    code = os.WEXITSTATUS(status)
    if code == 0:
        return Outcome(OK, "", dt)
    if code == 4 or "MemoryError" in detail:
        return Outcome(MEMORY, detail, dt)
    return Outcome(RAISED, detail, dt)


# -- byte mutators ---------------------------------------------------------------------------------------


def mutate(data: bytes, rng: random.Random, others: Sequence[bytes] = ()) -> bytes:
    """One to three random edits of `data`: flips, interesting bytes and ints, inserts, deletes, truncation,
    duplication, a splice with another input."""
    b = bytearray(data)
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        op = rng.randrange(9)
        n = len(b)
        if n == 0:
            b += rng.randbytes(rng.randrange(1, 16))
            continue
        i = rng.randrange(n)
        if op == 0:
            b[i] ^= 1 << rng.randrange(8)
        elif op == 1:
            b[i] = rng.choice(
                (0, 0xFF, 0x7F, 0x80, 0xC0, 0xC1, 0xDC, 0xDD, 0xDE, 0xDF, 0xC4, 0xC6, 0xD9, 0xDB)
            )
        elif op == 2:
            v = rng.choice(INTERESTING_INTS) & 0xFFFFFFFF
            b[i : i + 4] = struct.pack(rng.choice((">I", "<I")), v)
        elif op == 3:
            b[i:i] = rng.randbytes(rng.randrange(1, 32))
        elif op == 4:
            del b[i : i + rng.randrange(1, 64)]
        elif op == 5:
            del b[i:]
        elif op == 6:
            j = min(n, i + rng.randrange(1, 256))
            b[j:j] = b[i:j]
        elif op == 7 and others:
            o = rng.choice(others)
            if o:
                k = rng.randrange(len(o))
                b = b[:i] + bytearray(o[k:])
        else:
            b[i] = rng.randrange(256)
    return bytes(b)


def report(name: str, tally: Tally, seconds: float, out: Callable[[str], None] = print) -> None:
    out(
        f"{name}: {tally.cases} cases in {seconds:.0f} s: "
        + ", ".join(f"{k} {v}" for k, v in sorted(tally.by_status.items()))
    )
    for sig, (detail, case) in tally.findings.items():
        out(f"--- finding {sig}")
        out(detail.strip()[-3000:])
        out(f"    input ({len(case)} bytes): {case[:200]!r}")


def main_loop(
    name: str,
    cases: Callable[[random.Random], tuple[bytes | str, Callable[[], None]]],
    *,
    seed: int,
    count: int,
    budget: float,
    timeout: float = 10.0,
    save: str | None = None,
) -> Tally:
    """Generate up to `count` cases (or stop after `budget` seconds); print each new finding as it comes."""
    rng = random.Random(seed)
    tally = Tally()
    t0 = time.perf_counter()
    for _ in range(count):
        if time.perf_counter() - t0 > budget:
            break
        case, fn = cases(rng)
        out = run_forked(fn, timeout=timeout)
        if tally.add(out, case):
            print(
                f"[{name}] case {tally.cases}: NEW {out.status} {_signature(out.detail)}",
                file=sys.stderr,
                flush=True,
            )
            if save:
                os.makedirs(save, exist_ok=True)
                with open(os.path.join(save, f"{name}-{len(tally.findings)}.bin"), "wb") as f:
                    f.write(case if isinstance(case, bytes) else case.encode())
    report(name, tally, time.perf_counter() - t0)
    return tally


# -- value mutators (JSON and msgpack documents) -----------------------------------------------------------

HOSTILE_VALUES: list[Any] = [
    None,
    True,
    0,
    -1,
    2**31,
    2**63 - 1,
    -(2**63),
    1e308,
    float("nan"),
    float("inf"),
    "",
    "x" * 5000,
    "\x00",
    [],
    {},
    [None],
    {"k": None},
    [[[[[[[[[[]]]]]]]]]],
    {"": {"": {"": {}}}},
]


def value_paths(obj: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += value_paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += value_paths(v, (*prefix, i))
    return out


def deep(depth: int) -> Any:
    v: Any = 0
    for _ in range(depth):
        v = [v]
    return v


def mutate_value(
    doc: Any, rng: random.Random, skip_keys: tuple[str, ...] = (), bytes_ok: bool = True
) -> None:
    """One edit in place somewhere inside `doc` (a dict or list): delete a key, set a hostile value
    (wrong type, interesting int, deep nesting), cut or poison a string, duplicate a list item."""
    paths = [p for p in value_paths(doc) if p and p[0] not in skip_keys] or [p for p in value_paths(doc) if p]
    if not paths:
        return
    p = rng.choice(paths)
    parent: Any = doc
    for key in p[:-1]:
        parent = parent[key]
    last = p[-1]
    op = rng.randrange(7)
    if op == 0 and isinstance(parent, dict):
        del parent[last]
    elif op == 1:
        parent[last] = rng.choice(INTERESTING_INTS)
    elif op == 2:
        parent[last] = deep(rng.choice((50, 200, 400)))
    elif op == 3 and isinstance(parent[last], str) and parent[last]:
        s = parent[last]
        parent[last] = s[: rng.randrange(len(s))] + rng.choice(("", "\x00", "\u202e", "{", "\n", s))
    elif op == 4 and isinstance(parent[last], list) and parent[last]:
        lst = parent[last]
        lst.insert(rng.randrange(len(lst) + 1), copy.deepcopy(rng.choice(lst)))
    elif op == 5 and isinstance(parent, list) and len(parent) > 1:
        del parent[last]
    else:
        v = copy.deepcopy(rng.choice(HOSTILE_VALUES))
        if not bytes_ok and isinstance(v, float) and v != v:
            v = None
        parent[last] = v


def arg_parser(doc: str | None, count: int) -> argparse.ArgumentParser:
    """The options every driver takes: how many cases, for how long at most, the seed, where findings go."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--count", type=int, default=count)
    ap.add_argument("--budget", type=float, default=600.0, help="stop after this many seconds")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--save", help="write each finding's input here")
    return ap
