"""Fuzz the probe's socket protocol as a hostile local client sends it (engine/probe: handshake, server,
client frames), against a real agent: a forked child runs a Pipeline serving its probe and takes paced
turns (a turn every --pace seconds, the same work each time) for the whole run; the parent connects
hostile clients one after another, each sending a random mix of

  * frames of every kind the probe reads (hello with each flag set to a random value of any type, ping,
    fetch by turns or by range, trace) and kinds it does not, with values of the wrong type, huge or
    negative ints, deep nesting;
  * those frames' bytes mutated (flips, a length of 0, 2**31, 2**32-1, truncation, garbage), sent whole,
    byte by byte, or in random pieces; a client that never reads, one that closes at once, one that
    stays open (up to --hold at a time);

and every --check cases an honest client attaches and must be sent its hello within 5 s.
A finding: the agent's turn raising, the probe's thread gone (its publish_errors counted, or no hello for
the honest client), the agent's turns slowed (median and p99 of the attacked phase against the quiet one
before it, the same process: the ratio is printed; CPU time beside wall time), the probe still counting
clients once every hostile one is gone.

    PYTHONPATH=. python benchmarks/fuzz_probe.py --count 3000 --seed 1
"""

from __future__ import annotations

import json
import os
import random
import resource
import socket
import statistics
import sys
import time
import traceback
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(REPO))

from fuzz_harness import HOSTILE_VALUES, INTERESTING_INTS, arg_parser, deep, mutate  # noqa: E402

from engine.recording.frames import HEADER_SIZE, decode_header, encode_frame  # noqa: E402

KINDS = ["hello", "hello", "hello", "ping", "fetch", "fetch", "trace", "nope", "", None, 5]
HELLO_FLAGS = ["protocol", "lean", "elide", "frames", "fold", "quiet", "ring", "ring_unchecked", "tail"]


def _value(rng: random.Random) -> Any:
    r = rng.random()
    if r < 0.3:
        return rng.choice((True, False, 1, 2))
    if r < 0.5:
        return rng.choice(INTERESTING_INTS)
    if r < 0.6:
        return deep(rng.choice((10, 100)))
    return rng.choice(HOSTILE_VALUES)


def hostile_frame(rng: random.Random) -> dict[str, Any]:
    kind = rng.choice(KINDS)
    f: dict[str, Any] = {"k": kind}
    if kind == "hello":
        for flag in rng.sample(HELLO_FLAGS, rng.randrange(len(HELLO_FLAGS) + 1)):
            f[flag] = rng.choice((True, True, 1, 2, 2.0)) if rng.random() < 0.6 else _value(rng)
    elif kind == "fetch":
        if rng.random() < 0.5:
            f["turns"] = [
                rng.choice((0, 1, 2, -1, 2**63 - 1, "x", None, 1.5)) for _ in range(rng.randrange(300))
            ]
        else:
            f["from"] = _value(rng) if rng.random() < 0.5 else rng.randrange(-5, 50)
            f["to"] = _value(rng) if rng.random() < 0.5 else rng.randrange(-5, 5000)
    elif kind == "trace":
        f["turn"] = _value(rng) if rng.random() < 0.7 else rng.randrange(0, 5)
    for _ in range(rng.randrange(3)):
        f[rng.choice(("x", "turns", "protocol", "k2"))] = _value(rng)
    return f


def _encode(frame: dict[str, Any]) -> bytes:
    try:
        return encode_frame(frame)
    except Exception:  # a value msgpack will not take (nesting past its limit): not a frame anyone can send
        return encode_frame({"k": "ping"})


def agent(wfd: int, stop_fd: int, pace: float) -> None:
    """The agent: paced turns until `stop_fd` is readable; reports its probe's path, then every turn's
    wall/CPU time and what its probe says."""
    from engine.pipeline import Pipeline

    pipe = Pipeline("claude-sonnet-4", "anthropic", 64_000, serve=True, max_output_tokens=1024)
    assert pipe.probe is not None
    pipe.identity("You are a careful coding agent.")
    pipe.add_tool("bash", "run a command", {"type": "object"})
    pipe.user("Fix the failing test.")
    os.write(wfd, f"{pipe.probe.path}\n".encode())
    times: list[tuple[float, float, float, int]] = []  # (start, wall, cpu, clients the probe counts)
    error = ""
    os.set_blocking(stop_fd, False)
    probe = pipe.probe
    t = 0
    try:
        while not _readable(stop_fd):
            t0, c0 = time.perf_counter(), time.thread_time()
            req = pipe.next_request()
            pipe.record_usage({"input_tokens": req.final_tokens, "output_tokens": 10})
            calls = pipe.assistant(f"step {t}", [{"id": f"c{t}", "name": "bash", "arguments": "{}"}])
            pipe.tool_result(calls[0].id, f"output of step {t}\n" + "word " * 40)
            times.append(
                (time.monotonic(), time.perf_counter() - t0, time.thread_time() - c0, probe.client_count)
            )
            t += 1
            time.sleep(pace)
    except BaseException as exc:
        error = f"{type(exc).__name__}: {exc}"
        traceback.print_exc()
    out = {
        "times": times,
        "error": error,
        "publish_errors": probe.publish_errors,
        "running": probe.running,
    }
    pipe.close()
    with os.fdopen(wfd, "w") as report:  # (a whole write: os.write may write part of a long line)
        report.write(json.dumps(out) + "\n")


def _readable(fd: int) -> bool:
    try:
        return bool(os.read(fd, 1))
    except BlockingIOError:
        return False


def honest_hello(path: str, timeout: float = 5.0) -> bool:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    try:
        s.connect(path)
        s.sendall(encode_frame({"k": "hello", "protocol": 1}))
        buf = b""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            chunk = s.recv(65536)
            if not chunk:
                return False
            buf += chunk
            if len(buf) >= HEADER_SIZE:
                n, crc = decode_header(buf[:HEADER_SIZE], 0, limit=1 << 30)
                if len(buf) >= HEADER_SIZE + n:
                    from engine.recording.frames import decode_payload

                    return decode_payload(buf[HEADER_SIZE : HEADER_SIZE + n], crc).get("k") == "hello"
        return False
    except OSError:
        return False
    finally:
        s.close()


def main() -> None:
    ap = arg_parser(__doc__, 3000)
    ap.add_argument("--quiet-seconds", type=float, default=5.0, help="the agent's turns before any attack")
    ap.add_argument("--pace", type=float, default=0.01)
    ap.add_argument("--hold", type=int, default=20, help="hostile connections left open at most")
    ap.add_argument("--check", type=int, default=100, help="an honest client every this many cases")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    r, w = os.pipe()
    stop_r, stop_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        os.close(stop_w)
        resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
        try:
            agent(w, stop_r, a.pace)
        finally:
            os._exit(0)
    os.close(w)
    os.close(stop_r)
    reader = os.fdopen(r)
    path = reader.readline().strip()
    time.sleep(a.quiet_seconds)
    attack_from = time.monotonic()
    held: list[socket.socket] = []
    failed_checks = 0
    cases = 0
    t0 = time.perf_counter()
    while cases < a.count and time.perf_counter() - t0 < a.budget:
        cases += 1
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.setblocking(True)
        s.settimeout(0.5)
        try:
            s.connect(path)
            data = b"".join(_encode(hostile_frame(rng)) for _ in range(rng.randrange(1, 6)))
            if rng.random() < 0.4:
                data = mutate(data, rng)
            how = rng.randrange(4)
            if how == 0:
                s.sendall(data)
            elif how == 1:
                for i in range(min(len(data), 200)):
                    s.send(data[i : i + 1])
            else:
                i = 0
                while i < len(data):
                    k = rng.randrange(1, 64)
                    s.send(data[i : i + k])
                    i += k
            if rng.random() < 0.5:
                try:
                    s.recv(rng.choice((1, 4096, 65536)))
                except OSError:
                    pass
        except OSError:
            pass
        if rng.random() < 0.2:
            held.append(s)
            if len(held) > a.hold:
                held.pop(0).close()
        else:
            s.close()
        if cases % a.check == 0 and not honest_hello(path):
            failed_checks += 1
            print(f"case {cases}: the honest client got no hello", file=sys.stderr, flush=True)
    attack_to = time.monotonic()
    for s in held:
        s.close()
    time.sleep(a.quiet_seconds)  # the turns after: every hostile client gone
    after_end = time.monotonic()
    tries = [honest_hello(path) for _ in range(3)]  # (each waits up to 5 s)
    honest_end = tries[0]
    os.write(stop_w, b"x")
    result = json.loads(reader.readline())
    os.waitpid(pid, 0)
    times = result["times"]
    quiet = [x for x in times if x[0] < attack_from]
    attacked = [x for x in times if attack_from <= x[0] <= attack_to]
    after = [x for x in times if attack_to + 1.0 < x[0] < after_end]

    def stats(rows: list[list[float]], i: int) -> tuple[float, float]:
        v = sorted(x[i] * 1e6 for x in rows)
        return statistics.median(v), v[int(0.99 * (len(v) - 1))]

    print(
        f"probe: {cases} hostile clients in {attack_to - attack_from:.0f} s; honest checks failed {failed_checks}, "
        f"honest client at the end {'got its hello' if honest_end else 'GOT NO HELLO'}"
    )
    print(
        f"agent: error {result['error'] or 'none'}; publish_errors {result['publish_errors']}; probe running "
        f"{result['running']}; clients counted {a.quiet_seconds:.0f} s after every hostile one left {after[-1][3]}"
    )
    for name, i in (("wall", 1), ("cpu", 2)):
        (qm, q99), (am, a99), (fm, f99) = stats(quiet, i), stats(attacked, i), stats(after, i)
        print(
            f"turn {name} us: quiet median {qm:.0f} p99 {q99:.0f} ({len(quiet)} turns); attacked median {am:.0f} "
            f"p99 {a99:.0f} ({len(attacked)}); after median {fm:.0f} p99 {f99:.0f} ({len(after)}); "
            f"attacked/quiet median {am / qm:.3f} p99 {a99 / q99:.3f}; after/quiet median {fm / qm:.3f}"
        )


if __name__ == "__main__":
    main()
