"""Before/after check for the CLI paths that read recordings: every output of `explain` (each turn, text and
JSON, and with overrides every 7th), `simulate --json`, `report --json`, `diff ... --json` and the spans
`export` sends, on the demo sessions and the given recordings (the shared trajectories' imports).

    PYTHONPATH=TREE python benchmarks/recording_paths_identity.py OUT.json [RECORDING...]   # once per tree
    python benchmarks/recording_paths_identity.py --compare BEFORE.json AFTER.json

Wall-clock figures (simulate's elapsed_s, "(N ms)") are left out of the comparison. Runs in one process
(typer's CliRunner); export's spans are caught by an in-memory exporter in place of the OTLP one.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def _norm(v: Any) -> str:
    # Wall-clock figures, and the tree's own path (a price-table error names its file).
    return re.sub(r'\\?"elapsed_s\\?": [0-9.e-]+|\(\d+ ms\)|/\S+/engine/sim/data/', "T", json.dumps(v))


def compare(before: Path, after: Path) -> int:
    a, b = json.loads(before.read_text()), json.loads(after.read_text())
    n = differ = 0
    for f in a:
        for k in a[f]:
            n += 1
            if _norm(a[f][k]) != _norm(b.get(f, {}).get(k)):
                differ += 1
                print(f"DIFF {f}: {k}")
    print(f"{n} outputs compared, {differ} differ")
    return 1 if differ else 0


def record(out: Path, extra: list[str]) -> None:
    from opentelemetry.sdk.trace.export import SpanExportResult
    from typer.testing import CliRunner

    import engine.export.otel as otel
    from engine.recording.cpsession import RecordingReader
    from inspector.cli import app

    class Memory:
        def __init__(self) -> None:
            self.spans: list[Any] = []

        def export(self, spans: Any) -> Any:
            for s in spans:
                self.spans.append([s.name, dict(s.attributes or {}), s.start_time, s.end_time,
                                   [(e.name, dict(e.attributes or {})) for e in s.events]])
            return SpanExportResult.SUCCESS

        def shutdown(self) -> None:
            pass

    mem = Memory()
    otel.make_exporter = lambda *a, **k: mem  # type: ignore[assignment]
    otel.exporter_url = lambda e: "memory"  # type: ignore[assignment]
    runner = CliRunner()

    def run(*args: str) -> list[Any]:
        r = runner.invoke(app, list(args))
        return [r.exit_code, r.stdout, r.stderr]

    files = sorted(str(p) for p in (ROOT / "demo_sessions").glob("*.cpsession")) + extra
    res: dict[str, dict[str, Any]] = {}
    for f in files:
        with RecordingReader.open(f) as r:
            turns = r.turn_numbers()
        h: dict[str, Any] = {}
        for t in turns:
            h[f"explain {t}"] = run("explain", f, "--turn", str(t))
            h[f"explain json {t}"] = run("explain", f, "--turn", str(t), "--format", "json")
            if t % 7 == 3:
                h[f"explain ov {t}"] = run("explain", f, "--turn", str(t), "--budget", "20000",
                                           "--gate", "drop_rounds=off")
        h["explain last"] = run("explain", f)
        h["explain -2"] = run("explain", f, "--turn", "-2")
        h["simulate"] = run("simulate", f, "--json")
        h["report"] = run("report", f, "--json")
        h["diff"] = run("diff", "recorded", "window=20000", f, "--json")
        mem.spans.clear()
        h["export"] = run("export", f, "--otlp", "http://127.0.0.1:9")
        h["export spans"] = json.loads(json.dumps(mem.spans, default=str))
        res[Path(f).name] = h
        print(f, len(turns), "turns", file=sys.stderr)
    out.write_text(json.dumps(res, sort_keys=True, default=str))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--compare"]:
        sys.exit(compare(Path(sys.argv[2]), Path(sys.argv[3])))
    record(Path(sys.argv[1]), sys.argv[2:])
