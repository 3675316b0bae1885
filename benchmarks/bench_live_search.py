"""Content search over a live agent: CPU of a scan of every turn received, in one pass over the journal
(inspector.content_search.JournalStream, what `/` and `cp-inspect find PID` do) against turn by turn
(the source's random access: a re-plan of each turn, what `/` did live before).

The agent is this process (a Pipeline serving its probe, turns of a bash call and a tool result of a few
lines, one naming the query at every 50th turn); a LiveSource attached on the fold stream, following in
a thread, holds every turn. Each round scans with a fresh ContentScan both ways, alternating which goes
first; CPU is this process's (the probe's and the reader's threads included: both ways pay them), wall
beside it. Bytecode: whatever the environment says (PYTHONDONTWRITEBYTECODE), both ways alike.

`--find` times `cp-inspect find PID TEXT` over the same agent instead, as a user runs it: the command in
a child process (its CPU from the kernel's rusage, start-up and the journal's fetch included; the agent's
side, this process serving the journal by range, beside it), `--rounds` times; one pass, as `/` is. With
`--ab DIR` (another tree, say /tmp/start48) each round runs the command from DIR and from this tree
against the same agent, alternating which goes first, and says whether their outputs are the same.
`--record`: the agent records its session too, as an agent run with CONTEXTPIPE_RECORD does; `find PID`
from a tree that follows recordings (session 49 on) then reads the file its hello names, checked as
`attach` checks it, and the journal is not fetched (the agent's side near nothing).

`--more M` times `/` then `f` as the attached inspector meets them: the source opened as `attach` opens it
(open_live, the fold stream), a scan of every turn received as the app's search opens it
(content_search.stream_for), the agent goes on M turns, and the next scan reads them. It prints the attach
(this process's CPU until every turn received is folded: the agent's serving and the source's fold, the
search index's adds from session 50 on), the first `/` (that scan's thread CPU, a new query each round),
and the inspector's CPU for those M turns: the follow thread's (its fold builds each turn for its trace)
and the scan's, each its own thread's clock. Run it with PYTHONPATH=OTHER_TREE for the baseline.

`--late-failure` times what a spill failure arriving mid-session costs the search: a scan of every turn
received, then the agent goes on 10 turns, one of them a tool output over the spill threshold whose write
fails (a full spill volume), and the next scan (timed) reads the turns that came. Its CPU is the figure; run
it with PYTHONPATH=OTHER_TREE for the baseline (the script runs against whichever tree the path names).

    PYTHONPATH=. python benchmarks/bench_live_search.py --turns 600 --rounds 3
    PYTHONPATH=. python benchmarks/bench_live_search.py --turns 3000 --rounds 3 --find
    PYTHONPATH=. python benchmarks/bench_live_search.py --turns 2000 --rounds 3 --find --ab /tmp/start48
    PYTHONPATH=. python benchmarks/bench_live_search.py --turns 2000 --rounds 3 --find --record --ab /tmp/start49
    PYTHONPATH=. python benchmarks/bench_live_search.py --turns 1500 --rounds 3 --late-failure
    PYTHONPATH=. python benchmarks/bench_live_search.py --turns 1000 --rounds 3 --more 200
    PYTHONPATH=. python benchmarks/bench_live_search.py --turns 1000 --follow    # PYTHONPATH=/tmp/start51: before

`--follow` times the first `/` on a followed recording (the agent records, and is attached as `attach`
attaches to such an agent: RecordingFollower reads its turns from the file): the attach, the follower's
thread until it is done with the history (from session 51 that includes indexing every turn for the
search, inspector/followed_search.py: its CPU is the price of a cheap first `/`, paid whether or not the
person searches), then the first `/` (a scan of every turn, opened as the app opens it; its thread's CPU).
Run it with PYTHONPATH=OTHER_TREE for the baseline (before session 51 the follower indexed nothing and
the first `/` built every turn).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--turns", type=int, default=600)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--find", action="store_true", help="time `cp-inspect find PID TEXT` (a child process)")
    ap.add_argument("--late-failure", action="store_true", help="time the scan after a spill failure arrives")
    ap.add_argument("--ab", type=Path, help="with --find: the command from this tree too, side by side")
    ap.add_argument("--more", type=int, default=0, help="time `/`, then `f` after this many more turns")
    ap.add_argument(
        "--record", action="store_true", help="the agent records (find PID then reads its recording file)"
    )
    ap.add_argument("--follow", action="store_true", help="the first `/` on a followed recording")
    args = ap.parse_args()
    rt = Path(tempfile.mkdtemp(prefix="cpls"))
    os.environ["XDG_RUNTIME_DIR"] = str(rt)
    from engine.pipeline import Pipeline
    from inspector.content_search import ContentScan, JournalStream
    from inspector.sources.live import LiveSource

    record = str(rt / "agent.cpsession") if args.record or args.follow else None
    pipe = Pipeline("claude-sonnet-4", "anthropic", 200_000, serve=True, spill=_FullVolume(), record=record)
    pipe.identity("You are a careful coding agent.")
    pipe.user("Fix the failing test.")
    if args.late_failure or args.more:  # every turn sent as it closes (none held for the next: this agent then waits)
        pipe.probe.fold_coalesce = 0.0

    def step(t: int, output: str = "") -> None:
        req = pipe.next_request()
        pipe.record_usage({"input_tokens": req.trace["final_tokens"], "output_tokens": 10})
        calls = pipe.assistant(f"step {t}", [{"id": f"c{t}", "name": "bash", "arguments": "{}"}])
        extra = " the QUERY-TEXT is here" if t % 50 == 7 else ""
        pipe.tool_result(calls[0].id, output or f"output of step {t}{extra}\n" + "line of output\n" * (t % 7))

    for t in range(args.turns):
        step(t)
    if args.follow:
        followed(args.turns)
        pipe.close()
        return
    a0 = time.process_time()
    if args.more:  # attached as `cp-inspect attach` attaches (open_live: from session 50, a search index)
        from inspector.sources.live_recording import open_live

        src: Any = open_live(os.getpid(), timeout=30, backfill_idle=None)[0]
    else:
        src = LiveSource(os.getpid(), timeout=30, backfill_idle=None, fold=True)
    reader = threading.Thread(target=lambda: [None for _ in src.follow()], daemon=True)
    reader.start()
    src.replayer()  # every turn received (the journal fetched to its end)
    turns = [ev["turn"] for ev in src.events if ev.get("k") == "request"]
    assert len(turns) == args.turns, len(turns)
    if args.more:  # the fold of the history on attach (from session 50 the search index's adds in it)
        give_up = time.monotonic() + 300
        while src._tf is None or src._tf_at < len(src.events):
            assert time.monotonic() < give_up, "the history was never folded"
            time.sleep(0.02)
        print(
            f"attach: {args.turns} turns received and folded, CPU {time.process_time() - a0:.3f} s (this "
            "process: the agent serving its journal and the source's fold)"
        )
    if args.late_failure:
        late_failure(src, step, args.turns, args.rounds)
        src.close()
        pipe.close()
        return
    if args.more:
        more_turns(src, reader, step, args.turns, args.rounds, args.more)
        src.close()
        pipe.close()
        return
    if args.find:
        src.close()
        find_pid(args.turns, args.rounds, args.ab)
        pipe.close()
        return

    def scan(one_pass: bool) -> tuple[float, float, int]:
        c0, w0 = time.process_time(), time.perf_counter()
        s = ContentScan("query-text", src, JournalStream(src) if one_pass else None)
        s.scan_to(turns, lambda: False)
        return time.process_time() - c0, time.perf_counter() - w0, len(s.changes)

    got: dict[bool, list[tuple[float, float, int]]] = {True: [], False: []}
    for r in range(args.rounds):
        for one_pass in (True, False) if r % 2 == 0 else (False, True):
            got[one_pass].append(scan(one_pass))
    assert {x[2] for x in got[True]} == {x[2] for x in got[False]}, "the two ways found different changes"
    for one_pass, name in ((True, "one pass"), (False, "turn by turn")):
        cpu = statistics.median(x[0] for x in got[one_pass])
        wall = statistics.median(x[1] for x in got[one_pass])
        print(
            f"{name:>13}: {args.turns} turns, CPU {cpu:.3f} s ({cpu / args.turns * 1e3:.2f} ms a turn), wall {wall:.3f} s"
        )
    ratio = statistics.median(x[0] for x in got[False]) / statistics.median(x[0] for x in got[True])
    print(
        f"turn by turn / one pass CPU: {ratio:.2f}x; changes found {got[True][0][2]}; load {os.getloadavg()[0]:.1f}"
    )
    src.close()
    pipe.close()


class _FullVolume:
    """The agent's spill backend: a write of a text naming FULL-VOLUME fails (no space left)."""

    def put(self, key: str, data: str) -> str:
        if "FULL-VOLUME" in data:
            raise OSError(28, "No space left on device")
        return f"spill://{key[:16]}"

    def get(self, key: str) -> str:
        raise KeyError(key)


def late_failure(src: Any, step: Callable[..., None], turns: int, rounds: int) -> None:
    """Each round: a scan of every turn received, 10 turns more (one whose spill write fails), the next
    scan timed."""
    from inspector.content_search import ContentScan, JournalStream

    cpu: list[float] = []
    wall: list[float] = []
    at = turns
    for r in range(rounds):
        got = [ev["turn"] for ev in src.events if ev.get("k") == "request"]
        scan = ContentScan("query-text", src, JournalStream(src))
        scan.scan_to(got, lambda: False)
        for t in range(at, at + 10):
            big = f"FULL-VOLUME round {r}: the build log\n" + "a line of the build log\n" * 3000
            step(t, big if t == at + 4 else "")
        at += 10
        give_up = time.monotonic() + 120
        while src._seen_turns < at - 1:
            assert time.monotonic() < give_up, (
                f"the turns never arrived ({src._seen_turns}, {len(src.events)})"
            )
            time.sleep(0.02)
        src.replayer()
        got = [ev["turn"] for ev in src.events if ev.get("k") == "request"]
        assert src.replayer().fail_keys, "the failed write is in the journal"
        c0, w0 = time.process_time(), time.perf_counter()
        scan.scan_to(got, lambda: False)
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
        scan.close()
    print(
        f"late spill failure: {turns}+ turns scanned, 10 more with a failed spill write: the next scan CPU "
        f"{statistics.median(cpu):.3f} s (rounds {', '.join(f'{c:.3f}' for c in cpu)}), wall "
        f"{statistics.median(wall):.3f} s; load {os.getloadavg()[0]:.1f}"
    )


def followed(turns: int) -> None:
    """Attach to this process's recording agent as `attach` does (RecordingFollower), let its thread do
    what it does with the history (fill the timeline; from session 51 index each turn for the search),
    then the first `/`: each step's CPU."""
    from inspector.content_search import ContentScan
    from inspector.sources import HistoryFilled
    from inspector.sources.live_recording import RecordingFollower, open_live

    c0 = time.thread_time()
    src, why = open_live(os.getpid(), timeout=30, backfill_idle=None)
    assert isinstance(src, RecordingFollower), why
    chunks = list(src.load_chunks())
    attach = time.thread_time() - c0
    order = [t["turn"] for c in chunks for t in c.traces]
    assert len(order) == turns, len(order)
    filled = threading.Event()

    def run() -> None:
        for ev in src.follow():
            if isinstance(ev, HistoryFilled):
                filled.set()

    reader = threading.Thread(target=run, daemon=True)
    reader.start()
    clock = time.pthread_getcpuclockid(reader.ident or 0)
    index = src.search_index
    indexes = hasattr(index, "index_ahead")  # (session 51 on: the follower indexes the file's turns)
    give_up = time.monotonic() + 1800
    while not filled.is_set() or (indexes and len(getattr(index, "turns", ())) < turns):
        assert time.monotonic() < give_up, "the follower never caught up"
        time.sleep(0.05)
    behind = time.clock_gettime(clock)
    c0, w0 = time.thread_time(), time.perf_counter()
    scan = ContentScan("query-text", src)
    scan.open_for(src)
    scan.scan_to(order, lambda: False)
    first, wall = time.thread_time() - c0, time.perf_counter() - w0
    assert scan.scanned == turns and scan.unreadable == 0
    print(
        f"followed recording, {turns} turns: attach {attach * 1e3:.1f} ms CPU; the follower's thread through "
        f"the history {behind:.3f} s ({'indexing every turn' if indexes else 'no search index'}); the first "
        f"`/` {first:.3f} s CPU ({first / turns * 1e3:.3f} ms a turn), wall {wall:.3f} s, {len(scan.changes)} "
        f"changes; together {behind + first:.3f} s; load {os.getloadavg()[0]:.1f}"
    )
    scan.close()
    src.close()


def more_turns(
    src: Any, reader: threading.Thread, step: Callable[..., None], turns: int, rounds: int, more: int
) -> None:
    """Each round: `/` (a scan of every turn received, opened as the app opens it), `more` turns, then
    `f` (the next scan): the follow thread's CPU while those turns arrive, and the scan's."""
    from inspector.content_search import ContentScan

    follow_clock = time.pthread_getcpuclockid(reader.ident or 0)
    fold: list[float] = []
    scans: list[float] = []
    firsts: list[float] = []
    at = turns
    for _ in range(rounds):
        got = [ev["turn"] for ev in src.events if ev.get("k") == "request"]
        c0 = time.thread_time()
        scan = ContentScan("query-text", src)
        scan.open_for(src)
        scan.scan_to(got, lambda: False)
        firsts.append(time.thread_time() - c0)
        f0 = time.clock_gettime(follow_clock)
        for t in range(at, at + more):
            step(t)
        at += more
        give_up = time.monotonic() + 300
        while src._seen_turns < at - 1:
            assert time.monotonic() < give_up, f"the turns never arrived ({src._seen_turns})"
            time.sleep(0.02)
        fold.append(time.clock_gettime(follow_clock) - f0)
        got = [ev["turn"] for ev in src.events if ev.get("k") == "request"]
        c0 = time.thread_time()
        scan.scan_to(got, lambda: False)
        scans.append(time.thread_time() - c0)
        assert scan.scanned == len(got) and scan.unreadable == 0
        scan.close()
    both = [a + b for a, b in zip(fold, scans, strict=True)]
    print(
        f"the first `/` (a scan of every turn received, a new query's): CPU {statistics.median(firsts):.3f} s "
        f"(rounds {', '.join(f'{x:.3f}' for x in firsts)}; round 1 at {turns} turns, each later one {more} more)"
    )
    print(
        f"`/` at {turns}+ turns, then `f` after {more} more: follow thread {statistics.median(fold):.3f} s, "
        f"the next scan {statistics.median(scans):.3f} s, together {statistics.median(both):.3f} s CPU "
        f"({statistics.median(both) / more * 1e3:.2f} ms a turn; rounds {', '.join(f'{x:.3f}' for x in both)}); "
        f"load {os.getloadavg()[0]:.1f}"
    )


def find_pid(turns: int, rounds: int, ab: Path | None = None) -> None:
    """`cp-inspect find PID query-text` against this process, `rounds` times: child CPU, wall, ours; with
    `ab`, the command from that tree as well, alternating, and whether both listed the same."""
    import resource
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[1]
    trees = [repo] if ab is None else [ab.resolve(), repo]
    code = "import sys; sys.argv[0] = 'cp-inspect'; from inspector.entry import main; main()"
    rows: dict[Path, list[tuple[float, float, float]]] = {t: [] for t in trees}
    outs: dict[Path, str] = {}
    for r in range(rounds):
        for tree in trees if r % 2 == 0 else trees[::-1]:
            env = {**os.environ, "PYTHONPATH": str(tree)}
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            own, w0 = time.process_time(), time.perf_counter()
            # (cwd the tree: `-c` puts the working directory first on sys.path, before PYTHONPATH, and
            # both sides ran the tree the benchmark was started in.)
            out = subprocess.run(
                [sys.executable, "-c", code, "find", str(os.getpid()), "query-text"],
                capture_output=True, text=True, env=env, timeout=1800, cwd=tree,
            )  # fmt: skip
            wall, own = time.perf_counter() - w0, time.process_time() - own
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            if out.returncode != 0:
                raise SystemExit(f"find failed ({out.returncode}) from {tree}: {out.stderr[-400:]}")
            outs[tree] = out.stdout
            used = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
            rows[tree].append((used, wall, own))
    for tree in trees:
        cpu, wall, own = (statistics.median(x[i] for x in rows[tree]) for i in range(3))
        lines = len(outs[tree].splitlines()) - 1
        print(
            f"cp-inspect find PID ({tree}): {turns} turns, {lines} changes listed; child CPU {cpu:.3f} s "
            f"({cpu / turns * 1e3:.2f} ms a turn; rounds {', '.join(f'{x[0]:.2f}' for x in rows[tree])}), "
            f"wall {wall:.3f} s; the agent's side {own:.3f} s CPU; median of {rounds}; "
            f"load {os.getloadavg()[0]:.1f}"
        )
    if ab is not None:
        a, b = (statistics.median(x[0] for x in rows[t]) for t in trees)
        same = outs[trees[0]] == outs[trees[1]]
        print(f"this tree / {trees[0]} child CPU: {b / a:.2f}x; outputs {'identical' if same else 'DIFFER'}")


if __name__ == "__main__":
    main()
