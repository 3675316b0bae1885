"""What `cp-inspect verify FILE` does, importable without typer: a plain `verify FILE` (cli_argv.py)
runs it without typer's dispatch (every command built, pydantic imported to coerce the path), as a CI
step or a loop over recordings runs it. The typer command `verify` (cli.py) first refuses a second
file (cli.one_file_only), then calls verify() here."""

from __future__ import annotations

import time
from pathlib import Path

from engine.wording import counted

from .cli_events import event_frames, event_offset
from .cli_explain import _DAMAGED
from .cli_output import echo
from .recording_open import fail, open_recording, salvage_advice


def verify(file: Path) -> None:
    """`cp-inspect verify`'s work: replay the recording and check every turn's request hash."""
    from engine.recording.cpsession import RecordingError
    from engine.recording.replay import Replayer, ReplayError

    r = open_recording(file)
    if r.data_end <= r.data_start:  # no events; not damage: the salvage hint below would send its reader looking for some
        fail(f"{file} holds no events: its agent stopped before its first turn was recorded; nothing to verify")
    t0 = time.perf_counter()
    try:
        # Read twice, none of it held (Replayer.verify_stream): memory no longer grows with the file.
        report = Replayer.verify_stream(lambda: (ev for _, ev in event_frames(r)))
    except ReplayError as exc:
        at = exc.event_index
        offsets = [pos for _, (pos, _ev) in zip(range((at or 0) + 1), event_frames(r), strict=False)] if at is not None else []
        fail(f"{file}: {exc}{event_offset(offsets, at)}; {_DAMAGED}")
    except RecordingError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"cannot read {file}: {exc.strerror or exc}")
    ms = (time.perf_counter() - t0) * 1000
    if report.ok:
        echo(f"ok: {counted(report.turns, 'turn')} replayed, every request hash matches ({ms:.0f} ms)")
        if r.damage is not None:
            # Cut off at its end (a killed writer) or its footer damaged: the turns before the damage are
            # whole and match, so this is exit 0 as every command reads such a file (with the reader's
            # warning), but a check passing over a damaged file says what it left out and how to mend it.
            echo(
                f"note: {file} is damaged after the turns above (the warning says where and why): they are "
                f"every whole turn it holds; {salvage_advice(file)}"
            )
        elif not r.finished:
            # A clean end without the footer close() writes: nothing is damaged, but the session may
            # have gone on past what the file holds.
            echo(
                "note: the recording was not closed (its agent was killed, its disk filled, or it is still "
                "being written): it ends after the turns above"
            )
        return
    echo(
        f"FAILED: {len(report.mismatches)} of {counted(report.turns, 'turn')} differ; first: {report.mismatches[0]}"
    )
    from engine.pipeline import ENGINE_VERSION

    recorded = r.header.get("engine_version")
    if recorded and recorded != ENGINE_VERSION:
        echo(
            f"note: recorded by engine {recorded}, replayed by {ENGINE_VERSION}: a newer engine may plan differently"
        )
    import typer  # only on the way out, as fail() does

    raise typer.Exit(1)
