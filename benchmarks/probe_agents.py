"""bench_probe's shared set-up: the agents its modes time (a simulated turn, a real Pipeline's, a fresh
Pipeline a round), the readers and hostile subjects attached to them in their own processes, and the
clocks read around them."""

from __future__ import annotations

import argparse
import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from engine.probe.elide import ELIDED_KINDS  # noqa: E402
from engine.probe.server import ProbeServer  # noqa: E402
from engine.recording.frames import encode_frame  # noqa: E402

READER = """
import sys
from pathlib import Path
from engine.probe.client import ProbeClient
mode = sys.argv[3]
kw = {"poll": True} if sys.argv[4] == "poll" else {}  # (a base tree's client has no poll: it blocks)
if sys.argv[5] == "loud":  # as a client from before "quiet" (engine.probe.elide): every call's batch
    kw["quiet"] = False
elif sys.argv[5] == "socket":  # live frames on the socket, not in a shared-memory ring (engine.probe.ring)
    kw["ring"] = False
if len(sys.argv) > 6:  # a Pipeline that serves at <pid>.N.sock (--twin: two in one process)
    kw["session"] = int(sys.argv[6])
c = ProbeClient.connect(
    int(sys.argv[1]), timeout=10, runtime_dir=Path(sys.argv[2]), lean=mode in ("lean", "elide"), elide=mode == "elide",
    **kw
)
print("ATTACHED", flush=True)
n = 0
if sys.argv[5] == "mute":  # reads its snapshot, then nothing: the agent's side of a reader, without its reading
    import time
    until = time.monotonic() + 2.0
    while True:  # to an empty look after the ring's handing over (or 2 s): the snapshot is read
        ev = c.recv(0.05)
        if ev is None and (c.ring or c.disconnected or time.monotonic() > until):
            break
        n += ev is not None
    sys.stdin.readline()
    print(n, c.dropped, flush=True)
    c.close()
    sys.exit(0)
for ev in c.events():
    if ev.get("k") == "bench_end":
        break
    n += 1
print(n, c.dropped, flush=True)
c.close()
"""


def make_request(kb: int) -> dict[str, Any]:
    msgs: list[dict[str, str]] = []
    i = 0
    while sum(len(m["content"]) for m in msgs) < kb * 1024:
        msgs.append(
            {"role": "user" if i % 2 else "assistant", "content": f"message {i} " + "lorem ipsum " * 40}
        )
        i += 1
    return {
        "model": "claude-sonnet-4",
        "max_tokens": 4096,
        "system": "You are a coding agent.",
        "messages": msgs,
    }


def make_trace(turn: int) -> dict[str, Any]:
    sections = [
        {
            "id": f"s{j}",
            "name": f"Section {j}",
            "kind": "history",
            "scope": "session",
            "priority": "normal",
            "budget": 2000,
            "planned": 850,
            "tokens": 850,
            "form": "full",
            "omitted": 0,
            "sha256": "ab" * 32,
            "changed": False,
            "items": 3,
        }
        for j in range(12)
    ]
    return {
        "turn": turn,
        "model": "claude-sonnet-4",
        "provider": "anthropic",
        "pressure": {"raw": 0.71, "predictive": 0.83},
        "tier": "CompactHistory",
        "sections": sections,
        "actions": [{"step": "clear_tool_results", "detail": "cleared 3", "tokens_saved": 4100}],
        "skipped": [{"step": "spill", "reason": "gate spill is off", "tokens_saved": 12000}],
        "request_sha256": "cd" * 32,
    }


def simulated_turn(
    turn: int, request: dict[str, Any], publish: Callable[[dict[str, Any]], None], publishes: int
) -> None:
    body = json.dumps(request)  # the fixed CPU work of assembling/serializing a request
    for j in range(publishes - 2):
        publish({"k": "blob", "h": f"{turn:08x}{j:056x}", "data": body[j * 1000 : j * 1000 + 1000]})
    publish({"k": "request", "turn": turn, "sha256": "cd" * 32, "bytes": len(body)})
    publish({"k": "turn", "turn": turn, "trace": make_trace(turn)})


def run_block(step: Callable[[int], None], start: int, turns: int) -> tuple[list[float], float]:
    """Wall time of each turn, and this process's CPU time per turn (agent thread + probe I/O thread)."""
    times = []
    c0 = time.process_time()
    for t in range(start, start + turns):
        t0 = time.perf_counter()
        step(t)
        times.append(time.perf_counter() - t0)
    return times, (time.process_time() - c0) / turns


Agent = tuple[ProbeServer, Callable[[int], None], str, Callable[[], int]]


def simulated_agent(args: argparse.Namespace, rt: Path) -> Agent:
    request = make_request(args.work_kb)
    journal: list[dict[str, Any]] = [{"k": "blob", "h": "0" * 64, "data": "system prompt"}]
    server = ProbeServer(
        {"model": "bench", "provider": "none", "engine_version": "bench"},
        lambda: list(journal),
        runtime_dir=rt,
    )
    server.start()

    def publish(ev: dict[str, Any]) -> None:
        journal.append(ev)
        # A recording agent encodes each event for its file anyway and can hand the frame on.
        server.publish(ev, encode_frame(ev) if args.recording else None)

    def step(t: int) -> None:
        simulated_turn(t, request, publish, args.publishes)
        del journal[1:]  # keep the snapshot small: only the per-turn cost is being measured

    rec = " (recording agent: events pre-encoded)" if args.recording else ""
    title = f"simulated turn: json.dumps of a {args.work_kb} KB request + {args.publishes} publishes{rec}"
    return server, step, title, lambda: 0


def coding_agent(args: argparse.Namespace, rt: Path, record_name: str) -> tuple[Any, list[Path]]:
    """A Pipeline serving its probe from `rt`'s directory (recording to `record_name` there with
    --recording), set up as a coding agent asked about this repository's engine (identity, constraints,
    goal, three tools, the task), and the files its turns read (engine/*.py)."""
    from engine.pipeline import Pipeline

    # The Pipeline opens its probe in the default runtime directory; point that at our temporary one.
    os.environ["XDG_RUNTIME_DIR"] = str(rt.parent)
    record = str(rt.parent / record_name) if args.recording else None
    pipe = Pipeline(
        "claude-sonnet-4", "anthropic", args.window, serve=True, max_output_tokens=1024, record=record
    )
    assert pipe.probe is not None, "the probe did not start"
    pipe.identity("You are a careful coding agent. You read before you change anything.")
    pipe.constraints("Never modify files outside the repository. Never run network commands.")
    pipe.goal("Find out how the engine chooses its compaction tier and summarize the rules.")
    params = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
    for name in ("read_file", "list_dir", "grep"):
        pipe.add_tool(name, f"{name} in the repository", params)
    pipe.user("Please explain how the compaction tier is chosen, with references to the code.")
    return pipe, sorted((REPO / "engine").glob("*.py"))


def engine_agent(args: argparse.Namespace, rt: Path) -> Agent:
    """A real Pipeline turn: plan, bind, optimize, serialize, usage, an assistant tool call and its result."""
    pipe, sources = coding_agent(args, rt, "bench.cpsession")
    texts = [p.read_text()[:3000] for p in sources] or ["x" * 3000]

    def step(t: int) -> None:
        req = pipe.next_request()
        pipe.record_usage({"input_tokens": int(req.trace["final_tokens"]), "output_tokens": 80})
        path = str(sources[t % len(sources)].relative_to(REPO)) if sources else "x"
        calls = pipe.assistant(
            f"Reading {path}.",
            [{"id": f"c{t}", "name": "read_file", "arguments": json.dumps({"path": path})}],
        )
        pipe.tool_result(calls[0].id, f"turn {t}\n" + texts[t % len(texts)])

    rec = ", recording: events encoded once for the file and the probe" if args.recording else ""
    title = f"real engine turn (Pipeline, window {args.window}, ~3 KB tool result per turn{rec})"
    return pipe.probe, step, title, lambda: len(pipe.journal.events)


def wait_for(cond: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise TimeoutError("condition not reached")
        time.sleep(0.005)


def publish_cost(server: ProbeServer, n: int = 20_000) -> float:
    ev = {"k": "blob", "h": "0" * 64, "data": "x" * 1000}
    t0 = time.perf_counter()
    for _ in range(n):
        server.publish(ev)
    return (time.perf_counter() - t0) / n


def thread_cpu(server: ProbeServer) -> float:
    """CPU seconds used so far by the probe's I/O thread (its POSIX per-thread CPU clock)."""
    total = 0.0
    # With its hand-off thread (engine.probe.handoff), which sends a paced agent's turns: both are the probe's.
    for t in (server._thread, getattr(server, "_handoff_thread", None)):
        if t is None or t.ident is None or not t.is_alive():
            continue
        total += time.clock_gettime(time.pthread_getcpuclockid(t.ident))
    return total


def read_line(reader: subprocess.Popen[str], server: ProbeServer, timeout: float = 60.0) -> str:
    """A line from the reader, or a diagnosable failure instead of a silent hang."""
    assert reader.stdout is not None
    ready, _, _ = select.select([reader.stdout], [], [], timeout)
    if not ready:
        state = [
            (c.cursor, len(c.outbuf), c.want_write, c.skip_hold is not None, c.dropped_pending, c.snap_src is None)
            for c in server._clients.values()
        ]
        reader.kill()
        raise TimeoutError(
            f"reader silent for {timeout} s; server head={server._head} pending={len(server._pending)} "
            f"wake_pending={server._wake_pending} running={server.running} clients={state}"
        )
    return reader.stdout.readline().strip()


def attach_reader(
    server: ProbeServer,
    rt: Path,
    stream: str = "elide",
    wait: str | None = None,
    loud: bool = False,
    socket_only: bool = False,
    mute: bool = False,
) -> subprocess.Popen[str]:
    """A reading client in its own process, of the `stream` it asks for: `elide`, the elided lean stream
    as the inspector's live source reads it (engine.probe.elide: no request, usage, message, part or
    blob events; turns summarized but the newest of each send; it fetches nothing, like an inspector
    following the newest turn), `lean` (every event, turns summarized: the inspector before the elided
    stream) or `full` (every turn whole: the stream before the lean one). It waits for events as `wait`
    says (default --reader-wait): `poll`, on a timer of its own as the inspector does (engine.probe.poll),
    or `block`, in select() on the socket (every client before that). `loud`: an elided reader that
    does not ask to be spared the batches that only say where the journal has reached (as before
    `quiet`: engine.probe.elide). `socket_only`: a quiet reader that does not ask for the shared-memory
    ring (engine.probe.ring), so the agent sends its live frames on the socket (as before the ring).
    `mute`: a quiet ring reader that reads its snapshot and then nothing until it is stopped (its process
    asleep): what the agent pays for a reader, without the reader's own process running beside it."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    how = "mute" if mute else "loud" if loud else "socket" if socket_only else "quiet"
    argv = [str(os.getpid()), str(rt), stream, wait or READER_WAIT[0], how]
    if server.session is not None:  # a second Pipeline of this process serves at <pid>.N.sock (--twin)
        argv.append(str(server.session))
    reader = subprocess.Popen(
        [sys.executable, "-c", READER, *argv],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert reader.stdout is not None
    assert read_line(reader, server) == "ATTACHED"
    wait_for(lambda: server.client_count == 1)
    # The snapshot (the journal so far) is a one-off at attach time, not a per-turn cost: let it drain.
    wait_for(lambda: all(s.snapshot_pending == 0 and s.buffered_bytes == 0 for s in server.stats()), 120)
    return reader


def fresh_pipeline(
    args: argparse.Namespace, rt: Path, rnd: int
) -> tuple[ProbeServer, Callable[..., None], Any]:
    """A new Pipeline for one round (a 1-2 ms turn while its history is short)."""
    pipe, sources = coding_agent(args, rt, f"bench-{rnd}.cpsession")
    size = args.result_kb * 1024
    texts = [p.read_text()[:size] for p in sources] or ["x" * size]
    untraced = getattr(args, "untraced", False)

    def step(t: int, content: int | None = None, model_wait: float = 0.0) -> None:
        """Turn t; `content`: which file the turn reads (default t: they cycle), so two blocks of turns
        can read the same files and differ only in what is measured (--paired). `model_wait`: seconds of
        sleep between the request and its usage (the model call; --model-wait)."""
        k = t if content is None else content
        req = pipe.next_request()
        if model_wait:
            time.sleep(model_wait)
        # Reading req.trace builds the turn's trace (~100 us, ~7% of the turn), which an agent with no
        # probe client, recorder or exporter otherwise skips (pipeline._unwatched): --untraced reads only
        # the count, so what an attached reader makes the engine build is the reader's cost too.
        tokens = req.final_tokens if untraced else req.trace["final_tokens"]
        pipe.record_usage({"input_tokens": int(tokens), "output_tokens": 80})
        path = str(sources[k % len(sources)].relative_to(REPO)) if sources else "x"
        calls = pipe.assistant(
            f"Reading {path}.",
            [{"id": f"c{t}", "name": "read_file", "arguments": json.dumps({"path": path})}],
        )
        pipe.tool_result(calls[0].id, f"turn {t}\n" + texts[k % len(texts)])

    return pipe.probe, step, pipe


# The `linger` flush mode's and the `foldlinger` twin's ProbeServer.quiet_linger (agent_send, "Lingering").
LINGER = 1.0


# How the readers wait (--reader-wait; see attach_reader).
READER_WAIT = ["poll"]


# The reading subjects and the stream each asks for (see attach_reader).
READERS = {
    "reader": "elide",
    "leanreader": "lean",
    "fullreader": "full",
    "mute": "elide",
    "foldreader": "fold",
    "foldmute": "fold",
}


# The inspector's live source itself (inspector/sources/live.py) on the fold stream (engine.probe.elide
# fold_out): the agent leaves its turns' traces unbuilt and the source rebuilds each one from the journal
# in its own process, as `cp-inspect attach` does. It stops at the bench_end sentinel (see stop_subject).
FOLD_READER = """
import sys, threading, time
from inspector.sources.live import LiveSource
src = LiveSource(int(sys.argv[1]), timeout=10, session=int(sys.argv[2]) if len(sys.argv) > 2 else None, fold=True)
assert src._folding, "the agent does not offer the fold stream"
print("ATTACHED", flush=True)
turns = [0]
def follow():
    for ev in src.follow():
        turns[0] += type(ev).__name__ == "NewTurn"
threading.Thread(target=follow, daemon=True).start()
def ended():
    with src._state:
        return any(e.get("k") == "bench_end" for e in [*src.events[-4:], *list(src._ahead.values())[-4:]])
while not ended():
    time.sleep(0.05)
print(turns[0], src.folded_turns, src.asked_traces, flush=True)
src.close()
"""


def _start_reader(script: str, server: ProbeServer) -> subprocess.Popen[str]:
    """`script` (FOLD_READER, FOLLOW_READER) run in its own process on this tree, given this process and
    the server's session, once it says it is attached."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    argv = [str(os.getpid())] + ([str(server.session)] if server.session is not None else [])
    reader = subprocess.Popen(
        [sys.executable, "-c", script, *argv], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
    )
    assert read_line(reader, server) == "ATTACHED"
    return reader


def attach_fold_reader(server: ProbeServer) -> subprocess.Popen[str]:
    """The live source on the fold stream in its own process (see FOLD_READER), attached and past its
    snapshot, as attach_reader's readers are."""
    reader = _start_reader(FOLD_READER, server)
    wait_for(lambda: server.client_count == 1)
    wait_for(lambda: all(s.snapshot_pending == 0 and s.buffered_bytes == 0 for s in server.stats()), 120)
    return reader


# `cp-inspect attach`'s source on a recording agent (inspector/sources/live_recording.py: open_live): it
# reads the turns from the agent's recording, and the agent publishes nothing for it (engine.probe.
# handshake, "Following the recording"). It stops at a line on its stdin (nothing is sent to it to stop at).
FOLLOW_READER = """
import sys, threading
from inspector.sources.live_recording import RecordingFollower, open_live
src, why = open_live(int(sys.argv[1]), timeout=10, session=int(sys.argv[2]) if len(sys.argv) > 2 else None)
assert isinstance(src, RecordingFollower), f"not following the recording: {why}"
print("ATTACHED", flush=True)
turns = [0]
def follow():
    for ev in src.follow():
        turns[0] += type(ev).__name__ == "NewTurn"
threading.Thread(target=follow, daemon=True).start()
sys.stdin.readline()
print(turns[0], flush=True)
src.close()
"""


def attach_follow_reader(server: ProbeServer) -> subprocess.Popen[str]:
    """The recording follower in its own process (see FOLLOW_READER), attached."""
    assert server.follow_recording, "--twin followreader / followvsfold need --recording (both twins record)"
    reader = _start_reader(FOLLOW_READER, server)
    wait_for(lambda: server._nfollowers == 1)
    return reader


def start_subject(subject: str, server: ProbeServer, rt: Path) -> subprocess.Popen[str] | None:
    if subject == "none":
        return None  # an A/A run: the noise floor of the ratios
    if subject == "mute":
        proc = attach_reader(server, rt, "elide", mute=True)
        time.sleep(0.4)  # past its reading of the snapshot: asleep from here on
        return proc
    if subject == "foldreader":
        return attach_fold_reader(server)
    if subject == "followreader":
        return attach_follow_reader(server)
    if subject == "foldmute":
        # The fold reader attached, then stopped: the agent still writes each turn into its ring (a ring
        # is never waited on), and the reader's process does nothing meanwhile (no poll, no fold). Against
        # foldreader, what the reader's own work costs the agent's process (caches, the CPU it shares).
        # Its ring holds 256 KB: keep a round's turns under ~130 (--pairs 120), or it resyncs at the end.
        proc = attach_fold_reader(server)
        time.sleep(0.5)  # past its first polls
        proc.send_signal(signal.SIGSTOP)
        return proc
    if subject in READERS:
        return attach_reader(server, rt, READERS[subject])
    attacker = subprocess.Popen(
        [sys.executable, str(REPO / "benchmarks" / "attack_probe.py"), str(server.path), "--mode", subject],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert read_line(attacker, server) == "READY"
    time.sleep(0.2)  # let the attack reach its steady state before the block starts
    return attacker


def stop_subject(subject: str, proc: subprocess.Popen[str], server: ProbeServer) -> None:
    if subject == "foldmute":
        proc.send_signal(signal.SIGCONT)
        subject = "foldreader"
    if subject in ("mute", "followreader"):
        assert proc.stdin is not None
        proc.stdin.write("\n")
        proc.stdin.flush()
        read_line(proc, server)
        proc.wait(60)
        if subject == "followreader":
            wait_for(lambda: server._nfollowers == 0, 60)
    elif subject in READERS:
        # Detach: the reader stops at a sentinel, so it has read (or been told it lost) everything.
        server.publish({"k": "bench_end"})
        read_line(proc, server)
        proc.wait(60)
    else:
        proc.terminate()
        proc.wait(60)
    wait_for(lambda: server.client_count == 0, 60)


def spills(pipe: Any) -> int:
    """Chunks the Pipeline has written to its scratch files so far (history and journal): a turn that
    writes one costs ~5-7 ms, 10x a turn here (the history's first, ~300 turns in)."""
    history, events = getattr(pipe, "history", None), getattr(getattr(pipe, "journal", None), "events", None)
    return len(getattr(history, "_starts", ())) + len(getattr(events, "_starts", ()))


def drain(server: ProbeServer) -> None:
    """Until every published event has been sent to every client (the I/O thread's work for them is done).
    Events of elided kinds that the agent's thread leaves waiting while every client is a quiet elided
    one (engine.probe.agent_send) are sent to none of them: they count as sent."""

    def sent() -> bool:
        waiting = [ev[0] if type(ev) is tuple else ev for ev in list(server._pending)]
        if waiting and not (
            getattr(server, "_nquiet", -1) == server._nclients and all(ev.get("k") in ELIDED_KINDS for ev in waiting)
        ):
            return False
        return all(s.queued == len(waiting) and s.buffered_bytes == 0 for s in server.stats())

    wait_for(sent, 60)
