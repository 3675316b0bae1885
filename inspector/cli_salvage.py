"""What `cp-inspect salvage FILE -o OUT` does, importable without typer: a plain salvage command line
(cli_argv.py) runs it without typer's dispatch. The typer command `salvage` (cli.py) calls salvage()
here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine.wording import counted

from .cli_output import echo
from .out_path import check_out, written_whole
from .recording_open import fail, open_recording


def salvage(file: Path, out: Path, force: bool = False) -> None:
    """`cp-inspect salvage`'s work: copy every intact event before the first damage into OUT."""
    from engine.recording.cpsession import RecordingError, RecordingWriter

    # Usage errors (exit 2), as for import -o and demo --record.
    if out.resolve() == file.resolve():
        fail("the salvaged copy must go to another path than the damaged file", 2)
    check_out(out, force)
    # The damage found as it opens is the report's "dropped:" line: warned of too, it was said twice.
    r = open_recording(file, salvage=True, warn_damage=False)
    kept: list[dict[str, Any]] = []
    lost = r.damage.message if r.damage is not None else None
    try:
        for _, ev in r.event_frames():
            kept.append(ev)
    except RecordingError as exc:
        lost = str(exc).split(". Frames before it", 1)[0]
    while lost and kept and kept[-1].get("k") != "turn":
        kept.pop()  # damage cut the last turn short: its events are dropped with it
    turns = sum(1 for e in kept if e.get("k") == "turn")
    if turns == 0:
        # A copy of a header and no turn wrote "0 complete turns" with exit 0: a file every reader then
        # refuses ("holds no events"), handed over as the rescued recording.
        why = f" before its damage ({lost.removeprefix(f'{file}: ')})" if lost else ""
        fail(f"nothing to salvage: {file} holds no complete turn{why}; nothing was written")
    header = {k: v for k, v in r.header.items() if k not in ("format", "version")}
    # Written beside OUT and renamed over it when complete, as import does: a failure or Ctrl-C while
    # writing left a partial OUT (and, with --force, the file it replaced was already truncated).
    try:
        with written_whole(out) as partial, RecordingWriter(partial, header) as w:
            for ev in kept:
                w.append(ev)
    except (RecordingError, ValueError) as exc:
        fail(f"cannot write {out}: {exc}")
    except OSError as exc:
        fail(f"cannot write {out}: {exc.strerror or exc}")
    except KeyboardInterrupt:
        fail(f"interrupted: nothing written{f'; {out} is as it was' if out.exists() else ''}", 130)
    echo(f"wrote {out}: {counted(turns, 'complete turn')}, {counted(len(kept), 'event')}")
    if lost:
        echo(f"  dropped: {lost}")
    elif r.finished:
        # An intact, closed recording: the copy is the same session (said, where "wrote OUT: 93 complete
        # turns" alone left the person looking for what had been wrong).
        echo(f"  nothing was damaged: {file} was whole and closed; the copy holds every turn")
    else:
        echo(f"  nothing was damaged: {file} was only not closed (its writer stopped between two turns)")
