"""`cp-inspect ctx ...` (the context store) and `cp-inspect eval` (store vs last-N on real trajectories):
their typer commands. The work of get, add, expand (cli_ctx.py), import (cli_ctx_import.py) and eval
(cli_eval.py) is in typer-free modules, which the console script runs directly for a plain command line
(cli_argv.py).

The lead mounts `ctx_app` as the `ctx` group and `eval_command` as `eval` in inspector/cli.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from engine.errors import ContextPipeError
from engine.store.items import Kind
from engine.wording import counted
from inspector import cli_ctx, cli_ctx_import, cli_eval
from inspector.cli_common import fail
from inspector.cli_ctx import _explain as _explain  # the window explanation, which tests read from here
from inspector.cli_ctx import _open
from inspector.missing_param import OneLineMissing
from inspector.token_arg import number_option

ctx_app = typer.Typer(
    name="ctx",
    # Short enough that `cp-inspect --help` shows it whole (a longer one is cut at "...").
    help="The SQLite context store: add, import, get windows, expand.",
    short_help="The SQLite context store: add, import, get windows, expand.",  # never cut, only wrapped
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Plain click help: rich mode prints a type tag on every flag ("--json <bool>"), which reads as if
    # the flag took a value.
    rich_markup_mode=None,
    cls=OneLineMissing,  # a missing parameter is one cp-inspect line (inspector/missing_param.py)
)

DbOpt = Annotated[Path, typer.Option(
    "--db", help="The store's SQLite file (created if missing).", readable=False)]
# get and expand read a store: a mistyped --db must not become a new, empty one that answers "no item
# #5" or an empty window as if that were the store's content.
ExistingDbOpt = Annotated[Path, typer.Option(
    "--db", help="The store's SQLite file (ctx add or ctx import makes one).", readable=False)]


# short_help: `ctx --help` cut each docstring at the list's width with "..." (at 60 columns four of the five).
@ctx_app.command("add", short_help="Store an item and print its id.")
def add_cmd(
    db: DbOpt,
    text: Annotated[str | None, typer.Argument(help="The item's text, or - to read it from stdin.")] = None,
    kind: Annotated[
        str, typer.Option("--kind", help=f"One of: {', '.join(k.value for k in Kind)}.")
    ] = "user",
    pin: Annotated[bool, typer.Option("--pin", help="Always include this item in full.")] = False,
    importance: Annotated[float, typer.Option(
        "--importance", parser=number_option("--importance", "a number from 0 to 1, e.g. 0.8", float),
        help="Application importance, 0..1.")] = 0.0,
    source: Annotated[
        str | None, typer.Option("--source", help="Tool call id, or for --kind file_read the file's path.")
    ] = None,
) -> None:
    """Store an item and print its id.

    \b
    Example:
      cp-inspect ctx add --db ctx.sqlite --kind memory --pin "The build runs on Python 3.11."
    """
    cli_ctx.add(db, text, kind, pin, importance, source)


@ctx_app.command("get", short_help="Serve a window that fits BUDGET and print it.")
def get_cmd(
    db: ExistingDbOpt,
    budget_text: Annotated[str, typer.Option(
        "--budget", metavar="<tokens>", help="Window ceiling in tokens: 12000, 12k, 1.5M (a 2% margin is kept).")],
    query: Annotated[str | None, typer.Option("--query", help="Free text to rank items by (BM25).")] = None,
    model: Annotated[
        str | None, typer.Option("--model", help="Model name (token counting); 'chars' = estimate.")
    ] = None,
    explain: Annotated[
        bool, typer.Option("--explain", help="Show what went in, in which form, and why.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the manifest as JSON.")] = False,
    fresh: Annotated[
        bool,
        typer.Option(
            "--fresh",
            help="Solve from scratch instead of the sticky window. Only reads: the turn and the sticky "
            "window stay as they are, and it runs while another process writes (ctx import).",
        ),
    ] = False,
) -> None:
    """Serve a window that fits BUDGET and print it (or its explanation / JSON manifest).

    \b
    Example:
      cp-inspect ctx get --db ctx.sqlite --budget 12000 --explain     (a store from `ctx import` or `ctx add`)
    """
    cli_ctx.get(db, budget_text, query, model, explain, as_json, fresh)


# "-1" would otherwise be read as an unknown option ("No such option: -1"): it reaches the id check.
@ctx_app.command("expand", short_help="Print the original text behind a stub or summary.",
                 context_settings={"ignore_unknown_options": True})
def expand_cmd(
    db: ExistingDbOpt,
    item_id: Annotated[int, typer.Argument(
        metavar="ID", parser=number_option("ID", "the number after # in a stub, e.g. `ctx expand --db DB 5`"),
        help="Item id (the # in a stub).")],
    offset: Annotated[int | None, typer.Option(
        "--offset", parser=number_option("--offset", "a character offset, e.g. 100000"),
        help="Print from this character on (a page; see --limit).")] = None,
    limit: Annotated[int | None, typer.Option(
        "--limit", parser=number_option("--limit", "a number of characters, e.g. 100000"),
        help="Print at most this many characters (default 100,000).")] = None,
    whole: Annotated[bool, typer.Option("--all", help="Print the whole text, however long.")] = False,
) -> None:
    """Print the original text behind a stub or summary.

    A text over 100,000 characters is printed a page at a time: stdout gets the page exactly as
    stored (pages printed one after another join to the whole text), and stderr says what is left
    and the --offset of the next page. --all prints it whole.

    \b
    Example:
      cp-inspect ctx expand --db ctx.sqlite 5     (5: the number after # in a stub)
    """
    cli_ctx.expand(db, item_id, offset, limit, whole)


@ctx_app.command("import", short_help="Load a recording or trajectory into the store.")
def import_cmd(
    db: DbOpt,
    file: Annotated[
        Path,
        typer.Argument(
            help="A .cpsession recording, or a trajectory file (mini-swe-agent, SWE-agent, OpenHands, "
            "SWE-smith, claude-trace, proxy JSONL).",
            readable=False,
        ),
    ],
    format: Annotated[
        str | None,
        typer.Option(
            "--format",
            help="Force a format instead of sniffing: cpsession, mini-swe-agent, swe-agent, openhands, "
            "swe-smith, claude-trace or proxy-jsonl.",
        ),
    ] = None,
    again: Annotated[
        bool,
        typer.Option(
            "--again",
            help="Add the file even if the store already holds it (every message a second time).",
        ),
    ] = False,
) -> None:
    """Load a recording or trajectory into the store (system prompt and task pinned); prints how many items
    were added. A file the store already holds (the same bytes) is refused unless --again is given.

    \b
    Example:
      cp-inspect ctx import demo_sessions/scout-anthropic.cpsession --db ctx.sqlite
    """
    cli_ctx_import.import_(db, file, format, again)


@ctx_app.command("reindex", short_help="Rebuild the search index of an older store.")
def reindex_cmd(
    db: ExistingDbOpt,
    vacuum: Annotated[
        bool, typer.Option("--vacuum", help="Then rewrite the file to give the freed space back to the disk.")
    ] = False,
) -> None:
    """Rebuild the search index of an older store (one made before 2026-12-04).

    The index holds at most the first 1,000,000 and last 100,000 characters of an item, cut at word
    boundaries. An older version indexed big items whole (a large file; their middle found by --query
    where a new item's is not). Bodies, ids and windows are unchanged. Other writers wait while it runs;
    on a store whose index is already current it does nothing unless --vacuum is given.

    \b
    Example:
      cp-inspect ctx reindex --db ctx.sqlite --vacuum
    """
    store = _open(db, create=False)
    try:
        if store.index_is_current() and not vacuum:
            typer.echo(f"{db}: the search index is current ({counted(len(store), 'item')}); nothing to do")
            return
        done = store.reindex(vacuum=vacuum)
    except ContextPipeError as exc:
        fail(f"{exc} (the search index is as it was)")
        return
    except KeyboardInterrupt:
        fail("interrupted: the search index is as it was", 130)
        return
    finally:
        store.close()
    cut = f", {done.cut} of them over 1.1 M characters (head and tail indexed)" if done.cut else ""
    line = f"reindexed {counted(done.items, 'item')}{cut}; index {_mb(done.index_before)} -> {_mb(done.index_after)}"
    if vacuum:
        line += f"; file {_mb(done.file_before)} -> {_mb(done.file_after)}"
    elif done.index_after < done.index_before:
        line += " (the file keeps its size and reuses the space; --vacuum gives it back)"
    typer.echo(line)


def _mb(n: int) -> str:
    """A size as `ctx reindex` says it: in MB from 1 MB, else in kB, else in bytes. In MB to one place a
    store of a few hundred items read "index 0.1 MB -> 0.0 MB": the index it had just built, said as none."""
    if n >= 1_000_000:
        return f"{n / 1e6:.1f} MB"
    if n >= 1_000:
        return f"{n / 1e3:.0f} kB"
    return counted(n, "byte")


def eval_command(
    trajectories: Annotated[
        Path | None,
        typer.Option(
            "--trajectories",
            help="Folder of trajectories (default: ../shared/trajectories or $CONTEXTPIPE_TRAJECTORIES).",
            readable=False,
        ),
    ] = None,
    per_trajectory: Annotated[
        bool, typer.Option("--per-trajectory", help="Also print one line per trajectory.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the totals as JSON.")] = False,
) -> None:
    """Replay real trajectories through the store at full, half and quarter of each one's peak context,
    against the keep-the-last-N-messages baseline, and report how often what the agent used next was in
    the window."""
    cli_eval.eval_(trajectories, per_trajectory, as_json)
