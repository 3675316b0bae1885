"""What `cp-inspect salvage FILE -o OUT` does, importable without typer: a plain salvage command line
(cli_argv.py) runs it without typer's dispatch. The typer command `salvage` (cli.py) calls salvage()
here."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from engine.wording import counted

from .cli_output import echo
from .recording_open import fail, open_recording


def salvage(file: Path, out: Path, force: bool = False) -> None:
    """`cp-inspect salvage`'s work: copy every intact event before the first damage into OUT."""
    from engine.recording.cpsession import RecordingError, RecordingWriter

    # Usage errors (exit 2), as for import -o and demo --record.
    if out.exists() and not force:
        fail(f"{out} already exists: choose another path or pass --force", 2)
    if out.resolve() == file.resolve():
        fail("the salvaged copy must go to another path than the damaged file", 2)
    r = open_recording(file, salvage=True)
    kept: list[dict[str, Any]] = []
    lost = r.damage.message if r.damage is not None else None
    try:
        for _, ev in r.event_frames():
            kept.append(ev)
    except RecordingError as exc:
        lost = str(exc).split(". Frames before it", 1)[0]
    while lost and kept and kept[-1].get("k") != "turn":
        kept.pop()  # damage cut the last turn short: its events are dropped with it
    header = {k: v for k, v in r.header.items() if k not in ("format", "version")}
    # Written beside OUT and renamed over it when complete, as import does: a failure or Ctrl-C while
    # writing left a partial OUT (and, with --force, the file it replaced was already truncated).
    partial = out.with_name(f".{out.name}.{os.getpid()}.partial")
    try:
        with RecordingWriter(partial, header) as w:
            for ev in kept:
                w.append(ev)
        os.replace(partial, out)
    except (RecordingError, ValueError) as exc:
        partial.unlink(missing_ok=True)
        fail(f"cannot write {out}: {exc}")
    except OSError as exc:
        partial.unlink(missing_ok=True)
        fail(f"cannot write {out}: {exc.strerror or exc}")
    except KeyboardInterrupt:
        partial.unlink(missing_ok=True)
        fail(f"interrupted: nothing written{f'; {out} is as it was' if out.exists() else ''}", 130)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    turns = sum(1 for e in kept if e.get("k") == "turn")
    echo(f"wrote {out}: {counted(turns, 'complete turn')}, {counted(len(kept), 'event')}")
    if lost:
        echo(f"  dropped: {lost}")
