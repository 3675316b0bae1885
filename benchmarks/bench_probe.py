"""Probe overhead on the agent: turn time with one attached, reading inspector against none.

    .venv/bin/python benchmarks/bench_probe.py [--turns 300] [--rounds 15] [--work-kb 30] [--publishes 20]
                                               [--recording]
    .venv/bin/python benchmarks/bench_probe.py --engine --turns 40 --rounds 16 --warmup 100 [--window 16000]

A simulated agent turn is fixed CPU work (json.dumps of a ~30 KB request, as a serializer would do)
plus ~20 journal events handed to `ProbeServer.publish` (18 content blobs of ~1 KB, the request
record and a 12-section turn trace). Both configurations run in this one process, interleaved in
rounds (none, attached, attached, none, ...) so that drift in machine load, or turns that slow down as
the history grows, hit both alike.

"attached" means one real client in a separate process (as `cp-inspect attach` would be) that reads
and decodes every frame. The server runs in this process, as it does in an agent, so its I/O thread
competes with the turn for the GIL and the CPU: that is the overhead being measured. Three figures:
the median turn (what a typical turn feels), the mean turn (includes the turns during which the I/O
thread ran; inflated by any other load on a shared machine), and this process's CPU time per turn
(agent thread + probe thread; immune to other processes' load, so the most reproducible).

With --recording the agent is also writing a recording, so it encodes each event anyway (in both
configurations) and passes the frame to publish(), which then only copies bytes.

With --engine the turn is a real `engine.pipeline.Pipeline` turn (next_request, usage, an assistant
tool call and a ~3 KB result) with the Pipeline's own probe (serve=True); the snapshot a reader gets
on attaching is drained before its block starts, since it is a one-off and not a per-turn cost.

Paired mode (issue 15 item 4 and issue 10 item 3), a realistic 1-2 ms engine turn:

    .venv/bin/python benchmarks/bench_probe.py --paired none,reader --rounds 32 [--recording]
    .venv/bin/python benchmarks/bench_probe.py --paired none,ping,trickle,churn,readers,mix --rounds 12

`reader` asks for the elided lean stream, as the inspector's live source does (engine.probe.lean and
engine.probe.elide: no request, usage, message, part or blob events, each sent event with its journal
position; a turn other than the newest of each send comes as its summary; it fetches nothing, like an
inspector following the newest turn with no content shown); `leanreader` the lean stream alone (every
event: the inspector before the elided stream), `fullreader` every turn whole (before the lean one):

    .venv/bin/python benchmarks/bench_probe.py --paired fullreader,leanreader,reader --rounds 32

and head to head on the thread clocks, one Pipeline per round, blocks A B B A (A: fullreader, B: reader):

    .venv/bin/python benchmarks/bench_probe.py --lean-ab --rounds 8 --turns 60

Where a live event is encoded while a reader is attached and the agent does not record: on the probe's
I/O thread (io, what a Pipeline does) or on the agent's thread at publish (agent; discard: encoded there
and thrown away, the encoding's own cost), in one process, blocks interleaved A B B A / B A A B:

    .venv/bin/python benchmarks/bench_probe.py --encode-ab io,agent --rounds 12 --turns 60
    .venv/bin/python benchmarks/bench_probe.py --encode-ab io,io --rounds 12 --turns 60   # the A/A

Where the probe thread's time goes on that turn (issue 15 item 4): the thread's own clock around
each part of its passes (select, reading the wake-up byte, sleeping, filling buffers, sending, the
CPU budget), and, in alternate blocks with the same reader (A B B A), the whole thread with events
encoded as usual against a stand-in encoder that returns each kind's bytes from a table (what is left
is moving and sending them: the floor below the encoding):

    .venv/bin/python benchmarks/bench_probe.py --profile --rounds 6 --turns 60 [--pace 0.5]

(the lean steps inside a pass are timed too: the batch encoder, framing, summaries, finding the newest
turn, moving events into the ring). An agent that waits on its model between turns (--pace seconds of
sleep after each turn, so every turn is a burst of its own), with how a burst ended before (one more
wait after a pass that sent something) against now, alternated in one process:

    .venv/bin/python benchmarks/bench_probe.py --pace-ab 0.5 --rounds 4 --turns 8

and the same agent's events sent by its own thread at the end of each Pipeline call (engine.probe.
agent_send) against by the I/O thread, with the agent's CPU with no client attached beside them (what an
attached inspector adds, agent and probe threads together), in one process:

    .venv/bin/python benchmarks/bench_probe.py --flush-ab 0.5 --rounds 4 --turns 8 [--untraced] [--recording]

(the agent's thread inside the Pipeline's flushes is printed beside it: the probe's part of that thread,
measured directly). The reader is, by default, what the inspector attaches to an agent's probe with
(`cp-inspect attach PID`, `top`'s Enter, `explain PID`, a run's later sessions: LiveSource(fold=True)): the
live source on the fold stream, which rebuilds each turn's trace itself, so an agent that does not read its
traces (--untraced) builds none for it. (`attach --record` asks for every turn whole, and `cp-inspect run`'s
first session for the elided stream, from the recording proxy's probe, not an agent's.) The default modes
are `agent` (that reader) and `agent-elide` (the quiet elided ring reader, which --flush-ab measured before
the forty-second session and `cp-inspect attach` no longer reads), so one run gives the figure both ways.
`--flush-reader elide` makes the elided reader every untagged mode's, as before: the commands earlier
sessions cite (BENCHMARKS.md's `--flush-ab 0.5 --rounds 4 --turns 8` rows, agent / io;
engine/probe/agent_send.py's `--flush-modes agent,agent-linger`, engine/probe/handoff.py's
`agent,agent-sender`) measure what they did then with it added. Turns 0.5 s apart are farther apart than
FOLD_COALESCE, so every turn's close is its own send, as with a model that answers in seconds. The elided
readers wait as the inspector did, on a timer of their own (engine.probe.poll; `--reader-wait block`: in
select() on the socket, as every client did before). Other pairs of attached modes, e.g. the elided reader
against one that blocks and is told where the journal ends (what main did), in one process:

    .venv/bin/python benchmarks/bench_probe.py --flush-ab 0.5 --rounds 6 --turns 8 --flush-reader elide --flush-modes agent,agent-block-loud

The inspector's side of that paced agent: when its live source (in its own process, as `cp-inspect
attach`) sees each turn after the agent's next_request returned, and its CPU a turn and a minute while
the agent is idle; with --reader-tree another tree's live source beside this one's (a base's):

    .venv/bin/python benchmarks/bench_probe.py --follow-latency 0.5 --rounds 2 --turns 12 --idle 20 [--reader-tree /tmp/base]

(`--latency-readers fold,follow --recording`: `attach`'s source on the fold stream against the recording
follower, inspector/sources/live_recording.py, on a recording agent.)

An inspector attaching to a long-running agent (N turns of history, built first): the agent's longest
turn, p99 and median (wall and its thread's CPU clock) while the inspector's live source (in its own
process, as `cp-inspect attach`) attaches and takes the agent's history, against blocks with nobody
attaching (A B B A); the time from that process's start to its first frame (and the newest turn in it)
and to its whole history; the agent's RSS after the attaches and after --churn attach/detach cycles; and
its turns while a reader stopped with SIGSTOP as it attaches holds the rest of what it is owed:

    .venv/bin/python benchmarks/bench_probe.py --attach-long 5000 --rounds 2 --turns 20 [--pace 0.1] [--churn 50]

The elided fill's per-turn work (which events go, the summaries, the batch encoding) on a real Pipeline's
events, hot and right after evicting the caches (the floor of touching the events cold, wherever it is
done: see floor()):

    .venv/bin/python benchmarks/bench_probe.py --floor --rounds 3 --turns 60

The least a paced Python turn can pay to ship its trace to another process, whatever the probe's
design (after the same sleep, right where the probe sends: a flag test, msgpack of the trace, its copy
into a shared mapping, and the whole minimal path in one function; see ship_floor()):

    .venv/bin/python benchmarks/bench_probe.py --ship-floor 0.5 --rounds 2 --turns 8

What `publish` itself costs the agent's thread on that turn, per turn (the other side of any design that
moves work from the I/O thread to publish: see publish_cost_blocks()):

    .venv/bin/python benchmarks/bench_probe.py --publish-cost --rounds 8 --turns 60

The probe's part of a paced agent's thread, piece by piece (issue 15 item 4): each publish() by the
event's kind on the thread's clock, with the quiet elided ring reader of --flush-ab attached against none
(blocks none, reader, reader, none, one Pipeline a round), and inside publish()'s straight path for the
turn (agent_send._ring_now) its encode, header, taking the waiting events and ring write (each wrapped
call's clock reads subtracted; "rest" is its checks, lock and bookkeeping):

    .venv/bin/python benchmarks/bench_probe.py --publish-split 0.5 --rounds 4 --turns 8
    .venv/bin/python benchmarks/bench_probe.py --publish-split 0.2 --split-reader fold --untraced --rounds 4 --turns 8
    .venv/bin/python benchmarks/bench_probe.py --publish-split 0.2 --split-reader fold --untraced --rounds 8 --turns 8 --split-marks

(--split-marks: the fold ring's held marks once an event, as before, against once a burst, ring.MARK_GAP;
--split-header: the straight path's frame header by HEADER.pack, as before, against one int's bytes.)

In paired mode every round builds a fresh Pipeline (200k window, so no compaction, and ~1 KB tool
results: a 1-2 ms turn while the history is 70-230 turns long), warms it up --warmup turns (default
70), then runs one octet of --block timed turns a block (default 10), A B B A B A A B or its mirror at
random (A: no subject, B: the subject), each block after --settle turns timed apart (default 10; see
paired() for why this shape, and `none` as the subject for the A/A control that says how far the
figure resolves). The subject is one reading inspector (`reader`), or hostile same-uid clients from
benchmarks/attack_probe.py in their own process (ping flood, one-byte trickle, connect/close churn,
200 readers, all at once), started before the block and stopped after it. A reader's block is charged
with the probe's sending of that block's events, which may happen up to a few hundred ms after them.
Figures: the median over octets of the per-octet CPU ratio (the agent thread's and the probe thread's
clocks summed) with a bootstrap 95% interval, the agent thread's own ratio, the wall ratio inside the
turns, and the probe thread's own CPU per turn (its POSIX thread clock) and as a share of the turn.
--pace S puts S seconds of sleep after every turn (an agent waiting on its model):

    .venv/bin/python benchmarks/bench_probe.py --paired none,reader --rounds 32 [--pace 0.2 --settle 3]

Twin mode (issue 15 item 4: the attached inspector's added CPU on a paced turn, resolved to ~1-1.5%):
two identical Pipelines in this process, the subject attached to one of them for a whole round, their
turns taken in turn A B B A ... (A: the twin without the subject), each followed by --pace seconds of
sleep, both turns of a pair reading the same file. What it measures: the agent process's CPU a turn
(the agent thread's clock around the turn plus that twin's probe I/O thread over the turn and the
sleep after it), not the reader's process. Figures: the added CPU a turn, the median of the pairs'
differences B - A, with a bootstrap 95% interval and as a ratio to the median A turn; and the ratio of
the sums (the mean cost, which outliers move). `none` is the A/A. See twin() for why this shape and
what it leaves out. --untraced: the agent reads only each request's token count, not its trace (an
agent with no client then builds no trace: the reader's cost includes the trace it makes the engine
build):

    .venv/bin/python benchmarks/bench_probe.py --twin none,reader --rounds 6 --pairs 150 --pace 0.2 --settle 10 [--untraced]

`foldcoalesce` is the same A/B for agent_send.FOLD_COALESCE (A sends every turn at its close, B holds a
close that comes within FOLD_COALESCE of its last send for the next). `foldpath` is an A/B of the fold
stream's send on the agent's thread: a fold reader attached to both twins,
A's turns sent by the general path (_send_now, _send_here, _ring_turn: the server's `fold_straight` off),
B's by publish()'s straight path (agent_send._fold_now); "added" is then B - A (negative: saved).
`foldlinger`: a fold reader on both, A's turns sent on the agent's thread, B's handed to the I/O
thread's lingering burst (ProbeServer.quiet_linger = LINGER, agent_send "Lingering"): what the whole
process pays for taking the send off the agent's thread (the --flush-ab mode `agent-linger` shows what the
agent's thread saves). `foldsender`: likewise, B's turns handed to the probe's hand-off thread, woken by
a lock's release (engine.probe.handoff; `--flush-ab ... --flush-modes agent,agent-sender` and
`--publish-split ... --split-sender` show the agent's thread's side). `foldmarks`: a fold reader on both,
A's every held event marked in its ring (the count stored once an event, as before), B's once a burst
(ring.MARK_GAP). `foldview`: a fold reader on both, A's ring header (its held marks and written
total) stored by `struct.pack_into` (as before probe40), B's as items of the ring's u64 views
(`RingWriter.held_q`, `written_q`). `foldfloor`: as `foldreader`, with B's publish() the floor of the
agent's thread sending the fold reader its turns (floor_publish: the held kinds appended and nothing else,
closes coalesced as today, a sent batch encoded and written with no check, lock, held mark or note of the
model's and tools' times; a benchmark's stand-in, not a path the probe could ship): the least any
restructuring of today's send on the agent's thread could add, on the goal's own measure. `foldbypass`:
a fold reader on both, B's journal putting each event of a kind held back in the probe's queue itself while
the fold client is named for the straight path (bypass_append: no Pipeline._publish, no publish() call, so
no held mark and no note of the model's or the tools' times; a prototype of issue 15.4's "no per-event call
into the probe", not a path the probe ships); beside the turn's figures, the agent's thread clock inside
each twin's journal appends (every event and the close's), which resolves what the turn's whole does not:

    .venv/bin/python benchmarks/bench_probe.py --twin foldbypass --untraced --rounds 2 --pairs 150 --pace 0.2 --settle 10 [--model-wait 0.2]

(`foldappends`: the same clock with both twins on today's path, its A/A; --flush-ab's `bypass` tag does
the same as foldbypass in its blocks: `--flush-modes agent,agent-bypass`.)
--model-wait S puts S seconds of sleep inside each turn, between its request and its usage (the model
call, where a real agent waits; --pace is then the agent running its tool), so that the turn's close
runs cold as it does in an agent (without it the close follows the request at once):

    .venv/bin/python benchmarks/bench_probe.py --twin foldreader --untraced --rounds 2 --pairs 150 --pace 0.2 --model-wait 0.2 --settle 10

A recording agent's inspector that reads the turns from the recording (inspector/sources/live_recording.py,
what `cp-inspect attach` does when the agent records: the agent publishes nothing for it): with --recording
both twins record, so the recording's own cost is in both arms. `followreader`: the follower on B, nothing
on A (what it adds to a recording agent's turn); `foldreader --recording`: today's fold reader likewise;
`followvsfold`: the fold reader on A and the follower on B (B - A: what following saves a turn):

    .venv/bin/python benchmarks/bench_probe.py --twin followreader,foldreader,followvsfold --recording --untraced --rounds 2 --pairs 150 --pace 0.2 --settle 10
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import select
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
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


def engine_agent(args: argparse.Namespace, rt: Path) -> Agent:
    """A real Pipeline turn: plan, bind, optimize, serialize, usage, an assistant tool call and its result."""
    from engine.pipeline import Pipeline

    # The Pipeline opens its probe in the default runtime directory; point that at our temporary one.
    os.environ["XDG_RUNTIME_DIR"] = str(rt.parent)
    record = str(rt.parent / "bench.cpsession") if args.recording else None
    pipe = Pipeline(
        "claude-sonnet-4", "anthropic", args.window, serve=True, max_output_tokens=1024, record=record
    )
    assert pipe.probe is not None
    pipe.identity("You are a careful coding agent. You read before you change anything.")
    pipe.constraints("Never modify files outside the repository. Never run network commands.")
    pipe.goal("Find out how the engine chooses its compaction tier and summarize the rules.")
    params = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
    for name in ("read_file", "list_dir", "grep"):
        pipe.add_tool(name, f"{name} in the repository", params)
    pipe.user("Please explain how the compaction tier is chosen, with references to the code.")
    sources = sorted((REPO / "engine").glob("*.py"))
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
    from engine.pipeline import Pipeline

    os.environ["XDG_RUNTIME_DIR"] = str(rt.parent)
    record = str(rt.parent / f"bench-{rnd}.cpsession") if args.recording else None
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
    sources = sorted((REPO / "engine").glob("*.py"))
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


def paired(args: argparse.Namespace, subject: str) -> None:
    """What the subject adds to the agent process's CPU a turn, by short interleaved blocks (issue 15
    item 4 and issue 10 item 3): `none` as the subject is the A/A control, which this design holds at
    1.00 within its noise.

    Each round is a fresh Pipeline, warmed up (--warmup turns), then one octet of blocks of --block
    timed turns, A B B A B A A B or its mirror in turn (the first at random, --seed), A without the subject
    and B with it. Why this shape (the earlier design, one round of base subject subject base blocks of 40, read
    its A/A 0.83-0.99): the turn's cost grows with its history and not linearly (convex, and the first
    history write, ~6 ms, falls near turn 300), so the outer blocks of one long ABBA were dearer; that
    order cancels a straight drift, eight blocks in this order cancel a quadratic one too, and a round
    of 70 + 8 x 20 turns ends before the history's first write. Each block runs the same way on both
    sides: the subject started (a reader attached and its snapshot drained), --settle turns timed apart
    (the turns right after an attach cost more: the first 1.45x a turn without one, the eighth 1.08x,
    then even; once per attach, not per turn), the garbage collected before them and the collector off
    for the settling and timed turns (a full collection, ~5 ms, landing in one block of eight moved that octet
    ~10%), then the subject stopped. The turns of every block of an octet read the same files in
    the same order (the turn's cost depends on what it reads: 55-69% of its turn-to-turn variation
    recurs at the same turn in another round), so the blocks differ only in the subject. A block's CPU
    is the agent thread's clock around its turns plus the probe thread's clock from their start until
    their events are all sent (a reader detaching is counted apart): per-thread clocks, not the process
    clock, which also took in the harness's own waiting for the reader. The figure is the median over
    octets of B / A, with a bootstrap 95% interval. Left out: attaching and detaching, the turns right
    after an attach, and the garbage collector's passes (on both sides). --pace S: every turn (the
    settling ones too) followed by S seconds of sleep, the model call of an agent that waits on its
    model, and every block started 1 s after its subject; else turns back to back. --rounds is the
    number of octets (--turns is not used here)."""
    import random

    seed = args.seed if args.seed is not None else random.randrange(1_000_000)
    flip = random.Random(seed).randrange(2)
    rt = Path(tempfile.mkdtemp(prefix="cpb-", dir="/tmp")) / "contextpipe"
    block = max(1, args.block)
    # Per octet and side: agent thread, probe thread until sent, wall inside the turns, turns, the
    # settling turns' agent thread.
    octets: list[tuple[list[float], list[float]]] = []
    detach: list[float] = []  # the probe thread while a reader detaches, per block
    spilled = 0  # blocks whose timed turns wrote history or journal to disk
    blocks: list[float] = []
    by_pos: list[list[float]] = [[] for _ in range(8)]
    for rnd in range(args.rounds):
        server, step, pipe = fresh_pipeline(args, rt, rnd)
        run_block(step, 0, args.warmup)
        turn = first = args.warmup
        sums = {"A": [0.0] * 5, "B": [0.0] * 5}
        order = ("ABBABAAB", "BAABABBA")[(rnd + flip) % 2]  # as many of each, the first at random
        for side in order:
            proc = start_subject(subject, server, rt) if side == "B" else None
            if args.pace:
                # A paced agent's turns right after an attach may still go by the I/O thread (the
                # snapshot's tail, and now and then ~1 s more before the straight path serves the
                # client): once per attach. Both sides wait as long.
                time.sleep(1.0)
            gc.collect()
            gc.disable()
            s0 = time.thread_time()
            for i in range(args.settle):
                step(turn + i, first + block + i)
                if args.pace:
                    time.sleep(args.pace)
            settle = time.thread_time() - s0
            turn += args.settle
            # The timed turns follow at once, as turns back to back do (a pause here would start the
            # agent's thread a new send window, engine.probe.agent_send: its first 16 calls a tenth of a
            # second are its to send, the rest the I/O thread's, and a short block would be mostly the
            # former); what the probe thread still had to send of the settling turns is charged to the
            # block, as what it leaves of the block's own would be in a longer run.
            io0, w0, agent, wall = thread_cpu(server), spills(pipe), 0.0, 0.0
            for i in range(block):
                p0, a0 = time.perf_counter(), time.thread_time()
                step(turn + i, first + i)  # the same files in every block of the octet
                agent += time.thread_time() - a0
                wall += time.perf_counter() - p0
                if args.pace:
                    time.sleep(args.pace)
            gc.enable()
            spilled += spills(pipe) != w0
            if proc is not None and subject in READERS:
                drain(server)  # the block's events all sent: the reader's per-turn cost ends here
            io = thread_cpu(server) - io0
            if proc is not None:
                stop_subject(subject, proc, server)
                detach.append(thread_cpu(server) - io0 - io)
            turn += block
            for k, x in enumerate((agent, io, wall, block, settle)):
                sums[side][k] += x
            blocks.append(agent + io)
        octets.append((sums["A"], sums["B"]))
        mean = statistics.fmean(blocks[-8:])
        for pos in range(8):  # each block against its octet's mean: what the order must cancel
            by_pos[pos].append(blocks[pos - 8] / mean)
        pipe.close()
    shutil.rmtree(rt.parent, ignore_errors=True)  # its sockets are gone; the recordings are not kept

    def ratio(f: Callable[[list[float]], float]) -> list[float]:
        return [f(b) / f(a) for a, b in octets]

    def interval(xs: list[float]) -> tuple[float, float]:
        boot = random.Random(0)
        meds = sorted(statistics.median(boot.choices(xs, k=len(xs))) for _ in range(2000))
        return meds[50], meds[1949]

    med = statistics.median
    cpu = ratio(lambda s: s[0] + s[1])
    lo, hi = interval(cpu)
    pooled = sum(b[0] + b[1] for _, b in octets) / sum(a[0] + a[1] for a, _ in octets)
    turn_us = med(a[0] / a[3] for a, _ in octets) * 1e6
    probe = [b[1] / b[3] for _, b in octets]
    after = med((b[4] - a[4]) / 4 for a, b in octets) * 1e6  # the settling turns, B less A, a block
    rec = " (recording)" if args.recording else ""
    pace = f"each turn followed by {args.pace:g} s of sleep" if args.pace else "turns back to back"
    print(
        f"{subject:8s}{rec}: turn {turn_us:.0f} us CPU | CPU ratio (agent + probe thread clocks) median "
        f"{med(cpu):.3f} [95% {lo:.3f}-{hi:.3f}], pooled {pooled:.3f} | agent thread "
        f"{med(ratio(lambda s: s[0])):.3f} | wall in the turns {med(ratio(lambda s: s[2])):.3f} | probe thread "
        f"{med(probe) * 1e6:.1f} us a turn, {med(p * a[3] / a[0] for p, (a, _) in zip(probe, octets, strict=True)) * 100:.2f}% of one"
    )
    print(
        f"  {len(octets)} octets of 8 x {block} turns (ABBABAAB and its mirror in turn, seed {seed}), {pace}; "
        f"{args.settle} turns before each block: {after:+.0f} us in all with the subject"
        + (f"; a reader's detaching {med(detach) * 1e6:.0f} us of the probe thread" if detach and subject in READERS else "")
        + (f"; {spilled} blocks wrote to disk in their timed turns" if spilled else "")
    )
    print(f"  CPU ratio by octet: {' '.join(f'{r:.3f}' for r in cpu)}")
    print(f"  a block's CPU by its place in the octet, against the octet's mean: {' '.join(f'{med(p):.3f}' for p in by_pos)}")


def twin(args: argparse.Namespace, subject: str) -> None:
    """What the subject adds to the agent process's CPU a turn, turn by turn: two identical Pipelines in
    this process (twins), the subject attached to one of them for the whole round, their turns taken in
    turn (A B B A ...; A the twin without the subject, B the one with it), each followed by --pace
    seconds of sleep, the same file read by both turns of a pair. `none` as the subject is the A/A.

    Why (the octets of --paired read A/A 0.92-1.04 at 8 octets, wider than the 2% they were to show):
    a paced turn's CPU varies by 14-20% from one turn to the next (it runs cold after the sleep, and
    whatever else the machine runs decides how cold), and by ~0.2-0.4 correlation from one turn to the
    next (load comes and goes); a block design compares turns seconds apart, with an attach (and 1 s of
    waiting) between them, so a run spends most of its time not measuring. Here the two turns of a pair
    are ~pace apart, no attach falls between them, and every turn is measured. The subject is attached
    once a round and --settle paced pairs run before the timed ones (a turn right after an attach costs
    more). Which twin gets the subject alternates by round, so neither twin's own layout is the subject's.

    A turn's CPU is the agent thread's clock around it plus its twin's probe I/O thread clock over the
    turn and the sleep after it (so what the I/O thread does between turns is charged to its twin); a
    pair in which either turn wrote history or journal to disk (a round ends before the first such
    write, ~turn 300) is left out, as are the garbage collector's passes (collected before the timed
    pairs and off through them). The reader's own process runs through both twins' turns: what it does
    to the machine (its polls, ~0.25% of a core) falls on A and B alike, and this design does not
    show it (--paired's `mute` against `reader` did not tell them apart either).

    Figures: the added CPU a turn as the median of the pairs' differences B - A (a fixed cost added to
    every turn shifts B's distribution by that much, and the difference of two turns' noise is
    symmetric, so its median is that shift while a noisy turn moves it little) with a bootstrap 95%
    interval, and as a ratio to the median A turn; beside it the ratio of the sums, B / A (the mean
    cost; outliers move it), with its interval."""
    import random

    seed = args.seed if args.seed is not None else random.randrange(1_000_000)
    rng = random.Random(seed)
    rt = Path(tempfile.mkdtemp(prefix="cpb-", dir="/tmp")) / "contextpipe"
    pace = args.pace
    model_wait = args.model_wait
    # Per timed pair: (A's CPU, B's CPU, B's probe thread).
    pairs: list[tuple[float, float, float]] = []
    appends: dict[bool, list[float]] = {False: [], True: []}  # foldbypass: in the journal's appends a turn
    spilled = 0
    # Per twin, over the rounds: the sends on the agent's thread, and the closes it held back.
    sends = {"A": [0, 0], "B": [0, 0]}
    for rnd in range(args.rounds):
        twins = [fresh_pipeline(args, rt, 2 * rnd), fresh_pipeline(args, rt, 2 * rnd + 1)]
        for t in range(args.warmup):
            for _, step, _ in twins:
                step(t)
        a, b = twins if (rnd + seed) % 2 == 0 else twins[::-1]
        # foldpath: the fold reader on both twins, A's turns sent by the general path (fold_straight off,
        # as before fold31), B's by publish()'s straight path: B - A is what that path saves a turn.
        # foldcoalesce: likewise, A's every turn sent at its close (fold_coalesce 0, as before fold34), B's
        # closes within FOLD_COALESCE of the last send held for the next (agent_send.FOLD_COALESCE).
        proc_a = None
        # foldmarks: likewise, A's every held event marked in its ring (mark_gap 0, as before probe38),
        # B's marked once a burst (ring.MARK_GAP).
        # foldview: likewise, A's ring header (held marks, written total) stored by struct.pack_into (as
        # before probe40), B's through the ring's u64 views (RingWriter.held_q, written_q).
        # foldbypass: likewise, B's journal putting each held kind in the probe's queue itself (no call into
        # the probe for it, no held mark, no note of the model's time: bypass_append, a prototype).
        ab = subject in (
            "foldpath", "foldcoalesce", "foldlinger", "foldsender", "foldmarks", "foldview", "foldbypass", "foldappends"
        )
        # foldfloor: the fold reader on B alone (as foldreader), B's publish() the floor of the agent's thread
        # sending it (see floor_publish): the least any restructuring of today's send could add.
        reader_of = "foldreader" if ab or subject == "foldfloor" else subject
        # followvsfold: both twins record; A's inspector the fold reader (today's), B's the recording
        # follower (open_live): B - A is what following the recording saves the agent a turn.
        if subject == "followvsfold":
            proc_a, reader_of = start_subject("foldreader", a[0], rt), "followreader"
        if subject == "foldpath":
            a[0].fold_straight = False
        if subject == "foldcoalesce":
            a[0].fold_coalesce = 0.0
        if subject == "foldmarks":
            a[0].mark_gap = 0.0
        if subject == "foldsender":  # A's turns sent on the agent's thread, B's by the hand-off thread
            b[0].handoff = True
            b[0]._start_handoff()
        if subject == "foldlinger":  # A's turns sent on the agent's thread, B's by the I/O thread's burst
            b[0].quiet_linger = LINGER
        if ab:
            proc_a = start_subject("foldreader", a[0], rt)
        proc = start_subject(reader_of, b[0], rt)
        if pace:
            time.sleep(1.0)  # past the attach's after-effect on the I/O thread (see paired())
        if subject == "foldview":
            deadline = time.monotonic() + 10
            while not a[0]._held_rings:
                assert time.monotonic() < deadline, "A's fold reader never got its ring"
                time.sleep(0.01)
            for ring in a[0]._held_rings:
                ring.held_q = ring.written_q = None  # (the views released as dropped: the mapping can close)
        if subject == "foldfloor":
            b[0].publish = floor_publish(b[0])  # type: ignore[method-assign]
        # The agent's thread clock inside each twin's journal appends, the turn's close (which
        # Journal.append_deferred hands on) included: every call into the probe from the turn, so a cold
        # first touch that moves from a held event's publish to the close's is counted either way, and far
        # less noisy than the turn's whole (the same timing wrappers on both twins).
        in_appends = {id(a): [0], id(b): [0]}
        if subject in ("foldbypass", "foldappends"):  # (foldappends: both today's, the A/A of that clock)
            bypass = bypass_append(b[2].journal, b[0]) if subject == "foldbypass" else b[2].journal.append
            for side, append in ((a, a[2].journal.append), (b, bypass)):
                j = side[2].journal
                j.append = timed_append(append, in_appends[id(side)])  # type: ignore[method-assign]
                j.append_deferred = timed_append(j.append_deferred, in_appends[id(side)])  # type: ignore[method-assign]
        gc.collect()
        gc.disable()
        turn = args.warmup
        for i in range(args.settle):
            for _, step, _ in (a, b):
                step(turn + i, i, model_wait)
                if pace:
                    time.sleep(pace)
        turn += args.settle
        flip = rng.randrange(2)
        for k in range(args.pairs):
            cost = {}
            for side in ((a, b), (b, a))[(k % 4 in (0, 3)) ^ flip]:  # A B B A, or its mirror, by pairs
                server, step, pipe = side
                w0, io0 = spills(pipe), thread_cpu(server)
                box = in_appends[id(side)]
                j0 = box[0]
                c0 = time.thread_time()
                step(turn + k, k, model_wait)
                agent = time.thread_time() - c0
                appends[side is b].append((box[0] - j0) / 1e9)
                if pace:
                    time.sleep(pace)
                io = thread_cpu(server) - io0
                cost[side is b] = (agent + io, io, spills(pipe) != w0)
            if cost[False][2] or cost[True][2]:
                spilled += 1
                continue
            pairs.append((cost[False][0], cost[True][0], cost[True][1]))
        gc.enable()
        for side, p in ((a, proc_a), (b, proc)):
            if p is None:
                continue
            side[2].journal.__dict__.pop("append_deferred", None)
            bypassed = side[2].journal.__dict__.pop("append", None) is not None  # (foldbypass's)
            if side[0].__dict__.pop("publish", None) is not None or bypassed:  # (the real one for the drain)
                side[0]._send_now()  # (what it held back: it marks nothing held for the reader to ask for)
            reader = "foldreader" if p is proc_a else reader_of  # (A's is a fold reader where it has one)
            if reader == "foldmute":
                # Running again before the drain: the agent's last turns may be held for a send that
                # never comes (engine.probe.agent_send.FOLD_COALESCE) until the reader asks for them.
                p.send_signal(signal.SIGCONT)
            if reader in READERS:
                drain(side[0])
            stop_subject(reader, p, side[0])
        for side, name in ((a, "A"), (b, "B")):
            sends[name][0] += side[0].agent_sends
            sends[name][1] += getattr(side[0], "fold_closes_held", 0)
        for _, _, pipe in twins:
            pipe.close()
    shutil.rmtree(rt.parent, ignore_errors=True)

    med = statistics.median
    boot = random.Random(0)
    n = len(pairs)

    def interval(f: Callable[[list[tuple[float, float, float]]], float]) -> tuple[float, float]:
        xs = sorted(f(boot.choices(pairs, k=n)) for _ in range(2000))
        return xs[50], xs[1949]

    def added(ps: list[tuple[float, float, float]]) -> float:
        return med(b - a for a, b, _ in ps)

    def summed(ps: list[tuple[float, float, float]]) -> float:
        return sum(b for _, b, _ in ps) / sum(a for a, _, _ in ps)

    turn_a = med(a for a, _, _ in pairs)
    d, (dlo, dhi) = added(pairs), interval(added)
    r, (rlo, rhi) = summed(pairs), interval(summed)
    rec = " (recording)" if args.recording else ""
    how = f"each turn followed by {pace:g} s of sleep" if pace else "turns back to back"
    if model_wait:
        how += f", {model_wait:g} s between its request and its usage"
    print(
        f"{subject:8s}{rec}: turn {turn_a * 1e6:.0f} us CPU (median A) | added {d * 1e6:+.1f} us a turn "
        f"[95% {dlo * 1e6:+.1f} to {dhi * 1e6:+.1f}] = ratio {1 + d / turn_a:.3f} [{1 + dlo / turn_a:.3f}-"
        f"{1 + dhi / turn_a:.3f}] | ratio of sums {r:.3f} [95% {rlo:.3f}-{rhi:.3f}] | probe thread "
        f"{statistics.fmean(p for _, _, p in pairs) * 1e6:.1f} us a turn"
    )
    print(
        f"  {n} pairs of turns ({args.rounds} rounds of {args.pairs} after {args.warmup} + {args.settle}; seed {seed}), "
        f"{how}" + (f"; {spilled} pairs left out (a turn wrote to disk)" if spilled else "")
    )
    if subject in ("foldbypass", "foldappends"):
        # (every timed turn, the pairs a spill left out included: the appends are not what spilled)
        diffs = [y - x for x, y in zip(appends[False], appends[True], strict=True)]
        print(
            f"  in the journal's appends (the agent's thread, every event and the close): A "
            f"{med(appends[False]) * 1e6:.1f} us a turn, B {med(appends[True]) * 1e6:.1f}; B - A median "
            f"{med(diffs) * 1e6:+.1f} us over {len(diffs)} turns each"
        )
    print(
        "  sends on the agent's thread (closes held back): "
        + ", ".join(f"{k} {v[0]} ({v[1]})" for k, v in sends.items())
        + " over all turns of the rounds, warm-up and settling included"
    )


def floor_publish(server: ProbeServer) -> Callable[..., None]:
    """`--twin foldfloor`'s publish() for B: the least the agent's thread can do to send a fold client one
    batch a turn from publish(), for a benchmark only. While the fold client is named for the straight path
    (agent_send._ring_candidate), an event of a kind held back is appended to the queue and nothing else
    (no held mark for the reader, no note of the model's or the tools' time); a turn's close within
    fold_coalesce of the last send is held back likewise (agent_send.FOLD_COALESCE: the only clock read),
    and any other close makes the batch of everything waiting and writes it into the ring, with none of
    `_fold_now`'s checks and no pass lock (safe only while nothing else runs the probe: in this benchmark
    the I/O thread sleeps through the timed turns). Anything else, or with the client not named, goes to
    the real publish()."""
    from engine.probe.fold_send import _CLOSE

    general = ProbeServer.publish
    pending = server._pending
    sent_at = [0.0]

    def publish(event: Any, frame: bytes | None = None) -> None:
        c = server._ring_one
        if c is None or not c.fold or frame is not None or type(event) is not dict:
            return general(server, event, frame)
        kind = event.get("k")
        if kind in server._defer_kinds:
            pending.append(event)
            return
        fast = server._fold_pack
        if kind not in _CLOSE or fast is None or c.ring is None:
            return general(server, event, frame)
        pending.append(event)
        now = time.monotonic()
        if now - sent_at[0] < server.fold_coalesce:
            return
        sent_at[0] = now
        evs = list(pending)
        n = len(evs)
        jpos = c.jpos
        end = jpos + n
        batch = {"k": "batch", "events": evs, "at": list(range(jpos, end)), "end": end}
        payload = fast[0](batch, option=fast[1])
        pending.clear()
        server._head += n
        c.cursor = server._head
        c.jpos = end
        c.sent_events += n
        server.agent_sends += 1
        c.ring.write_frame((len(payload) << 32).to_bytes(8, "big"), payload)

    return publish


def bypass_append(journal: Any, server: ProbeServer) -> Callable[[dict[str, Any]], None]:
    """--flush-ab's `bypass` tag: Journal.append with a held kind put straight into the probe's queue
    while the fold client is named for the straight path (see flush_ab); anything else as Journal.append."""
    from engine.probe.agent_limits import DEFER_EVENTS

    log_append = journal.events.append
    sinks = journal._sinks
    pending = server._pending

    def append(event: dict[str, Any]) -> None:
        log_append(event)
        c = server._ring_one
        if c is not None and c.fold and event.get("k") in server._defer_kinds and len(pending) < DEFER_EVENTS:
            pending.append(event)
            return
        for sink in sinks:
            try:
                sink(event)
            except Exception:
                journal.sink_errors += 1

    return append


def timed_append(append: Callable[..., None], box: list[int]) -> Callable[..., None]:
    """`append` with the agent's thread clock inside it added to box[0] (ns; --twin foldbypass)."""
    clock = time.thread_time_ns

    def timed(*args: Any) -> None:
        t0 = clock()
        append(*args)
        box[0] += clock() - t0

    return timed


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


def encode_ab(args: argparse.Namespace, modes: list[str]) -> None:
    """Where a live event is encoded while a reader is attached (issue 15 item 4): `io`, the probe's I/O
    thread, up to ~100 ms after the event was built (what a non-recording Pipeline does); `agent`, the
    agent's thread at publish, handing the frame to publish() as a recorder does; `discard`, encoded at
    publish and thrown away (the agent's cost of encoding alone, the I/O thread still encodes). One
    reader stays attached through rounds of four blocks A B B A (mirrored every other round: the middle
    blocks of a round cost more, so only a mirrored pair of rounds is fair) on a fresh Pipeline; after
    each block the benchmark waits until the probe has sent everything, so the block carries all of its
    own encoding and sending. Figures per turn from the thread clocks: the agent's thread (its turns
    only), the probe thread, and their sum. `io,io` is the A/A."""
    rt = Path(tempfile.mkdtemp(prefix="cpb-", dir="/tmp")) / "contextpipe"
    per: dict[int, list[list[float]]] = {0: [], 1: []}  # per round: agent, probe, encoding (s per turn)
    encodes: list[tuple[str, int]] = []  # (kind, ns) of each encoding at publish

    def clock_pair() -> float:
        pairs = []
        for _ in range(200):
            t0 = time.thread_time_ns()
            pairs.append(time.thread_time_ns() - t0)
        return statistics.median(pairs)

    for rnd in range(args.rounds):
        server, step, pipe = fresh_pipeline(args, rt, rnd)
        where = {"mode": "io"}
        publish = server.publish

        # Every mode goes through this wrapper, so it costs them alike.
        def routed(
            ev: dict[str, Any], frame: bytes | None = None, _p=publish, _w=where, _s=server
        ) -> None:
            if _w["mode"] != "io" and frame is None and _s.client_count:
                # The thread's CPU clock (a loaded machine's preemptions do not count); reading it is
                # a syscall of 1-3 us on this VM, so the median of an empty pair is subtracted below.
                t0 = time.thread_time_ns()
                f = encode_frame(ev)
                encodes.append((ev.get("k", "?"), time.thread_time_ns() - t0))
                if _w["mode"] == "agent":
                    frame = f
            _p(ev, frame)

        server.publish = routed  # type: ignore[method-assign]
        run_block(step, 0, args.warmup)
        turn = args.warmup
        reader = attach_reader(server, rt)
        sums = {0: [0.0, 0.0, 0.0], 1: [0.0, 0.0, 0.0]}
        for idx in (0, 1, 1, 0) if rnd % 2 == 0 else (1, 0, 0, 1):
            where["mode"] = modes[idx]
            drain(server)
            gc.collect()
            io0, a0 = thread_cpu(server), time.thread_time()
            run_block(step, turn, args.turns)
            agent = time.thread_time() - a0
            # Encoding at publish, per turn: each event kind's median (robust to the preemptions of a
            # loaded machine) times its count.
            by_kind: dict[str, list[int]] = {}
            for kind, ns in encodes:
                by_kind.setdefault(kind, []).append(ns)
            del encodes[:]
            empty = clock_pair()
            enc = sum(max(0.0, statistics.median(v) - empty) * len(v) for v in by_kind.values()) / 1e9
            drain(server)
            sums[idx][0] += agent
            sums[idx][1] += thread_cpu(server) - io0
            sums[idx][2] += enc
            turn += args.turns
        stop_subject("reader", reader, server)
        pipe.close()
        for idx in (0, 1):
            per[idx].append([x / (2 * args.turns) for x in sums[idx]])
    med = statistics.median
    us = {idx: [med(r[k] for r in per[idx]) * 1e6 for k in (0, 1, 2)] for idx in (0, 1)}
    total = [(b[0] + b[1]) / (a[0] + a[1]) for a, b in zip(per[0], per[1], strict=True)]
    # Each even round with the odd round after it: a mirrored pair, so the position effect cancels.
    pairs = [(total[i] * total[i + 1]) ** 0.5 for i in range(0, len(total) - 1, 2)]
    agent_pairs = [
        ((per[1][i][0] / per[0][i][0]) * (per[1][i + 1][0] / per[0][i + 1][0])) ** 0.5
        for i in range(0, len(total) - 1, 2)
    ]
    rec = " (recording)" if args.recording else ""
    print(
        f"encode {modes[0]} -> {modes[1]}{rec}, per turn (median over {args.rounds} rounds of "
        f"{args.turns}x4 turns): agent thread {us[0][0]:.1f} -> {us[1][0]:.1f} us (of which encoding at "
        f"publish {us[0][2]:.1f} -> {us[1][2]:.1f} us), probe thread {us[0][1]:.1f} -> {us[1][1]:.1f} us"
    )
    print(
        f"  agent+probe CPU ratio, median of mirrored round pairs: {med(pairs):.3f} "
        f"({' '.join(f'{x:.3f}' for x in pairs)}); agent thread alone: {med(agent_pairs):.3f}"
    )
    print("  agent+probe ratio by round:", " ".join(f"{x:.3f}" for x in total))
    shutil.rmtree(rt.parent, ignore_errors=True)


def lean_ab(args: argparse.Namespace) -> None:
    """The lean stream against every turn whole (issue 15 item 4), head to head on the thread clocks: one
    Pipeline per round, blocks A B B A (mirrored every other round), A with a reader of the whole
    stream attached (`fullreader`), B with a lean reader (`reader`, as the inspector's live source
    reads); each block attaches its reader, drains its snapshot, runs --turns turns, waits until the
    probe has sent everything, and detaches. Per turn: the probe thread, the agent's thread (its turns
    only), and their sum (a summary is made on the probe's thread; nothing moves to the agent's)."""
    rt = Path(tempfile.mkdtemp(prefix="cpb-", dir="/tmp")) / "contextpipe"
    per: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    for rnd in range(args.rounds):
        server, step, pipe = fresh_pipeline(args, rt, rnd)
        run_block(step, 0, args.warmup)
        turn = args.warmup
        sums = {False: [0.0, 0.0], True: [0.0, 0.0]}
        for lean in (False, True, True, False) if rnd % 2 == 0 else (True, False, False, True):
            reader = attach_reader(server, rt, "elide" if lean else "full")
            drain(server)
            gc.collect()
            io0, a0 = thread_cpu(server), time.thread_time()
            run_block(step, turn, args.turns)
            agent = time.thread_time() - a0
            drain(server)
            sums[lean][0] += thread_cpu(server) - io0
            sums[lean][1] += agent
            stop_subject("reader", reader, server)
            turn += args.turns
        pipe.close()
        for lean in (False, True):
            per[lean].append((sums[lean][0] / (2 * args.turns), sums[lean][1] / (2 * args.turns)))
    med = statistics.median
    full, lean_ = per[False], per[True]
    total = [(b[0] + b[1]) / (a[0] + a[1]) for a, b in zip(full, lean_, strict=True)]
    for name, rows in (("whole (fullreader)", full), ("lean (reader)", lean_)):
        probe = [r[0] for r in rows]
        agent = med(r[1] for r in rows)
        print(
            f"{name:19s}: probe thread {med(probe) * 1e6:5.1f} us a turn ({med(probe) / agent * 100:.2f}% of the "
            f"agent's {agent * 1e6:.0f} us) [{' '.join(f'{x * 1e6:.0f}' for x in probe)}]"
        )
    print(
        f"agent+probe CPU, lean / whole, by round: median {med(total):.3f} "
        f"[{' '.join(f'{x:.3f}' for x in total)}] ({args.rounds} rounds of 4 x {args.turns} turns)"
    )
    shutil.rmtree(rt.parent, ignore_errors=True)


def pace_ab(args: argparse.Namespace) -> None:
    """An agent that waits on its model between turns (issue 15 item 4): each turn is followed by
    --pace seconds of sleep, so every turn is a burst of its own and the probe's per-burst costs
    (wake-ups, a pass, a send) fall on every turn. One lean reader stays attached to one Pipeline per
    round; blocks A B B A (mirrored every other round) alternate how a burst ends: A, as before
    (the loop waits COALESCE more after a pass that sent something, and ends the burst at the
    pass that finds nothing), B, as now (a burst ends at the pass after which nothing was published in
    the second half of its wait). Per turn, from the thread clocks: the probe thread, its passes, and the
    agent's thread (its turns only: the sleeps are not counted)."""
    rt = Path(tempfile.mkdtemp(prefix="cpb-", dir="/tmp")) / "contextpipe"
    per: dict[str, list[tuple[float, float, float]]] = {"before": [], "now": []}
    for rnd in range(args.rounds):
        server, step, pipe = fresh_pipeline(args, rt, rnd)
        run_block(step, 0, args.warmup)
        turn = args.warmup
        reader = attach_reader(server, rt)
        flowing = server._flowing
        sums = {"before": [0.0, 0.0, 0.0], "now": [0.0, 0.0, 0.0]}
        order = ("before", "now", "now", "before") if rnd % 2 == 0 else ("now", "before", "before", "now")
        for mode in order:
            server._flowing = (lambda: True) if mode == "before" else flowing  # type: ignore[method-assign]
            drain(server)
            time.sleep(0.5)  # let the last burst end, so the block starts with the loop asleep
            gc.collect()
            io0, w0, agent = thread_cpu(server), server.wakeups, 0.0
            for t in range(turn, turn + args.turns):
                a0 = time.thread_time()
                step(t)
                agent += time.thread_time() - a0
                time.sleep(args.pace)
            drain(server)
            time.sleep(0.5)  # the burst's end (its last wait) belongs to this block
            sums[mode][0] += thread_cpu(server) - io0
            sums[mode][1] += server.wakeups - w0
            sums[mode][2] += agent
            turn += args.turns
        server._flowing = flowing  # type: ignore[method-assign]
        stop_subject("reader", reader, server)
        pipe.close()
        for mode in sums:
            per[mode].append(tuple(x / (2 * args.turns) for x in sums[mode]))  # type: ignore[arg-type]
    med = statistics.median
    for mode in ("before", "now"):
        rows = per[mode]
        probe = [r[0] for r in rows]
        agent = med(r[2] for r in rows)
        print(
            f"burst end {mode:6s}: probe thread {med(probe) * 1e6:6.1f} us a turn ({med(probe) / agent * 100:.2f}% of "
            f"the agent's {agent * 1e6:.0f} us), {med(r[1] for r in rows):.2f} passes a turn "
            f"[{' '.join(f'{x * 1e6:.0f}' for x in probe)}]"
        )
    print(f"  ({args.rounds} rounds of 4 x {args.turns} turns, each followed by {args.pace:g} s of sleep)")
    shutil.rmtree(rt.parent, ignore_errors=True)


def flush_ab(args: argparse.Namespace) -> None:
    """An agent that waits on its model between turns (issue 15 item 4), its events sent by its own
    thread at the end of each Pipeline call (`agent`, engine.probe.agent_send) against by the probe's I/O
    thread (`io`: the Pipeline's hold() made a no-op, so every publish wakes the thread as before), and
    the same agent with no client attached (`none`). One Pipeline per round, blocks none A B B A none
    (A and B swapped every other round); a reader (by default the live source on the fold stream, as
    `cp-inspect attach` reads; the quiet elided ring reader for the modes flush_reader says) attaches
    before an A or B block (its snapshot drained) and detaches after it. Per turn, from the
    thread clocks: the probe thread (the whole block, the sending after the last turn included), the
    agent's thread (its turns only: the sleeps are not counted), their sum, and that sum minus the agent's
    thread in the `none` blocks: what an attached inspector adds, as % of the turn."""
    rt = Path(tempfile.mkdtemp(prefix="cpb-", dir="/tmp")) / "contextpipe"
    a_mode, b_mode = args.flush_modes.split(",")
    modes = ("none", a_mode, b_mode)
    readers = {m: flush_reader(m, args.flush_reader) for m in (a_mode, b_mode)}
    per: dict[str, list[tuple[float, ...]]] = {m: [] for m in modes}
    for rnd in range(args.rounds):
        server, step, pipe = fresh_pipeline(args, rt, rnd)
        # The agent's thread clock inside the Pipeline's flushes: the probe's own part of the agent
        # thread, measured directly (the "added" figure below is a difference of two noisy totals).
        flush_cpu = [0.0]
        flush = server.flush

        def timed_flush(flush: Callable[[], None] = flush, flush_cpu: list[float] = flush_cpu) -> None:
            t0 = time.thread_time()
            flush()
            flush_cpu[0] += time.thread_time() - t0

        server.flush = timed_flush  # type: ignore[method-assign]
        # And inside publish() (a tree whose publish sends, see agent_send, does part of the work there).
        pub_cpu = [0.0]
        publish = server.publish

        def timed_publish(
            ev: Any, frame: Any = None, publish: Callable[..., None] = publish, pub_cpu: list[float] = pub_cpu
        ) -> None:
            t0 = time.thread_time()
            publish(ev, frame)
            pub_cpu[0] += time.thread_time() - t0

        server.publish = timed_publish  # type: ignore[method-assign]
        # And hold() (a Pipeline call's start: in a tree that calls it, the probe's first touch after the
        # model call, outside flush()), on the same count.
        hold = server.hold

        def timed_hold(hold: Callable[[], None] = hold, pub_cpu: list[float] = pub_cpu) -> None:
            t0 = time.thread_time()
            hold()
            pub_cpu[0] += time.thread_time() - t0

        server.hold = timed_hold  # type: ignore[method-assign]
        run_block(step, 0, args.warmup)
        turn = args.warmup
        # probe thread, agent thread, passes, agent sends (flushes it completed), its send() calls, in
        # flush(), in publish()
        sums = {m: [0.0] * 7 for m in modes}
        pair = (a_mode, b_mode) if rnd % 2 == 0 else (b_mode, a_mode)
        for mode in ("none", pair[0], pair[1], pair[1], pair[0], "none"):
            tags = mode.split("-")
            wait = "block" if "block" in tags else "poll" if "poll" in tags else None
            # The inspector's live source on the fold stream (attach_fold_reader), as `cp-inspect attach`
            # reads since the thirtieth session (with --untraced the agent then builds no trace for it), or
            # the quiet elided ring reader (see flush_reader).
            fold = mode != "none" and readers[mode] == "fold"
            reader = (
                None
                if mode == "none"
                else attach_fold_reader(server)
                if fold
                else attach_reader(server, rt, wait=wait, loud="loud" in tags, socket_only="socket" in tags)
            )
            io_path = tags[0] == "io"
            if io_path:
                server.hold = lambda: None  # type: ignore[method-assign]
            general = "general" in tags and hasattr(server, "_ring_turn")
            if general:  # the general fill on the agent's thread, not the ring client's short path
                server._ring_turn = lambda c: False  # type: ignore[method-assign]
            # What a tree before probe12 did for a quiet ring client, one part at a time (see --flush-modes).
            winding = "winding" in tags and hasattr(server, "_ring_now")
            if winding or general:  # publish's straight path off: _send_now, _send_here, _ring_turn
                server._ring_now = lambda event, frame: False  # type: ignore[method-assign]
            # The turn handed to the I/O thread, encoded there (issue 15.4's idea): nothing is sent on
            # the agent's thread, so each event to send wakes the I/O thread, whose pass encodes it and
            # writes the ring. What it moves off the agent's thread shows in "probe thread".
            handoff = "handoff" in tags and hasattr(server, "_send_here")
            if handoff:
                server._ring_now = lambda event, frame: False  # type: ignore[method-assign]
                server._send_here = lambda: False  # type: ignore[method-assign]
            # The turns handed to the I/O thread's lingering burst (engine.probe.agent_send, "Lingering"):
            # nothing encoded or sent on the agent's thread.
            lingering = "linger" in tags and hasattr(server, "quiet_linger")
            linger = getattr(server, "quiet_linger", 0.0)
            if lingering:
                server.quiet_linger = LINGER
            # The straight path's turn handed to the probe's hand-off thread, woken by a lock's release
            # (engine.probe.handoff), not sent on the agent's thread.
            sender = "sender" in tags and hasattr(server, "handoff")
            if sender:
                server.handoff = True
                server._start_handoff()
            events = "events" in tags and hasattr(server, "_stand_in")
            if events:  # elided events wait in the queue themselves, not a stand-in each
                server._stand_in = None
            # A prototype of the agent's thread making no call into the probe for an event it holds back
            # (issue 15.4's "no per-event call"): while the fold client is named for the straight path, the
            # journal puts a held kind in the probe's queue itself (no Pipeline._publish, no publish(): no
            # held mark for the reader, no note of the model's or the tools' time). A benchmark's stand-in
            # only: what that design could save on the agent's thread, not a path the probe ships.
            bypass = "bypass" in tags
            if bypass:
                pipe.journal.append = bypass_append(pipe.journal, server)  # type: ignore[method-assign]
            bracketed = "bracketed" in tags and hasattr(server, "bracket")
            if bracketed:  # every Pipeline call calls hold() and flush(), quiet clients or not
                type(server).bracket = property(lambda s: True, lambda s, v: None)  # type: ignore[attr-defined]
            drain(server)
            time.sleep(0.5)  # let the last burst end, so the block starts with the loop asleep
            gc.collect()
            io0, w0, s0, agent = thread_cpu(server), server.wakeups, server.agent_sends, 0.0
            x0, f0, u0 = getattr(server, "agent_writes", 0), flush_cpu[0], pub_cpu[0]
            for t in range(turn, turn + args.turns):
                a0 = time.thread_time()
                step(t)
                agent += time.thread_time() - a0
                time.sleep(args.pace)
            drain(server)
            time.sleep(0.5)  # the burst's end (its last wait) belongs to this block
            acc = sums[mode]
            acc[0] += thread_cpu(server) - io0
            acc[1] += agent
            acc[2] += server.wakeups - w0
            acc[3] += server.agent_sends - s0
            acc[4] += getattr(server, "agent_writes", 0) - x0
            acc[5] += flush_cpu[0] - f0
            acc[6] += pub_cpu[0] - u0
            if io_path:
                server.hold = timed_hold  # type: ignore[method-assign]
            if general:
                del server._ring_turn  # type: ignore[method-assign]
            if winding or general or handoff:
                del server._ring_now  # type: ignore[method-assign]
            if handoff:
                del server._send_here  # type: ignore[method-assign]
            if lingering:
                server.quiet_linger = linger
            if sender:
                server.handoff = False
            if events:
                from engine.probe.elide import ELIDED_STAND_IN

                server._stand_in = ELIDED_STAND_IN
            if bypass:
                del pipe.journal.append  # type: ignore[method-assign]
            if bracketed:
                del type(server).bracket  # type: ignore[attr-defined]
                server.bracket = server._nclients > server._nquiet
            if reader is not None:
                stop_subject("foldreader" if fold else "reader", reader, server)
            turn += args.turns
        pipe.close()
        for mode in modes:
            per[mode].append(tuple(x / (2 * args.turns) for x in sums[mode]))  # type: ignore[arg-type]
    med = statistics.median
    base = [r[1] for r in per["none"]]
    hooks = [r[5] + r[6] for r in per["none"]]  # the timing wrappers and the probe's no-client hooks
    print(
        f"no client : agent thread {med(base) * 1e6:6.1f} us a turn [{' '.join(f'{x * 1e6:.0f}' for x in base)}], "
        f"in flush() {med(r[5] for r in per['none']) * 1e6:.1f} us, in publish() and hold() {med(r[6] for r in per['none']) * 1e6:.1f} us"
    )
    for mode in (a_mode, b_mode):
        rows = per[mode]
        added = [r[0] + r[1] - b for r, b in zip(rows, base, strict=True)]
        share = [a / b for a, b in zip(added, base, strict=True)]
        print(
            f"{mode:10s}: ({FLUSH_READERS[readers[mode]]}) probe thread {med(r[0] for r in rows) * 1e6:6.1f} us, "
            f"agent thread "
            f"{med(r[1] for r in rows) * 1e6:6.1f} us, sum {med(r[0] + r[1] for r in rows) * 1e6:6.1f} us a turn; "
            f"added {med(added) * 1e6:6.1f} us = {med(share) * 100:.2f}% of the turn "
            f"[{' '.join(f'{x * 100:.1f}' for x in share)}]; {med(r[2] for r in rows):.2f} passes, "
            f"{med(r[3] for r in rows):.2f} agent sends a turn ({med(r[4] for r in rows):.2f} send() calls); "
            f"in flush() {med(r[5] for r in rows) * 1e6:.1f} us a turn "
            f"({med(r[5] / b for r, b in zip(rows, base, strict=True)) * 100:.2f}%) "
            f"[{' '.join(f'{r[5] * 1e6:.0f}' for r in rows)}]"
        )
        probe_part = [r[5] + r[6] - h for r, h in zip(rows, hooks, strict=True)]
        print(
            f"{'':10s}  in publish() and hold() {med(r[6] for r in rows) * 1e6:.1f} us; all three less the "
            f"no-client blocks' (the timing wrappers) {med(probe_part) * 1e6:.1f} us a turn "
            f"({med(x / b for x, b in zip(probe_part, base, strict=True)) * 100:.2f}%) "
            f"[{' '.join(f'{x * 1e6:.0f}' for x in probe_part)}]"
        )
    rec = ", recording" if args.recording else ""
    traced = (
        "reads only each request's token count (--untraced)" if args.untraced else "reads each request's trace"
    )
    print(
        f"  ({args.rounds} rounds of 6 x {args.turns} turns{rec}, each turn followed by {args.pace:g} s of "
        f"sleep; the agent {traced})"
    )
    shutil.rmtree(rt.parent, ignore_errors=True)


# --flush-ab's readers, as its lines name them.
FLUSH_READERS = {
    "fold": "fold: the live source, as cp-inspect attach reads",
    "elide": "elide: the quiet elided ring reader, not cp-inspect attach's",
}
# Mode tags that only the elided ring reader has (how it waits, what it asks for) or that take apart the
# agent's paths to such a client (its short fill, publish's straight path to its ring, the elided stand-in,
# the quiet bracket, the hand-off of its sends): a mode with one of them reads the elided stream.
ELIDED_TAGS = frozenset(
    {"elide", "block", "poll", "loud", "socket", "general", "winding", "events", "bracketed", "handoff"}
)


def flush_reader(mode: str, default: str) -> str:
    """--flush-ab: which reader an attached mode attaches: `fold` (the live source on the fold stream,
    what cp-inspect attach reads) for a -fold mode, `elide` (the quiet elided ring reader)
    for a mode with an elided reader's tag (ELIDED_TAGS), else `default` (--flush-reader)."""
    tags = set(mode.split("-"))
    if "fold" in tags:
        return "fold"
    return "elide" if tags & ELIDED_TAGS else default


# The inspector's live source following an agent (as `cp-inspect attach` does), in its own process:
# it prints each new turn with the monotonic clock (one clock for the whole machine) when follow()
# handed it over, and its own CPU seconds when asked (a line on stdin).
LIVE_READER = """
import sys, threading, time
from inspector.sources import NewTurn
from inspector.sources.live import LiveSource
how = sys.argv[2] if len(sys.argv) > 2 else "live"
if how == "follow":  # `cp-inspect attach`'s source on a recording agent: it reads the recording
    from inspector.sources.live_recording import RecordingFollower, open_live
    src, why = open_live(int(sys.argv[1]), timeout=10)
    assert isinstance(src, RecordingFollower), why
else:  # the elided stream (live), or the fold stream `cp-inspect attach` reads of an agent that does not record
    src = LiveSource(int(sys.argv[1]), timeout=10, fold=how == "fold")
print("ATTACHED", flush=True)
def cpu():
    for line in sys.stdin:
        print("CPU", time.process_time(), flush=True)
threading.Thread(target=cpu, daemon=True).start()
for ev in src.follow():
    if isinstance(ev, NewTurn):
        print("TURN", ev.trace["turn"], time.monotonic(), flush=True)
"""


def follow_latency(args: argparse.Namespace) -> None:
    """The inspector's side of a paced agent (issue 15 item 4): how long after the agent's next_request
    returns (its turn event sent) the live source hands the turn to the app, and what the inspector's
    process spends, per turn while the agent works and per minute while it is idle. Readers: this tree's
    LiveSource (it polls: engine.probe.poll) and, with --reader-tree, another tree's (a base's, which
    waits on the socket), one Pipeline per round, blocks A B B A; turns spaced by --follow-latency
    seconds times a random factor in [0.5, 1.5] (so a turn lands anywhere in the reader's interval),
    then --idle seconds of no turns at all. Also the agent's thread inside the Pipeline's flushes."""
    import random

    rt = Path(tempfile.mkdtemp(prefix="cpb-", dir="/tmp")) / "contextpipe"
    # Reader name -> (its tree, how it reads: LIVE_READER's argument).
    readers = {f"this-{how}" if how != "live" else "this": (str(REPO), how) for how in args.latency_readers.split(",")}
    if args.reader_tree:
        readers["other"] = (args.reader_tree, "live")
    trees = {k: v[0] for k, v in readers.items()}
    rng = random.Random(15)
    lat: dict[str, list[float]] = {k: [] for k in trees}
    busy: dict[str, list[float]] = {k: [] for k in trees}  # reader CPU a turn
    idle: dict[str, list[float]] = {k: [] for k in trees}  # reader CPU a minute, idle agent
    inflush: dict[str, list[float]] = {k: [] for k in trees}
    for rnd in range(args.rounds):
        server, step, pipe = fresh_pipeline(args, rt, rnd)
        flush_cpu = [0.0]
        flush = server.flush

        def timed_flush(flush: Callable[[], None] = flush, flush_cpu: list[float] = flush_cpu) -> None:
            t0 = time.thread_time()
            flush()
            flush_cpu[0] += time.thread_time() - t0

        server.flush = timed_flush  # type: ignore[method-assign]
        sent: dict[int, float] = {}
        next_request = pipe.next_request

        def timed_request(next_request: Callable[[], Any] = next_request, sent: dict[int, float] = sent) -> Any:
            req = next_request()
            sent[int(req.trace["turn"])] = time.monotonic()
            return req

        pipe.next_request = timed_request
        run_block(step, 0, args.warmup)
        turn = args.warmup
        order = list(trees) if rnd % 2 == 0 else list(reversed(trees))
        for name in order + list(reversed(order)):
            how = readers[name][1]
            reader = subprocess.Popen(
                [sys.executable, "-c", LIVE_READER, str(os.getpid())] + ([how] if how != "live" else []),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                env={**os.environ, "PYTHONPATH": trees[name]},
                cwd=trees[name],  # (`-c` puts the working directory first on sys.path)
            )
            assert reader.stdin is not None
            assert read_line(reader, server) == "ATTACHED"
            if how == "follow":
                wait_for(lambda server=server: server._nfollowers == 1)  # type: ignore[misc]
            else:
                wait_for(lambda server=server: server.client_count == 1)  # type: ignore[misc]
            drain(server)
            time.sleep(1.5)  # its snapshot read, and the backfill a quiet agent brings about
            got: dict[int, float] = {}

            def reader_cpu(reader: subprocess.Popen[str] = reader, got: dict[int, float] = got) -> float:
                assert reader.stdin is not None
                reader.stdin.write("cpu\n")
                reader.stdin.flush()
                assert reader.stdout is not None
                while True:
                    # readline() alone: several lines may be in the pipe's buffer already, where a
                    # select() on the descriptor would not see them.
                    line = reader.stdout.readline().split()
                    if line[0] == "CPU":
                        return float(line[1])
                    got[int(line[1])] = float(line[2])

            c0, f0 = reader_cpu(), flush_cpu[0]
            first = turn
            for t in range(turn, turn + args.turns):
                step(t)
                time.sleep(args.pace * rng.uniform(0.5, 1.5))
            c1 = reader_cpu()
            time.sleep(args.idle)
            c2 = reader_cpu()
            inflush[name].append((flush_cpu[0] - f0) / args.turns)
            turn += args.turns
            busy[name].append((c1 - c0) / args.turns)
            idle[name].append((c2 - c1) / args.idle * 60)
            for tr, at in got.items():
                if tr in sent and tr >= first:
                    lat[name].append(at - sent[tr])
            reader.terminate()
            reader.wait(60)
            wait_for(lambda server=server: server.client_count == 0 and server._nfollowers == 0, 60)  # type: ignore[misc]
        pipe.close()
    med = statistics.median
    for name in trees:
        xs = sorted(lat[name])
        p95 = xs[min(len(xs) - 1, int(0.95 * len(xs)))] if xs else float("nan")
        print(
            f"reader {name:5s} ({trees[name]}): turn seen {med(xs) * 1e3:5.1f} ms p50, {p95 * 1e3:5.1f} ms p95, "
            f"{xs[-1] * 1e3:5.1f} ms max after next_request returned ({len(xs)} turns); its CPU "
            f"{med(busy[name]) * 1e6:6.0f} us a turn, idle {med(idle[name]) * 1e3:6.1f} ms a minute "
            f"[{' '.join(f'{x * 1e3:.0f}' for x in idle[name])}]; agent thread in flush() "
            f"{med(inflush[name]) * 1e6:5.1f} us a turn"
        )
    print(
        f"  ({args.rounds} rounds of {2 * len(trees)} x {args.turns} turns, spaced {args.pace:g} s x [0.5, 1.5], "
        f"then {args.idle:g} s idle)"
    )
    shutil.rmtree(rt.parent, ignore_errors=True)


# The inspector's live source attaching to a long-running agent (as `cp-inspect attach` does), in its own
# process: it prints when its first frame's data is in (the constructor read the hello and what it reads
# before showing anything; load_initial gives the turns the app draws first), with the newest turn there.
FIRST_READER = """
import sys, threading, time
t0 = time.monotonic()
from inspector.sources import HistoryFilled
from inspector.sources.live import LiveSource
src = LiveSource(int(sys.argv[1]), timeout=30)
initial = src.load_initial()
newest = max((t.get("turn", -1) for t in initial), default=-1)
print("FIRST", time.monotonic(), newest, len(initial), t0, flush=True)
def follow():
    filled = src._history_told  # (a tree without the tail: its history came before the first frame)
    if filled:
        print("FILLED", time.monotonic(), flush=True)
    for ev in src.follow():
        if isinstance(ev, HistoryFilled) and not filled:
            filled = True
            print("FILLED", time.monotonic(), flush=True)
threading.Thread(target=follow, daemon=True).start()
for line in sys.stdin:
    break
"""
# The inspector itself (the app on the live source, headless at 120x40, as `cp-inspect attach` runs it):
# from its process's spawn (SPAWNED_AT, wall clock) to its first complete frame, and the turn it shows.
APP_READER = """
import asyncio, os, sys, time
from inspector.app import InspectorApp
from inspector.sources.live import LiveSource
app = InspectorApp(LiveSource(int(sys.argv[1]), timeout=30))
async def main():
    async with app.run_test(size=(120, 40)):
        while not (app.index >= 0 and len(app.view.timeline)):
            await asyncio.sleep(0.001)
        drawn = asyncio.get_running_loop().create_future()
        app.call_after_refresh(lambda: drawn.done() or drawn.set_result(time.time()))
        at = await drawn
        print("APP", at - float(sys.argv[2]), app.view.timeline.traces[app.index]["turn"], len(app.view.timeline), flush=True)
        os._exit(0)
asyncio.run(main())
"""
# 50 attach/detach cycles in one process: connect (the elided stream, as the inspector asks), read the
# hello and a few events, close.
CHURN_READER = """
import sys
from pathlib import Path
from engine.probe.client import ProbeClient
for _ in range(int(sys.argv[3])):
    c = ProbeClient.connect(int(sys.argv[1]), timeout=30, runtime_dir=Path(sys.argv[2]), lean=True, elide=True, poll=True)
    for _ in range(5):
        if c.recv(0.05) is None:
            break
    c.close()
print("DONE", flush=True)
"""


def rss_kb() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def attach_long(args: argparse.Namespace) -> None:
    """A long-running agent (--attach-long N turns of history) that an inspector attaches to: one Pipeline
    (1-2 ms turns; --pace seconds of model call after each), N turns built first, unpaced. Then rounds of
    blocks none, attach, attach, none (ABBA): an attach block starts the inspector's live source in its own
    process (FIRST_READER) and runs paced turns until that source has its first frame and the probe has
    sent all it owes it (at least --turns); a none block runs as many turns with nobody attaching. Per
    block, each turn's wall and agent-thread CPU (max, p99, median), the probe thread's CPU, and the time
    from the reader's process start to its first frame (and the newest turn in it). Then the agent's RSS
    added by an attach, by --churn attach/detach cycles, and what a reader stopped (SIGSTOP) during its
    snapshot costs the agent (its turns and RSS over --turns paced turns)."""
    import signal

    rt = Path(tempfile.mkdtemp(prefix="cpb-", dir="/tmp")) / "contextpipe"
    server, step, pipe = fresh_pipeline(args, rt, 0)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    t0 = time.perf_counter()
    for t in range(args.attach_long):
        step(t)
    turn = args.attach_long
    print(
        f"history: {args.attach_long} turns built in {time.perf_counter() - t0:.1f} s; journal "
        f"{len(pipe.journal.events)} events ({len(getattr(pipe.journal.events, '_starts', ()))} spilled chunks); "
        f"agent RSS {rss_kb() / 1024:.0f} MB"
    )

    def paced(n: int, until: Callable[[], bool] | None = None) -> list[tuple[float, float]]:
        """n paced turns, and more until `until()` (for 600 s at most)."""
        out = []
        t = 0
        give_up = time.monotonic() + 600
        while t < n or (until is not None and not until() and time.monotonic() < give_up):
            w0, c0 = time.perf_counter(), time.thread_time()
            step(turn + len(out))
            out.append((time.perf_counter() - w0, time.thread_time() - c0))
            t += 1
            time.sleep(args.pace)
        return out

    def summary(rows: list[tuple[float, float]]) -> str:
        wall = sorted(r[0] for r in rows)
        cpu_ = sorted(r[1] for r in rows)
        p99 = lambda xs: xs[min(len(xs) - 1, int(0.99 * len(xs)))]  # noqa: E731
        return (
            f"wall max {wall[-1] * 1e3:6.2f} p99 {p99(wall) * 1e3:6.2f} med {statistics.median(wall) * 1e3:5.2f} ms; "
            f"thread CPU max {cpu_[-1] * 1e3:6.2f} p99 {p99(cpu_) * 1e3:6.2f} med {statistics.median(cpu_) * 1e3:5.2f} ms"
        )

    run_block(step, turn, 20)
    turn += 20
    blocks: dict[str, list[list[tuple[float, float]]]] = {"none": [], "attach": []}
    firsts: list[float] = []
    fills: list[float] = []  # to the whole history in the reader (the snapshot's, or fetched after the first frame)
    io: dict[str, float] = {"none": 0.0, "attach": 0.0}
    rss0 = rss_kb()
    for rnd in range(args.rounds):
        for mode in ("none", "attach", "attach", "none") if rnd % 2 == 0 else ("attach", "none", "none", "attach"):
            gc.collect()
            io0 = thread_cpu(server)
            if mode == "none":
                n = max(args.turns, max((len(b) for b in blocks["attach"]), default=args.turns))
                rows = paced(n)
            else:
                reader = subprocess.Popen(
                    [sys.executable, "-c", FIRST_READER, str(os.getpid())],
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=str(REPO),
                )
                started = time.monotonic()
                line: list[str] = []
                filled: list[str] = []
                assert reader.stdout is not None
                os.set_blocking(reader.stdout.fileno(), False)

                def done(
                    reader: subprocess.Popen[str] = reader, line: list[str] = line, filled: list[str] = filled
                ) -> bool:
                    assert reader.stdout is not None
                    while not filled:
                        got = reader.stdout.readline().split()
                        if not got:
                            break
                        (line if got[0] == "FIRST" else filled).extend(got)
                    return bool(filled) and all(s.snapshot_pending == 0 and s.buffered_bytes == 0 for s in server.stats())

                rows = paced(args.turns, done)
                fields = line
                first = float(fields[1]) - started if fields else float("nan")
                firsts.append(first)
                fills.append(float(filled[1]) - started if filled else float("nan"))
                print(f"  attach: first frame {first:.2f} s after the reader's start (newest turn {fields[2] if fields else '?'} "
                      f"of {turn + len(rows) - 1}, {fields[3] if fields else '?'} turns in it; python start to import "
                      f"{float(fields[4]) - started if fields else float('nan'):.2f} s)")
                assert reader.stdin is not None
                reader.stdin.write("\n")
                reader.stdin.flush()
                reader.wait(60)
                wait_for(lambda: server.client_count == 0, 60)
            io[mode] += thread_cpu(server) - io0
            turn += len(rows)
            blocks[mode].append(rows)
            print(f"  {mode:6s} {len(rows):4d} turns: {summary(rows)}; probe thread {(thread_cpu(server) - io0) * 1e3:.1f} ms")
    for mode in ("none", "attach"):
        rows = [r for b in blocks[mode] for r in b]
        print(f"{mode:6s} all {len(rows)} turns: {summary(rows)}; probe thread {io[mode] * 1e3:.0f} ms in all")
    if firsts:
        print(
            f"first frame: {' '.join(f'{x:.2f}' for x in firsts)} s (median {statistics.median(firsts):.2f}); "
            f"whole history in the reader: {' '.join(f'{x:.2f}' for x in fills)} s"
        )
    # The inspector's own first frame (the app on the live source), once.
    app = subprocess.Popen(
        [sys.executable, "-c", APP_READER, str(os.getpid()), str(time.time())],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=str(REPO),
    )
    assert app.stdout is not None
    os.set_blocking(app.stdout.fileno(), False)
    got_app: list[str] = []

    def app_done() -> bool:
        assert app.stdout is not None
        got_app.extend(app.stdout.readline().split())
        return bool(got_app) or app.poll() is not None

    rows = paced(1, app_done)
    turn += len(rows)
    app.wait(60)
    wait_for(lambda: server.client_count == 0, 60)
    print(
        f"inspector app (headless 120x40): first complete frame {float(got_app[1]):.2f} s after its spawn, showing "
        f"turn {got_app[2]} of {turn - 1} ({got_app[3]} turns in its timeline); agent meanwhile: {summary(rows)}"
        if got_app
        else "inspector app: no first frame"
    )
    gc.collect()
    rss1 = rss_kb()
    churn = subprocess.Popen(
        [sys.executable, "-c", CHURN_READER, str(os.getpid()), str(rt), str(args.churn)],
        stdout=subprocess.PIPE, text=True, env=env, cwd=str(REPO),
    )
    rows = paced(args.turns, lambda: churn.poll() is not None)
    turn += len(rows)
    wait_for(lambda: server.client_count == 0, 60)
    gc.collect()
    rss2 = rss_kb()
    print(f"churn ({args.churn} attach/detach): {len(rows)} turns meanwhile: {summary(rows)}")
    print(f"agent RSS: {rss0 / 1024:.1f} MB before the attach blocks, {rss1 / 1024:.1f} after them "
          f"(+{(rss1 - rss0) / 1024:.1f}), {rss2 / 1024:.1f} after the churn (+{(rss2 - rss1) / 1024:.1f})")
    # A reader stopped while it attaches.
    reader = subprocess.Popen(
        [sys.executable, "-c", FIRST_READER, str(os.getpid())],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=str(REPO),
    )
    wait_for(lambda: server.client_count == 1, 60)
    # Stopped while the agent still owes it most of its history (the snapshot, or the ranges it fetches
    # after its first frame).
    assert reader.stdout is not None
    select.select([reader.stdout], [], [], 0.3)
    reader.send_signal(signal.SIGSTOP)
    st = server.stats()
    rows = paced(max(args.turns, int(5 / max(args.pace, 0.01))))
    turn += len(rows)
    rss3 = rss_kb()
    st2 = server.stats()
    print(f"reader stopped (SIGSTOP) while attaching ({st[0].snapshot_pending if st else '?'} snapshot events to go, "
          f"{st2[0].snapshot_pending if st2 else '?'} after): {len(rows)} turns: {summary(rows)}; agent RSS "
          f"{rss3 / 1024:.1f} MB (+{(rss3 - rss2) / 1024:.1f}), client buffer {st2[0].buffered_bytes if st2 else '?'} B")
    reader.send_signal(signal.SIGCONT)
    reader.kill()
    reader.wait(60)
    pipe.close()
    print(f"  ({args.rounds} rounds of 4 blocks, >= {args.turns} turns each, {args.pace:g} s of model call after each turn; "
          f"window {args.window}; CPU figures: the agent's thread clock)")
    shutil.rmtree(rt.parent, ignore_errors=True)


def profile(args: argparse.Namespace) -> None:
    """The probe thread on a realistic turn, part by part (see the module docstring)."""
    import engine.probe.elided_fill as elided_fill
    import engine.probe.queues as queues

    rt = Path(tempfile.mkdtemp(prefix="cpb-", dir="/tmp")) / "contextpipe"
    clock = time.thread_time_ns
    pair = statistics.median(
        [-(clock() - clock()) for _ in range(500)]  # one clock read, as the wrappers below make two
    )
    parts: dict[str, list[int]] = {}  # part -> [ns, calls] while encoding as usual
    real = queues.pack_payload_fast
    table: dict[str, bytes | None] = {}

    def stand_in(ev: dict[str, Any]) -> bytes | None:
        # The same bytes per kind as the real encoder (from its first event of that kind), no encoding;
        # a lean reader's batch frames by kind and number of events (about the same size).
        k = ev.get("k", "")
        if k == "batch":
            k = f"batch/{len(ev['events'])}"
        if k not in table:
            table[k] = real(ev)
        return table[k]

    def timed(obj: Any, name: str, key: str) -> None:
        f = getattr(obj, name)

        def wrapper(*a: Any, **kw: Any) -> Any:
            t0 = clock()
            try:
                return f(*a, **kw)
            finally:
                acc = parts.setdefault(key, [0, 0])
                acc[0] += clock() - t0 - pair
                acc[1] += 1

        setattr(obj, name, wrapper)

    # Per-turn steps that are module functions: the summaries and the encoder (the latter only while
    # encoding as usual; the stand-in's table look-ups are not timed).
    # (Each where its callers read it: the lean stream's fill in queues, the elided and fold streams' in
    # elided_fill.)
    summary_fns = (queues.summary_event, elided_fill.summary_event)
    timed(queues, "summary_event", "  summary_event")
    timed(elided_fill, "summary_event", "  summary_event")
    kept_fn = elided_fill.kept
    timed(elided_fill, "kept", "  kept (elided stream: which events go)")
    # A recording agent's turns, spliced whole into the elided stream's batches (engine.probe.splice).
    splice_fns = (elided_fill.batch_payload, elided_fill.payload_of)
    timed(elided_fill, "batch_payload", "  batch_payload (splicing)")
    timed(elided_fill, "payload_of", "  payload_of (a frame's payload)")

    class _Enc:
        pack = staticmethod(real)

    timed(_Enc, "pack", "  encoder (pack_payload_fast)")
    encoder = _Enc.pack
    per: dict[str, list[tuple[float, float]]] = {"encoding": [], "stand-in": []}
    turns_counted = 0
    for rnd in range(args.rounds):
        server, step, pipe = fresh_pipeline(args, rt, rnd)
        run_block(step, 0, args.warmup)
        reader = attach_reader(server, rt)
        for name in ("_drain_wake", "_service", "_fill", "_budget", "_rest", "_accept", "_on_readable"):
            timed(server, name, name)
        # The lean stream's steps inside _fill (each also inside _fill's figure).
        for name in ("_absorb", "_newest_turn", "_append_run", "_fill_fetch", "_fill_elided", "_fill_framed", "_emit"):
            timed(server, name, f"  {name}")
        assert server._sel is not None
        timed(server._sel, "select", "select (sleeping, waking)")
        for c in server._clients.values():
            sock = c.sock

            class Timed:  # the client's socket, its send() timed
                def __init__(self, inner: Any) -> None:
                    self._inner = inner

                def __getattr__(self, name: str) -> Any:
                    return getattr(self._inner, name)

            c.sock = Timed(sock)  # type: ignore[assignment]
            timed(c.sock, "send", "send")
        turn = args.warmup
        sums = {"encoding": [0.0, 0.0], "stand-in": [0.0, 0.0]}
        a, b = ("encoding", "stand-in") if rnd % 2 == 0 else ("stand-in", "encoding")
        for mode in (a, b, b, a):
            queues.pack_payload_fast = encoder if mode == "encoding" else stand_in  # type: ignore[assignment]
            drain(server)
            gc.collect()
            saved = {k: list(v) for k, v in parts.items()}
            io0, agent = thread_cpu(server), 0.0
            for t in range(turn, turn + args.turns):
                a0 = time.thread_time()
                step(t)
                agent += time.thread_time() - a0
                if args.pace:
                    time.sleep(args.pace)  # the agent waits on its model (--pace)
            drain(server)
            if args.pace:
                time.sleep(0.5)  # the burst's end (its last wait) belongs to this block
            sums[mode][0] += thread_cpu(server) - io0
            sums[mode][1] += agent
            if mode != "encoding":  # the part-by-part profile is of the real thing only
                parts.clear()
                parts.update(saved)
            else:
                turns_counted += args.turns
            turn += args.turns
        queues.pack_payload_fast = real
        stop_subject("reader", reader, server)
        pipe.close()
        for mode in sums:
            per[mode].append((sums[mode][0] / (2 * args.turns), sums[mode][1] / (2 * args.turns)))
    queues.summary_event, elided_fill.summary_event = summary_fns  # type: ignore[assignment]
    elided_fill.kept = kept_fn  # type: ignore[assignment]
    elided_fill.batch_payload, elided_fill.payload_of = splice_fns  # type: ignore[assignment]
    med = statistics.median
    enc = [x[0] for x in per["encoding"]]
    floor = [x[0] for x in per["stand-in"]]
    agent_turn = med(x[1] for x in per["encoding"])
    print(
        f"probe thread per turn (its clock; median of {args.rounds} rounds, {args.turns}x4 turns each, "
        f"agent thread {agent_turn * 1e6:.0f} us a turn):"
    )
    print(
        f"  encoding as usual {med(enc) * 1e6:.1f} us ({med(enc) / agent_turn * 100:.2f}% of a turn) "
        f"[{' '.join(f'{x * 1e6:.0f}' for x in enc)}]"
    )
    print(
        f"  stand-in encoder  {med(floor) * 1e6:.1f} us ({med(floor) / agent_turn * 100:.2f}%) "
        f"[{' '.join(f'{x * 1e6:.0f}' for x in floor)}]: the rest is msgpack-encoding"
    )
    print(f"parts, encoding as usual (each wrapped call's ~{pair / 1e3:.1f} us of clock reads subtracted):")
    for name, (ns, calls) in sorted(parts.items(), key=lambda kv: -kv[1][0]):
        print(
            f"  {name:28s} {ns / turns_counted / 1e3:6.2f} us/turn  {calls / turns_counted:6.3f} calls/turn  "
            f"{ns / max(calls, 1) / 1e3:8.1f} us/call"
        )
    print("  (_fill includes encoding; _service includes _fill and send; a pass is one _budget call)")
    shutil.rmtree(rt.parent, ignore_errors=True)


def floor(args: argparse.Namespace) -> None:
    """The elided stream's per-turn work, hot and cold (issue 15 item 4): a real Pipeline's published
    events (no probe client: they are collected as the Pipeline hands them to publish), then, --rounds
    times for each of 8 runs of --turns turns, the steps `_fill_elided` takes for one pass over them
    (which events go, the summaries, the batch encoding) timed on this thread's clock, once right after
    writing a 64 MB buffer (what the I/O thread meets: the agent has run ~--turns turns since it built
    the events) and once again at once (the same work in cache). The gap is the floor of touching the
    events cold, wherever that is done."""
    import engine.probe.queues as queues
    from engine.probe.elide import kept

    rt = Path(tempfile.mkdtemp(prefix="cpb-", dir="/tmp")) / "contextpipe"
    server, step, pipe = fresh_pipeline(args, rt, 0)
    seen: list[dict[str, Any]] = []
    server.publish = lambda ev, frame=None: seen.append(ev)  # type: ignore[method-assign,assignment,misc]
    run_block(step, 0, args.warmup)
    seen.clear()
    run_block(step, args.warmup, 8 * args.turns)
    pipe.close()
    junk = bytearray(64 * 1024 * 1024)
    clock = time.thread_time_ns
    n = len(seen) // 8
    names = ("which events go (kept)", "summaries", "batch encoding")
    res: dict[tuple[str, str], list[float]] = {}

    def one_pass(evs: list[dict[str, Any]]) -> list[int]:
        t = [clock()]
        idx = kept(evs) or []
        out: list[Any] = [evs[i] for i in idx]
        t.append(clock())
        turns = [j for j, ev in enumerate(out) if ev.get("k") == "turn"]
        for j in turns[:-1]:
            out[j] = queues.summary_event(out[j])
        t.append(clock())
        queues.pack_payload_fast({"k": "batch", "events": out, "at": idx, "end": len(evs)})
        t.append(clock())
        return [b - a for a, b in zip(t[:-1], t[1:], strict=True)]

    for _ in range(args.rounds):
        for k in range(8):
            evs = seen[k * n : (k + 1) * n]
            junk[::64] = bytes(len(junk) // 64)  # evict the caches
            for state in ("cold", "hot"):
                for name, ns in zip(names, one_pass(evs), strict=True):
                    res.setdefault((name, state), []).append(ns / args.turns / 1e3)
    med = statistics.median
    print(f"the elided fill's per-turn work, us a turn (median of {8 * args.rounds} passes of {args.turns} turns):")
    for name in names:
        print(f"  {name:24s} cold {med(res[(name, 'cold')]):5.2f}  hot {med(res[(name, 'hot')]):5.2f}")
    cold = sum(med(res[(x, "cold")]) for x in names)
    hot = sum(med(res[(x, "hot")]) for x in names)
    print(f"  {'sum':24s} cold {cold:5.2f}  hot {hot:5.2f}")
    shutil.rmtree(rt.parent, ignore_errors=True)


def ship_floor(args: argparse.Namespace) -> None:
    """The least a paced Python turn can pay to ship its trace to another process (issue 15 item 4):
    the benchmark's paced Pipeline turn (the probe serving, no client, so the trace is built as when
    observed), each turn followed by --ship-floor seconds of sleep (a model call). Right after the
    turn's record_usage (where the real probe sends: the `turn` event is journaled there), one of these
    runs, on this thread's clock, in turn (each mode the same number of turns, over the same history):
    `empty` (the two clock reads alone: subtracted from the others), `flag` (one call that only tests
    an attribute), `encode` (msgpack of the journal's `turn` event: the trace), `copy` (those bytes,
    encoded just before and so in cache, copied into a sealed, populated memfd mapping with
    `mmap.write`, as the ring does), `whole` (the whole minimal path in one function: test a flag,
    encode the batch holding the turn, crc32 and header, write both into the mapping, publish the
    total). The turn (agent thread, no probe client) is the share's base. No probe code runs here
    beyond the Pipeline's hooks with no client: this is the floor below any probe design in Python."""
    import mmap as mmap_mod
    import struct
    import types
    import zlib

    from engine.probe.ring import RING_HEADER, WRITTEN_AT, RingWriter
    from engine.recording.frames import HEADER, pack_payload_fast

    ring_u64 = struct.Struct("<Q")

    rt = Path(tempfile.mkdtemp(prefix="cpb-", dir="/tmp")) / "contextpipe"
    modes = ("empty", "flag", "encode", "copy", "whole")
    res: dict[str, list[float]] = {m: [] for m in modes}
    turns: list[float] = []
    clock = time.thread_time
    for rnd in range(args.rounds):
        server, step, pipe = fresh_pipeline(args, rt, rnd)
        run_block(step, 0, args.warmup)
        ring = RingWriter()
        mm = ring._mm  # the same sealed, populated mapping the probe writes
        journal = pipe.journal
        holder = types.SimpleNamespace(on=False)

        def flag(holder: Any = holder) -> bool:
            return bool(holder.on)

        def whole(
            ev: dict[str, Any], pos: int, mm: mmap_mod.mmap = mm, ring: RingWriter = ring, holder: Any = holder
        ) -> None:
            if holder.on:
                return
            payload = pack_payload_fast({"k": "batch", "events": [ev], "at": [pos], "end": pos + 1})
            assert payload is not None
            header = HEADER.pack(len(payload), zlib.crc32(payload))
            if len(header) + len(payload) >= ring._room:  # a wrap: start the data again (rare)
                mm.seek(RING_HEADER)
                ring._room = ring.size
            mm.write(header)
            mm.write(payload)
            ring._room -= len(header) + len(payload)
            ring._written += len(header) + len(payload)
            ring_u64.pack_into(mm, WRITTEN_AT, ring._written)

        turn = args.warmup
        order = list(modes) if rnd % 2 == 0 else list(reversed(modes))
        for k in range(args.turns * len(modes)):
            mode = order[k % len(modes)]
            time.sleep(args.pace)
            a0 = clock()
            req = pipe.next_request()
            pipe.record_usage({"input_tokens": int(req.trace["final_tokens"]), "output_tokens": 80})
            ev = journal.events[-1]
            data = b""
            if mode == "copy":
                data = pack_payload_fast(ev) or b""
                if len(data) >= ring._room:
                    mm.seek(RING_HEADER)
                    ring._room = ring.size
            t0 = clock()
            if mode == "flag":
                flag()
            elif mode == "encode":
                pack_payload_fast(ev)
            elif mode == "copy":
                mm.write(data)
            elif mode == "whole":
                whole(ev, len(journal.events) - 1)
            t1 = clock()
            if mode == "copy":
                ring._room -= len(data)
            path = str(REPO / "engine" / "pipeline.py")
            calls = pipe.assistant("Reading.", [{"id": f"c{turn}", "name": "read_file", "arguments": json.dumps({"path": path})}])
            pipe.tool_result(calls[0].id, f"turn {turn}\n" + "x" * (args.result_kb * 1024))
            a1 = clock()
            res[mode].append(t1 - t0)
            if mode == "empty":
                turns.append(a1 - a0)
            turn += 1
        assert ev.get("k") == "turn", ev.get("k")
        size = len(pack_payload_fast(ev) or b"")
        ring.close()
        pipe.close()
    med = statistics.median
    empty = med(res["empty"])
    base = med(turns)
    print(
        f"the floor of shipping a paced turn's trace from Python ({args.rounds} rounds x {args.turns} turns a mode, "
        f"each after {args.pace:g} s of sleep; turn {base * 1e6:.0f} us on the agent's thread, no client; "
        f"trace event {size} bytes of msgpack):"
    )
    for mode in modes:
        xs = res[mode]
        m = med(xs)
        net = m - empty if mode != "empty" else m
        q = sorted(xs)
        print(
            f"  {mode:6s}: {m * 1e6:6.1f} us measured (p25 {q[len(q) // 4] * 1e6:5.1f}, p75 {q[3 * len(q) // 4] * 1e6:5.1f}), "
            f"{net * 1e6:6.1f} us{' less the clock reads' if mode != 'empty' else ' (the clock reads)'} "
            f"= {net / base * 100:5.2f}% of the turn"
        )
    shutil.rmtree(rt.parent, ignore_errors=True)


def publish_split(args: argparse.Namespace) -> None:
    """Where the probe's part of a paced agent's thread goes, piece by piece (see the module docstring).

    Per block, each publish() on the agent's thread clock by the event's kind; the `none` blocks' figures
    are the timing wrapper's and publish()'s no-client test (one attribute), so reader less none is what
    the attached reader makes each publish do. Inside the turn's straight path (`_ring_now`), the calls it
    makes are wrapped on a wall clock (the thread runs throughout; a vDSO read, ~0.1 us, where the
    thread clock is a system call): the ormsgpack encode (`pack_payload_fast`), the frame header
    (`HEADER.pack`), taking the waiting events (`_take_pending`) and the ring's write (`write_frame`);
    the rest of `_ring_now`'s own time is its checks, the pass lock and the bookkeeping."""
    import engine.probe.agent_send as agent_send
    import engine.probe.fold_send as fold_send
    from engine.probe.ring import RingWriter

    rt = Path(tempfile.mkdtemp(prefix="cpb-", dir="/tmp")) / "contextpipe"
    fold = args.split_reader == "fold"
    wall = time.perf_counter_ns
    pair = statistics.median([-(wall() - wall()) for _ in range(1000)])
    pieces: dict[str, list[float]] = {}  # piece -> ns of each call in the reader blocks' timed turns
    timing = [False]  # (not the turns that settle a block)

    def piece(key: str, f: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*a: Any, **kw: Any) -> Any:
            t0 = wall()
            try:
                return f(*a, **kw)
            finally:
                if timing[0]:
                    pieces.setdefault(key, []).append(wall() - t0 - pair)

        return wrapper

    class _Header:  # agent_send's HEADER with its pack() timed
        def __init__(self, inner: Any) -> None:
            self.pack = piece("header (HEADER.pack)", inner.pack)
            self.size = inner.size

    real = (agent_send.pack_payload_fast, agent_send.HEADER, RingWriter.write_frame)
    # --split-marks: the fold reader's blocks, one with every held event marked in its ring (`marks`:
    # mark_gap 0, as before probe38), one marked once a burst (`reader`), in turn by rounds.
    marks = bool(getattr(args, "split_marks", False))
    # --split-header: likewise, one with the straight path's frame headers made by HEADER.pack (`marks`:
    # header_struct, as before probe41), one as one int's bytes (its header piece then not wrapped: the
    # wrapper's call would fall on one side only).
    header = bool(getattr(args, "split_header", False))
    before = (
        ("the frame header by HEADER.pack (before)", "one int's bytes (now)")
        if header
        else ("every held event marked (mark_gap 0, before)", "once a burst (now)")
    )
    marks = marks or header
    kinds: dict[str, dict[str, list[float]]] = {"none": {}, "reader": {}, "marks": {}}  # mode -> kind -> [us a turn]
    agent: dict[str, list[float]] = {"none": [], "reader": [], "marks": []}
    for rnd in range(args.rounds):
        server, step, pipe = fresh_pipeline(args, rt, rnd)
        if args.split_sender:  # the turn handed to the hand-off thread (engine.probe.handoff)
            server.handoff = True
            server._start_handoff()
        cur: dict[str, float] = {}
        publish = server.publish

        def timed_publish(
            ev: Any, frame: Any = None, publish: Callable[..., None] = publish, cur: dict[str, float] = cur
        ) -> None:
            t0 = time.thread_time_ns()
            publish(ev, frame)
            k = ev.get("k") if type(ev) is dict else "?"
            cur[k] = cur.get(k, 0.0) + time.thread_time_ns() - t0

        server.publish = timed_publish  # type: ignore[method-assign]
        run_block(step, 0, args.warmup)
        turn = args.warmup
        sums: dict[str, dict[str, float]] = {"none": {}, "reader": {}, "marks": {}}
        spent = {"none": 0.0, "reader": 0.0, "marks": 0.0}
        middle = (("marks", "reader") if rnd % 2 == 0 else ("reader", "marks")) if marks else ("reader", "reader")
        for mode in ("none", *middle, "none"):
            reader = None if mode == "none" else attach_fold_reader(server) if fold else attach_reader(server, rt)
            gap = server.mark_gap
            if mode == "marks" and header:
                server.header_struct = True
            elif mode == "marks":
                server.mark_gap = 0.0
            if reader is not None:
                agent_send.pack_payload_fast = piece("encode (pack_payload_fast)", real[0])  # type: ignore[assignment]
                if not header:  # (read by _ring_now, and by _fold_now in its own module)
                    agent_send.HEADER = fold_send.HEADER = _Header(real[1])  # type: ignore[assignment]
                RingWriter.write_frame = piece("ring write (write_frame)", real[2])  # type: ignore[method-assign]
                server._take_pending = piece("take (_take_pending)", server._take_pending)  # type: ignore[method-assign]
                server._ring_now = piece("_ring_now, all of it", server._ring_now)  # type: ignore[method-assign]
                server._fold_now = piece("_fold_now, all of it", server._fold_now)  # type: ignore[method-assign]
            for t in range(turn, turn + 2):  # the attach's after-effect and the wrappers' first calls
                step(t)
                time.sleep(args.pace)
            turn += 2
            fast = getattr(server, "_fold_pack", None)
            if reader is not None and fast is not None:  # (_fold_now's encoder, named for it by now)
                server._fold_pack = (piece("encode (ormsgpack packb)", fast[0]), fast[1])
            drain(server)
            gc.collect()
            cur.clear()
            timing[0] = True
            for t in range(turn, turn + args.turns):
                a0 = time.thread_time()
                step(t)
                spent[mode] += time.thread_time() - a0
                time.sleep(args.pace)
            timing[0] = False
            turn += args.turns
            for k, v in cur.items():
                sums[mode][k] = sums[mode].get(k, 0.0) + v
            server.mark_gap = gap
            server.header_struct = False
            if reader is not None:
                agent_send.pack_payload_fast, agent_send.HEADER, RingWriter.write_frame = real  # type: ignore[assignment, method-assign]
                fold_send.HEADER = real[1]
                del server._take_pending, server._ring_now, server._fold_now  # type: ignore[method-assign]
                if fast is not None:
                    server._fold_pack = fast
                stop_subject("foldreader" if fold else "reader", reader, server)
        pipe.close()
        for mode in sums:
            blocks = (1 if mode != "none" else 2) if marks else 2
            if mode == "marks" and not marks:
                continue
            agent[mode].append(spent[mode] / (blocks * args.turns))
            for k, v in sums[mode].items():
                kinds[mode].setdefault(k, []).append(v / (blocks * args.turns) / 1e3)
    med = statistics.median
    turn_us = med(agent["none"]) * 1e6
    print(
        f"publish() on the agent's thread a turn, by kind (us, thread clock; median of {args.rounds} rounds, "
        f"2 x {args.turns} turns each; agent turn {turn_us:.0f} us with no client, {med(agent['reader']) * 1e6:.0f} attached):"
    )
    names = sorted(set(kinds["reader"]) | set(kinds["none"]), key=lambda k: -med(kinds["reader"].get(k, [0.0])))
    tot_r = tot_n = 0.0
    for k in names:
        r, n = med(kinds["reader"].get(k, [0.0])), med(kinds["none"].get(k, [0.0]))
        tot_r, tot_n = tot_r + r, tot_n + n
        print(f"  {k:14s} reader {r:6.1f}  none {n:5.1f}  added {r - n:6.1f}")
    print(
        f"  {'all':14s} reader {tot_r:6.1f}  none {tot_n:5.1f}  added {tot_r - tot_n:6.1f} "
        f"({(tot_r - tot_n) / turn_us * 100:.2f}% of the turn)"
    )
    if marks:
        print(f"{before[0]} against {before[1]}, us a turn by kind:")
        tot_m = 0.0
        for k in names:
            m, r = med(kinds["marks"].get(k, [0.0])), med(kinds["reader"].get(k, [0.0]))
            tot_m += m
            print(f"  {k:14s} before {m:6.1f}  now {r:6.1f}  now - before {r - m:6.1f}")
        diffs = [
            sum(kinds["reader"][k][i] for k in kinds["reader"]) - sum(kinds["marks"][k][i] for k in kinds["marks"])
            for i in range(args.rounds)
        ]
        print(
            f"  {'all':14s} before {tot_m:6.1f}  now {tot_r:6.1f}  now - before {tot_r - tot_m:6.1f} "
            f"(by round: {' '.join(f'{d:+.1f}' for d in diffs)})"
        )
    counted = 2 * args.turns * args.rounds
    inner = 0.0
    straight = "_fold_now" if fold else "_ring_now"
    whole = med(pieces.get(f"{straight}, all of it", [0.0]))
    print(
        f"inside the straight path ({straight}), us a call, median (wall clock: a call the scheduler cut into "
        f"is the tail the median leaves out; {pair:.0f} ns of clock reads subtracted a call):"
    )
    for k, ns in sorted(pieces.items(), key=lambda kv: -med(kv[1])):
        if not k.startswith("_"):
            inner += med(ns)
        print(f"  {k:28s} {med(ns) / 1e3:6.1f}  ({len(ns) / counted:.2f} calls a turn)")
    print(f"  {'rest (checks, lock, bookkeeping)':28s} {(whole - inner) / 1e3:6.1f}")
    who = "the live source on the fold stream" if fold else "the quiet elided ring reader"
    print(f"  ({args.rounds} rounds, each turn followed by {args.pace:g} s of sleep; {who})")
    shutil.rmtree(rt.parent, ignore_errors=True)


def publish_cost_blocks(args: argparse.Namespace) -> None:
    """`ProbeServer.publish`'s own cost on the agent's thread, per turn of a real Pipeline, as an elided
    reader would have it: a lean client is counted but none is attached and the wake-up flag is held set,
    so the I/O thread sleeps throughout and nothing else runs while publish does (with a reader attached
    the I/O thread takes the GIL inside publish now and then, and a clock around it times that too).
    Each call is timed with perf_counter (one clock pair, measured, is subtracted per call); the queue is
    emptied between blocks. Compare trees by running each one's own script."""
    rt = Path(tempfile.mkdtemp(prefix="cpb-", dir="/tmp")) / "contextpipe"
    clock = time.perf_counter_ns
    pair = int(statistics.median([-(clock() - clock()) for _ in range(1000)]))
    per_turn: list[float] = []
    for rnd in range(args.rounds):
        server, step, pipe = fresh_pipeline(args, rt, rnd)
        run_block(step, 0, args.warmup)
        real = server.publish
        spent = [0]

        def timed(
            ev: dict[str, Any], frame: bytes | None = None, real: Any = real, spent: list[int] = spent
        ) -> None:
            t0 = clock()
            real(ev, frame)
            spent[0] += clock() - t0 - pair

        server.publish = timed  # type: ignore[method-assign,assignment]
        server._nclients, server._nlean, server._wake_pending = 1, 1, True
        turn = args.warmup
        for _ in range(4):
            server._pending.clear()
            gc.collect()
            spent[0] = 0
            run_block(step, turn, args.turns)
            per_turn.append(spent[0] / args.turns)
            turn += args.turns
        server._nclients, server._nlean = 0, 0
        server._pending.clear()
        server.publish = real  # type: ignore[method-assign]
        pipe.close()
    print(
        f"publish() on the agent's thread: median {statistics.median(per_turn) / 1e3:.2f} us a turn "
        f"[{' '.join(f'{x / 1e3:.1f}' for x in per_turn)}] ({args.rounds} rounds of 4 x {args.turns} turns; "
        f"a clock pair of {pair} ns subtracted per call)"
    )
    shutil.rmtree(rt.parent, ignore_errors=True)


def each_subject(run: Callable[[argparse.Namespace, str], None], args: argparse.Namespace, subjects: str) -> None:
    """--twin, --paired: `run` for each of the comma-separated subjects, in turn."""
    for subject in subjects.split(","):
        run(args, subject)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--turns", type=int, default=300, help="turns per block")
    ap.add_argument("--rounds", type=int, default=15, help="none/attached block pairs")
    ap.add_argument("--work-kb", type=int, default=30, help="size of the request serialized per turn")
    ap.add_argument("--publishes", type=int, default=20, help="journal events per turn")
    ap.add_argument(
        "--recording",
        action="store_true",
        help="the agent also records: it encodes each event (in both configurations) and passes the frame",
    )
    ap.add_argument("--engine", action="store_true", help="time a real engine Pipeline turn instead")
    ap.add_argument("--window", type=int, default=16_000, help="--engine: context window (tokens)")
    ap.add_argument("--warmup", type=int, default=None, help="turns before measuring (default: one block)")
    ap.add_argument("--result-kb", type=int, default=1, help="--paired: tool result size per turn (KB)")
    ap.add_argument(
        "--paired",
        default=None,
        help="comma-separated subjects: reader (the quiet elided stream, as the inspector reads), mute (such a "
        "reader that reads only its snapshot: the agent's side alone), leanreader, fullreader (every turn "
        "whole, the stream before the lean one), none (A/A: the noise floor), or attack modes "
        "(ping, trickle, churn, readers, mix)",
    )
    ap.add_argument(
        "--twin",
        default=None,
        help="comma-separated subjects (none: the A/A; reader; foldreader: the live source on the fold stream; foldmute: that reader attached then stopped; mute; foldpath: a fold reader on both, "
        "A's turns by the general send path, B's by publish's straight path; foldcoalesce: a fold reader on both, A's every "
        "turn sent at its close, B's closes coalesced; foldlinger: a fold reader on both, A's turns sent on the agent's "
        "thread, B's by the I/O thread's lingering burst; foldsender: likewise, B's by the probe's hand-off thread; foldmarks: a fold reader on both, A's every held event marked in its ring, B's once a burst; foldview: a fold reader on both, A's ring header stored by struct.pack_into, B's through the ring's u64 views; foldfloor: as foldreader, B's turns sent by the floor of a send from publish, floor_publish; foldbypass: a fold reader on both, B's held kinds put in the probe's queue by its journal, bypass_append; foldappends: foldbypass's A/A; followreader (with --recording): "
        "the recording follower, open_live; followvsfold (with --recording): the fold reader on A, the follower on B): what each adds to a turn, two Pipelines' "
        "turns taken in turn, the subject attached to one (see twin() and above)",
    )
    ap.add_argument("--pairs", type=int, default=150, help="--twin: timed pairs of turns a round")
    ap.add_argument(
        "--untraced",
        action="store_true",
        help="--twin, --paired, --flush-ab, --publish-split: the agent reads only each request's token count, "
        "not its trace (so a turn "
        "nothing observes builds no trace, and an attached reader's cost includes building it)",
    )
    ap.add_argument(
        "--encode-ab",
        default=None,
        help="io,agent or io,discard: where live events are encoded with a reader attached (io,io: the A/A)",
    )
    ap.add_argument("--profile", action="store_true", help="where the probe thread's time goes (see above)")
    ap.add_argument(
        "--pace", type=float, default=0.0, help="--profile, --paired: sleep after each turn (a model call)"
    )
    ap.add_argument(
        "--model-wait",
        type=float,
        default=0.0,
        help="--twin: sleep inside each turn between its request and its usage (the model call; --pace is then "
        "what follows the turn: the agent running its tool)",
    )
    ap.add_argument("--block", type=int, default=10, help="--paired: turns timed per block (octets of eight blocks)")
    ap.add_argument("--settle", type=int, default=10, help="--paired: turns before each block's, timed apart")
    ap.add_argument("--seed", type=int, default=None, help="--paired: the quads' order (default: random)")
    ap.add_argument("--lean-ab", action="store_true", help="lean stream against every turn whole (see above)")
    ap.add_argument("--floor", action="store_true", help="the elided fill's per-turn work, hot and cold (see above)")
    ap.add_argument(
        "--ship-floor",
        type=float,
        default=None,
        metavar="SECONDS",
        help="turns each followed by this much sleep: the least shipping the turn's trace can cost (see above)",
    )
    ap.add_argument("--publish-cost", action="store_true", help="publish()'s own cost on the agent's thread (see above)")
    ap.add_argument(
        "--split-sender",
        action="store_true",
        help="--publish-split: the straight path's turn handed to the probe's hand-off thread (engine.probe.handoff); "
        "its pieces are then that thread's, on the wall clock",
    )
    ap.add_argument(
        "--publish-split",
        type=float,
        default=None,
        metavar="SECONDS",
        help="turns each followed by this much sleep: the probe's part of the agent's thread by publish kind and "
        "straight-path piece (see above)",
    )
    ap.add_argument(
        "--split-marks",
        action="store_true",
        help="--publish-split: the reader's two blocks a round, one with every held event marked in the fold ring "
        "(as before probe38), one marked once a burst (ring.MARK_GAP), their order alternating by rounds",
    )
    ap.add_argument(
        "--split-header",
        action="store_true",
        help="--publish-split: the reader's two blocks a round, one with the straight path's frame headers made by "
        "HEADER.pack (as before probe41), one as one int's bytes, their order alternating by rounds",
    )
    ap.add_argument(
        "--split-reader",
        choices=("elide", "fold"),
        default="elide",
        help="--publish-split: the quiet elided ring reader (as --flush-ab) or the live source on the fold stream "
        "(as cp-inspect attach; with --untraced the agent builds no trace for it)",
    )
    ap.add_argument(
        "--pace-ab",
        type=float,
        default=None,
        metavar="SECONDS",
        help="turns each followed by this much sleep (a model call): how a burst ended before against now",
    )
    ap.add_argument(
        "--flush-ab",
        type=float,
        default=None,
        metavar="SECONDS",
        help="turns each followed by this much sleep: sent by the agent's thread against the I/O thread's",
    )
    ap.add_argument(
        "--flush-reader",
        choices=("fold", "elide"),
        default="fold",
        help="--flush-ab: the reader of a mode with no reader tag: fold (the live source on the fold stream, "
        "as cp-inspect attach reads; the default) or elide (the quiet elided ring reader, --flush-ab's "
        "before the forty-second session)",
    )
    ap.add_argument(
        "--flush-modes",
        default="agent,agent-elide",
        help="--flush-ab: the two attached modes, agent (sent by the agent's thread) or io (by the I/O "
        "thread), each optionally -block or -poll (how the reader waits; else --reader-wait) and -loud "
        "(the reader does not ask for quiet: every call's batch is sent, as before) or -socket (a quiet reader "
        "that does not ask for the shared-memory ring: its live frames are sent on the socket) or -general (the "
        "agent's thread fills a ring client by the general path, not its short one); and, to take apart what "
        "probe12 changed: -winding (publish's straight path to a ring client off: the calls and checks of the "
        "general path's short one), -events (elided events wait in the queue themselves, not a stand-in each), "
        "-bracketed (every Pipeline call calls hold() and flush(), as before publish served quiet clients), "
        "-handoff (nothing sent on the agent's thread: each event to send wakes the I/O thread, which "
        "encodes it there), -linger (the turns handed to the I/O thread's lingering burst, several a pass: "
        "ProbeServer.quiet_linger = LINGER), -sender (the turn handed to the probe's hand-off thread, woken by a "
        "lock: engine.probe.handoff), -fold (the reader is the inspector's live source on the fold stream, as "
        "cp-inspect attach reads), -elide (the quiet elided ring reader; also with any of -block, -poll, "
        "-loud, -socket, -general, -winding, -events, -bracketed, -handoff; else --flush-reader's). Default: "
        "agent,agent-elide (the fold reader, then the elided one)",
    )
    ap.add_argument(
        "--follow-latency",
        type=float,
        default=None,
        metavar="SECONDS",
        help="turns spaced about this much: when the live source sees each, and the inspector's CPU",
    )
    ap.add_argument("--idle", type=float, default=20.0, help="--follow-latency: idle seconds after the turns")
    ap.add_argument("--reader-tree", default=None, help="--follow-latency: another tree's live source beside this one's")
    ap.add_argument(
        "--latency-readers",
        default="live",
        help="--follow-latency: this tree's readers, comma-separated: live (the elided stream), fold (the fold "
        "stream: `attach` of an agent that does not record), follow (the recording follower: `attach` of a "
        "recording agent; needs --recording)",
    )
    ap.add_argument(
        "--reader-wait",
        choices=("poll", "block"),
        default="poll",
        help="how the benchmark's readers wait for events: poll (on their own timer, as the inspector "
        "does: engine.probe.poll) or block (in select() on the socket)",
    )
    ap.add_argument(
        "--attach-long",
        type=int,
        default=None,
        metavar="N",
        help="an inspector attaching to an agent with N turns of history (see above)",
    )
    ap.add_argument("--churn", type=int, default=50, help="--attach-long: attach/detach cycles")
    args = ap.parse_args()
    READER_WAIT[0] = args.reader_wait
    if args.attach_long is not None:
        args.pace = args.pace or 0.1
        attach_long(args)
        return
    # The modes that follow the engine's agent, in this order of precedence: (given, what runs it, the
    # seconds of sleep after each turn its value sets, if it sets them). Each runs the agent with a 200k
    # model's window (16,000 is the simulated agent's default) and 70 warm-up turns unless told otherwise.
    engine_modes: tuple[tuple[bool, Callable[[argparse.Namespace], object], float | None], ...] = (
        (args.follow_latency is not None, follow_latency, args.follow_latency),
        (args.flush_ab is not None, flush_ab, args.flush_ab),
        (args.pace_ab is not None, pace_ab, args.pace_ab),
        (args.publish_split is not None, publish_split, args.publish_split),
        (args.publish_cost, publish_cost_blocks, None),
        (args.ship_floor is not None, ship_floor, args.ship_floor),
        (args.floor, floor, None),
        (args.lean_ab, lean_ab, None),
        (args.profile, profile, None),
        (bool(args.encode_ab), lambda a: encode_ab(a, a.encode_ab.split(",")), None),
        (bool(args.twin), lambda a: each_subject(twin, a, a.twin), None),
        (bool(args.paired), lambda a: each_subject(paired, a, a.paired), None),
    )
    for given, run, pace in engine_modes:
        if given:
            args.window = 200_000 if args.window == 16_000 else args.window
            args.warmup = 70 if args.warmup is None else args.warmup
            if pace is not None:
                args.pace = pace
            run(args)
            return

    rt = Path(tempfile.mkdtemp(prefix="cpb-", dir="/tmp")) / ("contextpipe" if args.engine else "rt")
    server, step, title, journal_len = (engine_agent if args.engine else simulated_agent)(args, rt)
    rt = server.path.parent

    wall: dict[str, list[float]] = {"none": [], "attached": []}
    cpu: dict[str, list[float]] = {"none": [], "attached": []}
    io_cpu = {"none": 0.0, "attached": 0.0}
    received = dropped = 0
    turn = args.turns if args.warmup is None else args.warmup
    run_block(step, 0, turn)  # warm-up (for the engine: history grows until compaction holds it steady)
    n0 = journal_len()
    for rnd in range(args.rounds):
        # ABBA order: an agent whose turns slow down as its history grows (the engine's do) would
        # otherwise always run "attached" later, on slower turns, than "none".
        for mode in ("none", "attached") if rnd % 2 == 0 else ("attached", "none"):
            reader = attach_reader(server, rt) if mode == "attached" else None
            # Start every block from the same garbage-collector state: a full collection over the
            # engine's large heap costs tens of ms, and whichever block it happened to land in would
            # otherwise carry it.
            gc.collect()
            io0 = thread_cpu(server)
            times, per_turn_cpu = run_block(step, turn, args.turns)
            io_cpu[mode] += thread_cpu(server) - io0
            wall[mode] += times
            cpu[mode].append(per_turn_cpu)
            turn += args.turns
            if reader is not None:
                # Detach: the reader stops at a sentinel, so it has read (or been told it lost) everything.
                assert reader.stdout is not None
                server.publish({"k": "bench_end"})
                n, lost = (int(x) for x in read_line(reader, server).split())
                received += n
                dropped += lost
                reader.wait(60)
                wait_for(lambda: server.client_count == 0)
    events_per_turn = args.publishes
    if args.engine:
        events_per_turn = max(1, round((journal_len() - n0) / (2 * args.rounds * args.turns)))

    # publish() alone, after the turn blocks: its bursts overrun the queue on purpose.
    pub_none = publish_cost(server)
    reader = attach_reader(server, rt)
    pub_att = publish_cost(server)
    server.close()
    reader.wait(60)

    row = {}
    for mode in ("none", "attached"):
        row[mode] = (
            statistics.median(wall[mode]),
            statistics.fmean(wall[mode]),
            statistics.median(cpu[mode]),
        )
    print(title)
    print(f"turns per configuration: {len(wall['none'])} ({args.rounds} interleaved rounds of {args.turns})")
    print("                 wall median   wall mean   process CPU (median over blocks)")
    for label, mode in (("no client    ", "none"), ("one reader   ", "attached")):
        m, a, c = row[mode]
        print(f"  {label}: {m * 1e6:8.1f} us  {a * 1e6:8.1f} us  {c * 1e6:8.1f} us per turn")
    (mn, an, cn), (ma, aa, ca) = row["none"], row["attached"]
    print(f"  ratio        : {ma / mn:8.3f}     {aa / an:8.3f}     {ca / cn:8.3f}")
    extra = ca - cn
    io_turn = io_cpu["attached"] / len(wall["attached"])
    print(
        f"probe thread's own CPU while attached: {io_turn * 1e6:.1f} us per turn "
        f"({io_turn / cn * 100:.1f}% of a turn; measured directly, so the least noisy figure)"
    )
    print(
        f"probe CPU: {extra * 1e6:.1f} us per turn = {extra / events_per_turn * 1e6:.2f} us per event "
        f"(~{events_per_turn} events/turn); a turn of at least {extra / 0.02 * 1e3:.1f} ms of CPU keeps the "
        "ratio at or below 1.02"
    )
    print("  (process CPU counts the probe's I/O thread and is not inflated by other processes on a shared")
    print("   machine; the wall mean is. The reader runs in its own process and is not counted.)")
    print(f"publish() alone: {pub_none * 1e9:.0f} ns with no client, {pub_att * 1e9:.0f} ns with one reader")
    print("  (the agent thread's own cost; a tight loop outruns the I/O thread, which then drops and counts)")
    print(f"reader received {received} events (snapshots included), lost {dropped}")


if __name__ == "__main__":
    main()
