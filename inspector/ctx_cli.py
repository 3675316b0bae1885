"""`cp-inspect ctx ...` (the context store) and `cp-inspect eval` (store vs last-N on real trajectories).

The lead mounts `ctx_app` as the `ctx` group and `eval_command` as `eval` in inspector/cli.py.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from engine.errors import ContextPipeError
from engine.store.items import Kind, replace_surrogates
from engine.wording import counted
from inspector.cli_common import fail
from inspector.missing_param import OneLineMissing
from inspector.token_arg import number_option, tokens_option

if TYPE_CHECKING:
    from engine.store import ContextStore, Window

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

DbOpt = Annotated[Path, typer.Option("--db", help="The store's SQLite file (created if missing).")]
# get and expand read a store: a mistyped --db must not become a new, empty one that answers "no item
# #5" or an empty window as if that were the store's content.
ExistingDbOpt = Annotated[Path, typer.Option("--db", help="The store's SQLite file (ctx add or ctx import makes one).")]


def _open(db: Path, *, create: bool = True, importing: Path | None = None) -> ContextStore:
    """The store at `db`, or exit with why not. `importing`: the file an import would have read, named in
    the error with the fact that nothing of it was imported (a store locked as it opened said only that
    it was locked, which left open whether part of the import had gone in)."""
    # The store (SQLite, scoring, tokenizer) is imported when a command opens one, not for --help.
    from engine.store import ContextStore

    # A --db that cannot name a store file is a usage error (exit 2), as a missing one for get is.
    if db.is_dir():
        fail(f"{db} is a directory: give --db the path of a store file (e.g. {db / 'ctx.sqlite'})", 2)
    if not create and not db.exists():
        fail(f"{db}: no context store there; check --db (ctx add or ctx import creates a store)", 2)
    if not db.parent.is_dir():
        fail(f"cannot create {db}: directory {db.parent} does not exist (check --db)", 2)
    if not create and _empty_file(db):
        # SQLite takes an empty file for an empty database: get made it a store and printed nothing.
        fail(f"{db} is an empty file, not a context store; check --db (ctx add or ctx import creates a store)", 2)
    try:
        return ContextStore(db)
    except ContextPipeError as exc:
        if importing is None:
            fail(str(exc))
        fail(f"nothing imported from {importing} (the store is as it was): {exc}{_retry(exc)}")


def _retry(exc: BaseException) -> str:
    """What a failed import adds when the store was locked: the import itself may be run again. Said
    whether the lock was met as the store opened or as the import began writing (a reader no longer
    needs the lock to open it, so an import now opens and meets the other writer at its first write)."""
    from engine.store import StoreLockedError

    return "; then run the import again" if isinstance(exc, StoreLockedError) else ""


def _fresh_hint(exc: BaseException) -> str:
    """What a sticky get that met another writer adds: --fresh reads the store without waiting for it."""
    from engine.store import StoreLockedError

    return "; or look now with `ctx get --fresh`, which only reads" if isinstance(exc, StoreLockedError) else ""


def _empty_file(db: Path) -> bool:
    """A 0-byte file with no write-ahead log beside it (a store's log can hold every page before the
    first checkpoint, but SQLite writes the file's first page when it makes the store)."""
    try:
        if not db.is_file() or db.stat().st_size:
            return False
        wal = db.with_name(db.name + "-wal")
        return not (wal.is_file() and wal.stat().st_size)
    except OSError:
        return False


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
    try:
        k = Kind.parse(kind)
    except ValueError as exc:
        fail(str(exc), 2)
        return
    if not 0.0 <= importance <= 1.0:  # an option out of range, said before a store is opened (exit 2)
        fail(f"--importance must be between 0 and 1, got {importance:g}", 2)
    # Bytes that are not UTF-8 (a binary tool output piped in, a latin-1 argument) are kept as U+FFFD,
    # as `--kind file_read` reads a file: the store holds text, and a lone surrogate cannot be stored.
    if k is Kind.FILE_READ and source and text is None and not Path(source).exists():
        # The path given is wrong: a usage error (exit 2), as `ctx import` of a missing file is.
        fail(f"--source {source}: no such file (give the path of the file the agent read)", 2)
    if text is None and not (k is Kind.FILE_READ and source) and sys.stdin.isatty():
        # No TEXT and nothing piped in: reading the terminal waited, with no prompt, for an EOF that a
        # user who forgot TEXT does not know to type. `-` still reads a terminal (the user asked for it).
        fail("nothing to add: give the item's text as TEXT, or pipe it in (`... | cp-inspect ctx add --db DB -`)", 2)
    if text is None or text == "-":
        body = sys.stdin.buffer.read().decode("utf-8", "replace")
    else:
        body = replace_surrogates(text)
    if not (k is Kind.FILE_READ and source and text is None) and not body.strip():
        fail("nothing to add: the item's text is empty (give TEXT, or - with the text on stdin)", 2)
    store = _open(db)
    try:
        if k is Kind.FILE_READ and source and text is None:
            new_id = store.add_file_read(source, pin=pin, importance=importance)
        else:
            new_id = store.add(body, k, pin=pin, importance=importance, source=source)
    except (ContextPipeError, ValueError) as exc:
        fail(str(exc))
        return
    finally:
        store.close()
    typer.echo(str(new_id))


_HEADINGS = ("pinned", "recent", "relevant", "other (references, importance, value per token)", "summaries",
             "stubs")


def _heading(r: dict[str, Any]) -> str:
    """The one heading of `ctx get --explain` an item of the window's manifest goes under: the first of
    pinned, a summary or stub form, recent (or appended since the last window), relevant to the query."""
    if r["pinned"]:
        return "pinned"
    if r["form"] == "summary":
        return "summaries"
    if r["form"] == "stub":
        return "stubs"
    if any(x.startswith(("recent", "appended", "kept")) for x in r["reasons"]):
        return "recent"
    if any(x.startswith("relevant") for x in r["reasons"]):
        return "relevant"
    return _HEADINGS[3]


def _explain(window: Window) -> str:
    m = window.manifest()
    lines = [
        f"window: {window.used} of {window.budget} tokens used ({window.usable} usable after margin), "
        f"mode {window.mode}, turn {window.turn}, tokenizer {window.tokenizer}",
    ]
    for note in window.notes:
        lines.append(f"  note: {note}")

    def section(title: str, rows: list[dict[str, Any]]) -> None:
        lines.append(f"{title} ({len(rows)}, {sum(int(r['tokens']) for r in rows)} tokens)")
        for r in rows:
            lines.append(
                f"  #{r['id']:<6} {r['kind']:<11} {r['form']:<8} {r['tokens']:>6}t  score {r['score']:.3f}  "
                + "; ".join(r["reasons"])
            )

    # Each item under one heading, so the headings' counts and tokens add up to the window's (items
    # both recent and relevant were listed twice; those in for references, importance or value per
    # token under none: 48 of 136 items of an imported DeepSeek session at 30k).
    groups: dict[str, list[dict[str, Any]]] = {h: [] for h in _HEADINGS}
    for r in m["items"]:
        groups[_heading(r)].append(r)
    for title, rows in groups.items():
        section(title, rows)
    dropped = m["dropped"]
    lines.append(f"dropped ({len(dropped)})")
    for d in dropped:
        lines.append(
            f"  #{d['id']:<6} {d['kind']:<11} {d['tokens']:>6}t  score {d['score']:.3f}  {d['reason']}"
        )
    return "\n".join(lines)


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
    from engine.errors import ConfigError
    from engine.store.budget import MAX_BUDGET, parse_budget

    if as_json and explain:  # --explain was dropped without a word: the JSON manifest is its data
        fail("choose one of --json (the manifest) and --explain (the same, as text)", 2)

    budget = tokens_option(budget_text, "--budget")
    assert budget is not None  # a required option
    if budget <= 0 or budget > MAX_BUDGET:
        fail(f"--budget must be between 1 and {MAX_BUDGET:,} tokens, got {budget}", 2)
    try:
        parse_budget(budget)  # a budget too small for one message is a usage error too (exit 2)
    except ConfigError as exc:
        fail(f"--budget: {exc}", 2)
    store = _open(db, create=False)
    try:
        # --fresh is a look at the store: it moves no turn and records nothing, so it takes no write
        # lock and is served beside another process's import (the sticky get records its window).
        window = store.context_get(budget, model=model, query=query, sticky=not fresh, advance_turn=not fresh)
        empty = not window.entries and len(store) == 0
    except (ContextPipeError, ValueError) as exc:
        fail(f"{exc}{_fresh_hint(exc) if not fresh else ''}")
        return
    finally:
        store.close()
    if empty and not as_json:  # the plain output was nothing at all, exit 0, as if the command had hung up
        typer.echo(f"{db} holds no items yet: add some with `ctx add` or `ctx import`", err=True)
    if as_json:
        m = window.manifest()
        m["messages"] = [{"role": e.role, "content": e.text} for e in window.entries]
        typer.echo(json.dumps(m, indent=2, ensure_ascii=False, sort_keys=True))
    elif explain:
        typer.echo(_explain(window))
    else:
        for e in window.entries:
            typer.echo(f"--- {e.role} #{e.id} ({e.kind}, {e.form}, {e.tokens} tokens)")
            typer.echo(e.text)


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
    from engine.store.paging import EXPAND_PAGE_CHARS

    if item_id < 1:
        fail(f"item ids start at 1, got {item_id}: give the number after # in a stub, e.g. `ctx expand --db DB 5`", 2)
    if whole and (offset is not None or limit is not None):
        fail("choose --all (the whole text) or --offset/--limit (a page), not both", 2)
    if offset is not None and offset < 0:
        fail(f"--offset must be 0 or more characters, got {offset}", 2)
    if limit is not None and limit < 1:
        fail(f"--limit must be at least 1 character, got {limit}", 2)
    paged = offset is not None or limit is not None
    store = _open(db, create=False)
    try:
        if whole:
            text = store.expand(item_id)
        else:
            # Asked for whole by default only when it is short: a 50 MB tool output filled the terminal.
            page = store.expand_page(item_id, offset or 0, limit or EXPAND_PAGE_CHARS)
            text = page.text
    except (ContextPipeError, KeyError) as exc:
        fail(str(exc))
        return
    except ValueError as exc:  # an --offset past the end of the text
        fail(f"--offset: {exc}", 2)
        return
    finally:
        store.close()
    if whole or (not paged and not page.left):
        typer.echo(text)
        return
    # The page exactly as stored (no newline added), so that pages written one after another are the
    # text; where it stands and how to get the rest go to stderr.
    typer.echo(text, nl=False)
    lead = "\n" if text and not text.endswith("\n") else ""  # the note starts a line of its own
    rest = f"\nnext page: ctx expand --db {db} {page.item_id} --offset {page.end} (or --all)" if page.left else ""
    if page.note():
        typer.echo(f"{lead}{page.note()}{rest}", err=True)


@ctx_app.command("import", short_help="Load a recording or trajectory into the store.")
def import_cmd(
    db: DbOpt,
    file: Annotated[
        Path,
        typer.Argument(
            help="A .cpsession recording, or a trajectory file (mini-swe-agent, SWE-agent, OpenHands, "
            "SWE-smith, claude-trace, proxy JSONL)."
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
    from engine.store.ingest import ingest_session

    if file.is_dir():
        fail(f"{file} is a directory: give one recording or trajectory file from it", 2)
    if not file.exists():
        fail(f"{file}: no such file", 2)
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
    store = _open(db, importing=file)
    try:
        digest = _refuse_twice(store, db, file, again)
        with store.batch():  # the items and the mark that they are in, together or not at all
            ids = ingest_session(store, session)
            _mark(store, digest, file, ids)
    except ContextPipeError as exc:
        fail(f"nothing imported from {file} (the store is as it was): {exc}{_retry(exc)}")
        return
    except KeyboardInterrupt:
        fail(f"interrupted: nothing imported from {file} (the store is as it was)", 130)
        return
    finally:
        store.close()
    first = ids[0] if ids else 0
    last = ids[-1] if ids else 0
    typer.echo(
        f"imported {counted(len(ids), 'item')} (#{first}..#{last}) from {file} "
        f"({session.format}, {counted(len(session.calls), 'call')})"
    )


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
    return f"{n / 1e6:.1f} MB"


def _is_recording(file: Path) -> bool:
    if file.suffix == ".cpsession":
        return True
    try:
        with file.open("rb") as f:
            head = f.read(64)
    except OSError:
        return False
    return b"@header" in head and b"cpsession" in head


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
    open_recording(file).close()
    store = _open(db, importing=file)
    try:
        digest = _refuse_twice(store, db, file, again)
        with store.batch():  # the items and the mark that they are in, together or not at all
            ids, requests = ingest_recording(store, file)
            _mark(store, digest, file, ids)
    except (ContextPipeError, RecordingError, OSError, KeyError, ValueError) as exc:
        msg = str(exc).removeprefix(f"{file}: ")
        fail(f"nothing imported from {file} (the store is as it was): {msg}{_retry(exc)}")
        return
    except KeyboardInterrupt:
        fail(f"interrupted: nothing imported from {file} (the store is as it was)", 130)
        return
    finally:
        store.close()
    first = ids[0] if ids else 0
    last = ids[-1] if ids else 0
    typer.echo(f"imported {counted(len(ids), 'item')} (#{first}..#{last}) from {file} "
        f"(cpsession, {counted(requests, 'request')})")


def eval_command(
    trajectories: Annotated[
        Path | None,
        typer.Option(
            "--trajectories",
            help="Folder of trajectories (default: ../shared/trajectories or $CONTEXTPIPE_TRAJECTORIES).",
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
    from engine.store.evaluate import (
        BUDGET_FRACTIONS,
        POLICIES,
        default_root,
        format_report,
        run_eval,
        trajectory_files,
    )

    if trajectories is not None and not trajectories.is_dir():
        # Asked for by name: a mistyped folder is an error, not the "skipped" (exit 0) of a missing default.
        fail(f"--trajectories {trajectories}: no such folder (give the folder holding the trajectories)", 2)
    root = trajectories or default_root()
    if not root.is_dir():
        skipped = f"no trajectories at {root} (set CONTEXTPIPE_TRAJECTORIES or --trajectories)"
        if as_json:  # stdout stays one JSON document (this line went there as plain text)
            typer.echo(f"skipped: {skipped}", err=True)
            typer.echo(json.dumps({"skipped": skipped}))
        else:
            typer.echo(f"skipped: {skipped}")
        return
    if trajectories is not None and not trajectory_files(root):
        # A table of zeros (it crashed on a KeyError before) would read as a result.
        fail(f"--trajectories {trajectories}: no trajectory files (*.json, *.traj) in it, nor in its subfolders", 2)
    report = run_eval(root, progress=None if as_json else (lambda s: typer.echo(s, err=True)))
    if not report.results:
        why = "; ".join(f"{name}: {reason}" for name, reason in report.skipped[:3])
        fail(f"no trajectory under {root} could be read ({counted(len(report.skipped), 'file')} skipped: {why})")
    if as_json:
        tot = report.totals()
        out: dict[str, Any] = {
            f"{lb}/{pol}": {
                "uses": tot[(lb, pol)].uses,
                "served": tot[(lb, pol)].served,
                "recall": round(tot[(lb, pol)].recall, 4),
                "macro_recall": round(report.macro(lb, pol), 4),
                "task_present": round(tot[(lb, pol)].task_rate, 4),
                "resolves": tot[(lb, pol)].resolves,
            }
            for lb, _ in BUDGET_FRACTIONS
            for pol in POLICIES
        }
        if report.skipped:  # only then: the document's keys stay what they were for a clean run
            out["skipped_files"] = [{"file": name, "reason": why} for name, why in report.skipped]
        typer.echo(json.dumps(out, indent=2, sort_keys=True))
    else:
        typer.echo(format_report(report, per_trajectory=per_trajectory))
