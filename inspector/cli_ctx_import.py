"""What `cp-inspect ctx import FILE --db DB` does, importable without typer.

An agent's harness, or a script over a folder of runs, loads each recording or trajectory into the store
with it (`for f in runs/*.cpsession; do cp-inspect ctx import "$f" --db ctx.sqlite; done`); under typer
each run imported typer, built every command of the program and pydantic's argument adapters before the
file was read. A plain command line (cli_argv.py) runs import_() here directly; the typer command
(ctx_cli.py) calls it too, so both check, store and answer alike.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from engine.errors import ContextPipeError
from engine.wording import counted

from .cli_ctx import _open, _retry
from .cli_output import echo
from .recording_open import fail, file_head, missing, starts_a_recording

if TYPE_CHECKING:
    from engine.store import ContextStore


def import_(db: Path, file: Path, format: str | None, again: bool) -> None:
    """`ctx import`'s work: the file's messages as items (system prompt and task pinned), with a mark that
    the store holds the file (a second import of the same bytes is refused unless `again`)."""
    from engine.store.ingest import ingest_session

    if file.is_dir():
        fail(f"{file} is a directory: give one recording or trajectory file from it", 2)
    if not file.exists():
        fail(missing(file), 2)
    if not file.is_file():
        fail(f"{file} is not a regular file (a FIFO or a device): give the recording or trajectory itself", 2)
    if format == "cpsession" or (format is None and _is_recording(file)):
        _import_recording(db, file, again)
        return
    from engine.importers import ImportFormatError, load

    try:
        session = load(file, format)
    except ImportFormatError as exc:
        fail(str(exc))
        return
    except ValueError as exc:  # an unknown --format: a usage error, as in `cp-inspect import`
        fail(str(exc), 2)
        return
    except OSError as exc:
        fail(f"cannot read {file}: {exc.strerror or exc}")
        return
    _load_into(db, file, again, lambda store: ingest_session(store, session),
               f"{session.format}, {counted(len(session.calls), 'call')}", (ContextPipeError,))


def _is_recording(file: Path) -> bool:
    if file.suffix == ".cpsession":
        return True
    head = file_head(file)
    return head is not None and starts_a_recording(head)


def _refuse_twice(store: ContextStore, db: Path, file: Path, again: bool) -> str:
    """The file's digest, after exiting (2; the caller's `finally` closes the store) if the store already holds it and
    --again was not given: a second import added every message again, with nothing said."""
    from engine.store.import_marks import file_digest, previous_import

    try:
        digest = file_digest(file)
    except OSError as exc:
        fail(f"cannot read {file}: {exc.strerror or exc}")
    before = previous_import(store, digest) if not again else None
    if before is not None:
        fail(
            f"{db} already holds {file} ({before}): importing it again would add every message a second "
            "time; pass --again to add it anyway, or give another --db",
            2,
        )
    return digest


def _mark(store: ContextStore, digest: str, file: Path, ids: list[int]) -> None:
    from engine.store.import_marks import mark_import

    if ids:
        mark_import(store, digest, f"imported as items #{ids[0]}..#{ids[-1]} from {file.name}")


def _import_recording(db: Path, file: Path, again: bool = False) -> None:
    from engine.recording.cpsession import RecordingError
    from engine.store.ingest import ingest_recording

    from .recording_open import open_recording

    # Opened once first for what every reader of recordings says: a missing or foreign file in one line,
    # and a cut-off last frame (a writer killed mid-write) as a warning: it imported silently, the
    # turns after the cut missing without a word.
    with open_recording(file) as reader:
        turns = reader.turn_count
    if turns == 0:
        # It said "imported 0 items (#0..#0)" with exit 0 (and made a store for them): simulate, verify,
        # explain and diff say of the same file that it holds no turn.
        fail(f"nothing to import: {file} holds no whole turn (its agent stopped before its first model call "
             "was recorded); the store is as it was")
    done: list[int] = []  # the recording's requests, counted as it is read

    def ingest(store: ContextStore) -> list[int]:
        ids, requests = ingest_recording(store, file)
        done.append(requests)
        return ids

    _load_into(db, file, again, ingest, lambda: f"cpsession, {counted(done[0], 'request')}",
               (ContextPipeError, RecordingError, OSError, KeyError, ValueError), named=True)


def _load_into(db: Path, file: Path, again: bool, ingest: Callable[[ContextStore], list[int]],
               what: str | Callable[[], str], errors: tuple[type[Exception], ...], named: bool = False) -> None:
    """Open the store, refuse a file it holds (unless `again`), add the items `ingest` makes and the mark
    that the file is in, in one transaction, and say so ("imported N items (#a..#b) from FILE (what)").
    Any of `errors` (with `named`, its message without the file's name in front: the line names it once),
    or Ctrl-C, leaves the store as it was and says so: a store this import created is removed again."""
    created = not db.exists()
    store = _open(db, importing=file)
    done = False
    try:
        digest = _refuse_twice(store, db, file, again)
        with store.batch():  # the items and the mark that they are in, together or not at all
            ids = ingest(store)
            _mark(store, digest, file, ids)
        done = True
    except errors as exc:
        msg = str(exc).removeprefix(f"{file}: ") if named else str(exc)
        fail(f"nothing imported from {file} (the store is as it was): {msg}{_retry(exc)}")
    except KeyboardInterrupt:
        fail(f"interrupted: nothing imported from {file} (the store is as it was)", 130)
    finally:
        store.close()
        if created and not done:
            # An empty store left at --db by an import that failed read as a store to `ctx get` (an empty
            # window, exit 0) and made the next `ctx import` of a mended file look like a second try.
            for leftover in (db, db.with_name(f"{db.name}-wal"), db.with_name(f"{db.name}-shm")):
                leftover.unlink(missing_ok=True)
    first = ids[0] if ids else 0
    last = ids[-1] if ids else 0
    echo(f"imported {counted(len(ids), 'item')} (#{first}..#{last}) from {file} "
         f"({what if isinstance(what, str) else what()})")
