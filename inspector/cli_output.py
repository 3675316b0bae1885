"""A command's output line, written as typer.echo writes it, without importing typer.

The typer-free command paths (cli_argv.py) print what the typer commands print. typer.echo (click's
echo) writes the text and a newline to stdout and flushes; it differs from that only for text holding
an escape character (it strips ANSI codes when stdout is not a terminal) or a stdout whose encoding is
not UTF-8 (it re-wraps a misconfigured stream). Those cases go to typer.echo itself, so the output is
the same byte for byte either way.
"""

from __future__ import annotations

import codecs
import sys


def echo(text: str, err: bool = False, nl: bool = True) -> None:
    """Print `text` and a newline (none with nl=False) to stdout (stderr with `err`), as
    typer.echo(text, err=err, nl=nl) does."""
    out = sys.stderr if err else sys.stdout
    if out is None or "\x1b" in text or not _utf8(out):
        import typer

        typer.echo(text, err=err, nl=nl)
        return
    out.write(text + "\n" if nl else text)
    out.flush()


def _utf8(stream: object) -> bool:
    name = getattr(stream, "encoding", None)
    if not isinstance(name, str):
        return False
    try:
        return codecs.lookup(name).name == "utf-8"
    except LookupError:
        return False
