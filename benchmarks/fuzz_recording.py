"""Fuzz `.cpsession` reading: open (and salvage), every turn and event, token counts, blobs, verify,
replay and re-plan, and the commands `verify`, `explain`, `salvage`,
`simulate`, `report`, `forks` as a person runs them. Each case runs in a forked child with a time and memory limit
(benchmarks/fuzz_harness.py). A finding: an exception that is not the engine's own error class
(ContextPipeError) from the library, anything but an exit from a command, a hang, a runaway allocation.

Two shapes of hostile file:
  bytes   the file's bytes mutated (flips, interesting ints, inserts, deletes, truncation, splices);
          mostly refused by the frame CRCs: the framing's defence
  events  the recording's events mutated as values (a key deleted, a value of the wrong type, a huge or
          negative int, deep nesting, an event dropped, duplicated or moved) and written by the real
          RecordingWriter: well-framed files whose content is not what the engine writes

    PYTHONPATH=. python benchmarks/fuzz_recording.py --mode events --count 2000 --seed 1 FILE.cpsession...
    (small recordings make the most of the cases: `cp-inspect demo --no-tui --turns 6 --record small.cpsession`)
"""

from __future__ import annotations

import contextlib
import copy
import os
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fuzz_harness import arg_parser, main_loop, mutate, mutate_value  # noqa: E402

from engine.errors import ContextPipeError  # noqa: E402
from engine.recording.cpsession import RecordingReader, RecordingWriter  # noqa: E402


def mutate_events(events: list[dict[str, Any]], rng: random.Random) -> list[dict[str, Any]]:
    evs = copy.deepcopy(events)
    for _ in range(rng.choice((1, 1, 2, 3))):
        op = rng.randrange(10)
        i = rng.randrange(len(evs))
        if op == 0 and len(evs) > 1:
            del evs[i]
            continue
        if op == 1:
            evs.insert(rng.randrange(len(evs) + 1), copy.deepcopy(evs[i]))
            continue
        if op == 2:
            j = rng.randrange(len(evs))
            evs[i], evs[j] = evs[j], evs[i]
            continue
        mutate_value(evs[i], rng, skip_keys=("k",))
    return evs


def read_everything(path: str) -> None:
    """What the library's readers do with a recording; raises only what is not ContextPipeError."""
    from engine.recording.replay import Replayer

    events: list[dict[str, Any]] = []
    for salvage in (False, True):
        try:
            r = RecordingReader.open(path, salvage=salvage)
        except ContextPipeError:
            continue
        with r:
            try:
                for n in r.turn_numbers():
                    r.turn(n)
                events = [ev for _, ev in r.event_frames()]
                r.token_counts()
                for ev in events:
                    if isinstance(ev, dict) and ev.get("k") == "blob" and isinstance(ev.get("h"), str):
                        r.blob(ev["h"])
                r.refresh()
            except ContextPipeError:
                pass
    if not events:
        return
    try:
        Replayer.verify_stream(lambda: iter(events))
    except ContextPipeError:
        pass
    try:
        rp = Replayer(events)
        if rp.turns:
            rp.replan(rp.turns - 1)
            rp.replan(0)
    except ContextPipeError:
        pass


def run_commands(path: str) -> None:
    """The commands as a person runs them: any exit is fine, a traceback is a finding."""
    import click

    from inspector.entry import run_plain_command

    out = os.path.join(os.path.dirname(path), "salvaged.cpsession")
    with open(os.devnull, "w") as null, contextlib.redirect_stdout(null), contextlib.redirect_stderr(null):
        for argv in (
            ["verify", path],
            ["explain", path, "--turn", "1"],
            ["explain", path, "--format", "json"],
            ["salvage", path, "-o", out, "--force"],
            ["simulate", path, "--window", "4000", "--json"],
            ["simulate", path, "--window", "4000", "--policies", "all"],
            ["report", path],
            ["forks", path],
            ["explain", path, "--turn", "2", "--budget", "3000"],
        ):
            try:
                run_plain_command(argv)
            except (SystemExit, click.exceptions.Exit):
                pass


def main() -> None:
    ap = arg_parser(__doc__, 1000)
    ap.add_argument("files", nargs="+")
    ap.add_argument("--mode", choices=("bytes", "events"), default="events")
    ap.add_argument("--target", choices=("library", "commands"), default="library")
    a = ap.parse_args()
    datas = [Path(f).read_bytes() for f in a.files]
    parsed = []
    for f in a.files:
        with RecordingReader.open(f) as r:
            parsed.append((dict(r.header), r.event_list()))
    tmp = tempfile.mkdtemp(prefix="fuzzrec")
    target = read_everything if a.target == "library" else run_commands

    def case(rng: random.Random) -> tuple[bytes, Any]:
        path = os.path.join(tmp, f"case{os.getpid()}.cpsession")
        if a.mode == "bytes":
            data = mutate(rng.choice(datas), rng, datas)
            with open(path, "wb") as f:
                f.write(data)
            return data, lambda: target(path)
        header, events = rng.choice(parsed)
        evs = mutate_events(events, rng)

        def run() -> None:
            hdr = {k: v for k, v in header.items() if k not in ("format", "version")}
            try:
                with RecordingWriter(
                    path + ".w",
                    hdr,
                ) as w:
                    for ev in evs:
                        w.append(ev)
            except Exception:
                return  # the writer refused it: not a file anyone can have
            os.replace(path + ".w", path)
            target(path)

        return repr(evs)[:100000].encode(), run

    main_loop(
        f"recording-{a.mode}-{a.target}", case, seed=a.seed, count=a.count, budget=a.budget, save=a.save
    )


if __name__ == "__main__":
    main()
