"""Fuzz the trajectory importers (engine/importers): `load` (the format sniffed) and `ingest` into a
recording, as `cp-inspect import auto FILE -o OUT` runs them, on mutated copies of real trajectories.
Each case runs in a forked child with a time and memory limit (benchmarks/fuzz_harness.py). A finding: an
exception that is not the engine's own error class (ContextPipeError) from the library, a traceback
from the command (anything but an exit), a hang, a runaway allocation.

Two shapes of hostile file:
  bytes   the file's bytes mutated (JSON that mostly no longer parses: the parser's defence)
  values  the parsed document mutated as values (a key deleted, a value of the wrong type, a huge
          int, deep nesting, a string cut, a list item duplicated or dropped) and written back as JSON

    PYTHONPATH=. python benchmarks/fuzz_importers.py --mode values --count 500 --seed 1 \
        $CONTEXTPIPE_TRAJECTORIES/swe-agent/ctf_crypto_katy.traj ...
The mutated copies are written to a temporary folder, never into the repository.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fuzz_harness import arg_parser, main_loop, mutate, mutate_value  # noqa: E402

from engine.errors import ContextPipeError  # noqa: E402


def import_library(path: str, out: str) -> None:
    from engine.importers import load
    from engine.importers.ingest import ingest

    try:
        session = load(path)
        pipe, _ = ingest(session, out)
        pipe.close()
    except ContextPipeError:
        pass


def import_command(path: str, out: str) -> None:
    import click

    from inspector.cli import app

    with open(os.devnull, "w") as null, contextlib.redirect_stdout(null), contextlib.redirect_stderr(null):
        try:
            app(["import", "auto", path, "-o", out, "--force"])
        except (SystemExit, click.exceptions.Exit):
            pass


def main() -> None:
    ap = arg_parser(__doc__, 500)
    ap.add_argument("files", nargs="+")
    ap.add_argument("--mode", choices=("bytes", "values"), default="values")
    ap.add_argument("--target", choices=("library", "command"), default="library")
    a = ap.parse_args()
    datas = [Path(f).read_bytes() for f in a.files]
    # A JSONL log (proxy-jsonl, claude-trace) is mutated as its lines' documents, one line at a time.
    docs = [
        [json.loads(line) for line in d.splitlines() if line.strip()]
        if f.endswith(".jsonl")
        else json.loads(d)
        for f, d in zip(a.files, datas, strict=True)
    ]
    tmp = tempfile.mkdtemp(prefix="fuzzimp")
    target = import_library if a.target == "library" else import_command

    def case(rng: random.Random) -> tuple[bytes, Any]:
        i = rng.randrange(len(datas))
        suffix = Path(a.files[i]).name.split(".", 1)[-1]
        path = os.path.join(tmp, f"case{os.getpid()}.{suffix}")
        if a.mode == "bytes":
            data = mutate(datas[i], rng, datas)
        else:
            doc = copy.deepcopy(docs[i])
            jsonl = a.files[i].endswith(".jsonl")
            for _ in range(rng.choice((1, 1, 2, 3))):
                mutate_value(rng.choice(doc) if jsonl and doc else doc, rng)
            data = (
                ("\n".join(json.dumps(line) for line in doc) + "\n").encode()
                if jsonl
                else json.dumps(doc).encode()
            )
        with open(path, "wb") as f:
            f.write(data)
        return data, lambda: target(path, os.path.join(tmp, "out.cpsession"))

    main_loop(f"import-{a.mode}-{a.target}", case, seed=a.seed, count=a.count, budget=a.budget, save=a.save)


if __name__ == "__main__":
    main()
