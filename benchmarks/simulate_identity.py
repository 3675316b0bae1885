"""Old vs new `cp-inspect simulate --json --per-turn`: byte-identical figures under six settings.

A speed change to simulate must not move a single simulated figure. This runs the real CLI (in process,
through typer's test runner, so one start-up for all runs) on each recording under six settings and
writes one JSON file per (recording, setting), with only the wall-clock `elapsed_s` removed and the
`source` path cut to the file's name:

    recorded            as recorded
    w16k                --window 16000
    anthropic           --provider anthropic --model claude-sonnet-4
    anthropic_w16k      --provider anthropic --model claude-sonnet-4 --window 16000
    openai_w32k         --provider openai --model gpt-4o --window 32000
    policies_all_w32k   --policies all --window 32000

Run it once with the old code on PYTHONPATH (e.g. a `git archive` of the base commit) and once with the
new, then compare:

    PYTHONPATH=/tmp/base python benchmarks/simulate_identity.py --out /tmp/old FILE...
    PYTHONPATH=$PWD      python benchmarks/simulate_identity.py --out /tmp/new FILE... --compare /tmp/old

Recordings are passed as files (never copied into the repo): e.g. an import of pydicom-1413, the
10x synthetic session of bench_simulate.make_synthetic and demo_sessions/*.cpsession; a recording may
carry the engine's token counts or not (older readers skip the table). Exit 1 when any output differs.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

SETTINGS: dict[str, list[str]] = {
    "recorded": [],
    "w16k": ["--window", "16000"],
    "anthropic": ["--provider", "anthropic", "--model", "claude-sonnet-4"],
    "anthropic_w16k": ["--provider", "anthropic", "--model", "claude-sonnet-4", "--window", "16000"],
    "openai_w32k": ["--provider", "openai", "--model", "gpt-4o", "--window", "32000"],
    "policies_all_w32k": ["--policies", "all", "--window", "32000"],
}


def run_all(files: list[Path], out: Path, only: list[str]) -> list[Path]:
    from typer.testing import CliRunner

    from inspector.cli import app

    runner = CliRunner()
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for f in files:
        for name, args in SETTINGS.items():
            if only and name not in only:
                continue
            res = runner.invoke(app, ["simulate", str(f), "--json", "--per-turn", *args])
            if res.exit_code != 0:
                raise SystemExit(f"{f} {name}: exit {res.exit_code}\n{res.output}")
            doc = json.loads(res.output)
            doc.pop("elapsed_s", None)
            doc["source"] = Path(doc["source"]).name  # the same file may be named by another path
            dest = out / f"{f.stem}.{name}.json"
            dest.write_text(json.dumps(doc, indent=2, sort_keys=False) + "\n")
            written.append(dest)
            print(f"{dest.name}", file=sys.stderr)
    return written


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="+", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--compare", type=Path, help="directory of an earlier run to compare with")
    ap.add_argument("--only", default="", help="comma list of setting names (default: all six)")
    args = ap.parse_args(argv[1:])
    only = [x for x in args.only.split(",") if x]
    written = run_all(args.files, args.out, only)
    if args.compare is None:
        return 0
    bad = 0
    for p in written:
        old = args.compare / p.name
        if not old.exists():
            print(f"MISSING in {args.compare}: {p.name}")
            bad += 1
        elif old.read_bytes() != p.read_bytes():
            print(f"DIFFERS: {p.name}")
            bad += 1
    print(f"{len(written) - bad} of {len(written)} outputs byte-identical")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
