"""Content search over a live agent: CPU of a scan of every turn received, in one pass over the journal
(inspector.content_search.JournalStream, what `/` and `cp-inspect find PID` do) against turn by turn
(the source's random access: a re-plan of each turn, what `/` did live before).

The agent is this process (a Pipeline serving its probe, turns of a bash call and a tool result of a few
lines, one naming the query at every 50th turn); a LiveSource attached on the fold stream, following in
a thread, holds every turn. Each round scans with a fresh ContentScan both ways, alternating which goes
first; CPU is this process's (the probe's and the reader's threads included: both ways pay them), wall
beside it. Bytecode: whatever the environment says (PYTHONDONTWRITEBYTECODE), both ways alike.

    PYTHONPATH=. python benchmarks/bench_live_search.py --turns 600 --rounds 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--turns", type=int, default=600)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    rt = Path(tempfile.mkdtemp(prefix="cpls"))
    os.environ["XDG_RUNTIME_DIR"] = str(rt)
    from engine.pipeline import Pipeline
    from inspector.content_search import ContentScan, JournalStream
    from inspector.sources.live import LiveSource

    pipe = Pipeline("claude-sonnet-4", "anthropic", 200_000, serve=True)
    pipe.identity("You are a careful coding agent.")
    pipe.user("Fix the failing test.")
    for t in range(args.turns):
        req = pipe.next_request()
        pipe.record_usage({"input_tokens": req.trace["final_tokens"], "output_tokens": 10})
        calls = pipe.assistant(f"step {t}", [{"id": f"c{t}", "name": "bash", "arguments": "{}"}])
        extra = " the QUERY-TEXT is here" if t % 50 == 7 else ""
        pipe.tool_result(calls[0].id, f"output of step {t}{extra}\n" + "line of output\n" * (t % 7))
    src = LiveSource(os.getpid(), timeout=30, backfill_idle=None, fold=True)
    reader = threading.Thread(target=lambda: [None for _ in src.follow()], daemon=True)
    reader.start()
    src.replayer()  # every turn received (the journal fetched to its end)
    turns = [ev["turn"] for ev in src.events if ev.get("k") == "request"]
    assert len(turns) == args.turns, len(turns)

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


if __name__ == "__main__":
    main()
