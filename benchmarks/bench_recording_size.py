"""Recording size: a .cpsession of a real trajectory against the naive JSONL a request-logging proxy writes
(every full request body plus its response, one line per call), measured side by side.

    .venv/bin/python benchmarks/bench_recording_size.py [TRAJECTORY]
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

from engine.importers import load
from engine.importers.ingest import ingest, message_dict

ROOT = Path(os.environ.get("CONTEXTPIPE_TRAJECTORIES", Path(__file__).resolve().parents[2] / "shared" / "trajectories"))
DEFAULT = ROOT / "mini-swe-agent-pr816" / "deepseek_chat_dev__pydicom__pydicom-1413.traj.json"


def naive_jsonl(imp) -> bytes:  # type: ignore[no-untyped-def]
    lines = []
    for c in imp.calls:
        req = {
            "model": c.model,
            "messages": [message_dict(m) for m in c.messages],
            "tools": [{"type": "function", "function": {"name": t.name, "description": t.description,
                                                        "parameters": t.parameters}} for t in c.tools],
        }
        resp = {"message": message_dict(c.response) if c.response else None,
                "usage": c.usage.__dict__ if c.usage else None}
        lines.append(json.dumps({"request": req, "response": resp}))
    return ("\n".join(lines) + "\n").encode()


def main() -> None:
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT
    if not path.exists():
        print(f"skipped: {path} not found (set CONTEXTPIPE_TRAJECTORIES)")
        return
    imp = load(path)
    naive = naive_jsonl(imp)
    unique = sum(len(m.content.encode()) for m in {id(m): m for c in imp.calls for m in c.messages}.values())
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "s.cpsession"
        pipe, _ = ingest(imp, out)
        pipe.close()
        size = out.stat().st_size
    print(f"{path.name}: {len(imp.calls)} calls")
    print(f"  naive JSONL (full request per call): {len(naive) / 1e6:8.2f} MB")
    print(f"  unique message content:              {unique / 1e6:8.2f} MB")
    print(f"  .cpsession (journal + traces + index):{size / 1e6:8.2f} MB")
    print(f"  ratio naive / cpsession:             {len(naive) / size:8.1f}x")


if __name__ == "__main__":
    main()
