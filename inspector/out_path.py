"""The file a command writes (`import -o`, `salvage -o`), checked before any work: one usage error (exit 2)
that names the path as given, for each way it cannot be written.

`import` checked its -o this way; `salvage` refused a directory as "already exists: pass --force" (and with
--force, exit 1 "Is a directory"), and a missing or unwritable directory as exit 1 naming its temporary
file (".x.cpsession.4928.partial"), which the person never gave.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .recording_open import fail


def partial_path(out: Path) -> Path:
    """Where a command writes OUT before renaming it over OUT when complete: a failure or Ctrl-C part way
    leaves OUT as it was, never a shorter file that reads as the whole."""
    return out.with_name(f".{out.name}.{os.getpid()}.partial")


@contextmanager
def written_whole(out: Path) -> Iterator[Path]:
    """The path to write OUT's content to (partial_path), renamed over OUT when the block ends; any error
    or Ctrl-C in it removes the partial file and is raised on, for the command to say in its own words."""
    partial = partial_path(out)
    try:
        yield partial
        os.replace(partial, out)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise


def check_out(out: Path, force: bool, option: str = "-o", example: str = "run.cpsession") -> None:
    """`out` can be written (a file path, new unless `force`, in a directory that exists and takes a new
    file), or the option's usage error (exit 2)."""
    if out.is_dir():
        fail(f"{option} {out} is a directory: give a file path, e.g. {out / example}", 2)
    if out.exists() and not force:
        fail(f"{option} {out} already exists: choose another path, or pass --force to replace it", 2)
    check_creatable(out, option)


def check_creatable(out: Path, option: str) -> None:
    """A file can be made where `out` goes (its directory exists and takes a new file), or the option's
    usage error (exit 2). Tried for real: root passes os.access on a read-only mount, and a user's
    ACL or a full quota is only known by trying."""
    if not out.resolve().parent.is_dir():
        fail(f"{option} {out}: directory {out.resolve().parent} does not exist", 2)
    why = cannot_create_in(out.resolve().parent)  # said of OUT, not of the temporary file beside it
    if why:
        fail(
            f"{option} {out}: cannot create a file in {out.resolve().parent} ({why}): "
            "give a path in a directory you can write to",
            2,
        )


def cannot_create_in(directory: Path) -> str | None:
    """Why no new file can be made in `directory` (its mode, a read-only mount, a quota), or None."""
    trial = directory / f".cp-write-check.{os.getpid()}.partial"
    try:
        os.close(os.open(trial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        trial.unlink()
    except OSError as exc:
        return exc.strerror or str(exc)
    return None
