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
measured directly; inside publish() and hold(), and from probe51 the journal's lane to the probe, which calls
publish() straight from the journal, engine/probe/journal_lane.py). The reader is, by default, what the inspector attaches to an agent's probe with
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
the same as foldbypass in its blocks: `--flush-modes agent,agent-bypass`.) `foldlane`: the same clock, A's
journal handing each event on as before probe51 (Journal.append, Pipeline._publish, publish()), B's by the
journal's lane the probe ships (engine/probe/journal_lane.py: publish() called straight from the
journal: one call an event):

    .venv/bin/python benchmarks/bench_probe.py --twin foldlane --untraced --rounds 2 --pairs 150 --pace 0.2 --settle 10

`foldunlooked` (the same clock; a prototype, not a path the probe ships): B's turn closes held back like the
rest of its turn, as for a reader that has said it is not looking (paused, or on an older turn), so B
sends a batch only when DEFER_EVENTS wait; A today's:

    .venv/bin/python benchmarks/bench_probe.py --twin foldunlooked --untraced --rounds 2 --pairs 150 --pace 0.2 --settle 10

`recordcost`: no reader on either twin, B recording (a `.cpsession` beside the runtime directory), A not:
what writing the recording's format costs an agent that does not record, per turn (issue 15.4's "spool"
an inspector could follow as it follows a recording; probe51: ~10x the live stream's cost, see its report):

    .venv/bin/python benchmarks/bench_probe.py --twin recordcost --untraced --rounds 1 --pairs 150 --pace 0.2 --settle 10
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

This script holds the options and the first mode (the simulated or --engine turn); each other mode is a
module beside it, named for what it measures: probe_paired (--paired), probe_twins (--twin), probe_ab
(--encode-ab, --lean-ab, --pace-ab), probe_flush_ab (--flush-ab), probe_attach (--follow-latency,
--attach-long), probe_profile (--profile, --floor, --ship-floor), probe_publish (--publish-split,
--publish-cost), all on probe_agents (the agents, readers and subjects they share).
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from probe_ab import encode_ab, lean_ab, pace_ab  # noqa: E402
from probe_agents import (  # noqa: E402
    READER_WAIT,
    attach_reader,
    engine_agent,
    publish_cost,
    read_line,
    run_block,
    simulated_agent,
    thread_cpu,
    wait_for,
)
from probe_attach import attach_long, follow_latency  # noqa: E402
from probe_flush_ab import flush_ab  # noqa: E402
from probe_paired import paired  # noqa: E402
from probe_profile import floor, profile, ship_floor  # noqa: E402
from probe_publish import publish_cost_blocks, publish_split  # noqa: E402
from probe_twins import twin  # noqa: E402


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
