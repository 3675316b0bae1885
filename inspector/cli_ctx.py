"""What `cp-inspect ctx get`, `ctx add` and `ctx expand` do, importable without typer.

An agent that keeps its context in the store calls these in its loop: `ctx add` for each message,
`ctx get` for each turn's window, `ctx expand` for a stub it wants whole. Under typer each call imported
typer, built every command of the program and pydantic's argument adapters: ~80% of the CPU of a
`ctx get` on the demo's store (BENCHMARKS.md, Start-up). A plain command line (cli_argv.py) runs the
work here directly; the typer commands (ctx_cli.py) call the same functions, so both read, check and
answer alike. The store itself (SQLite, scoring, tokenizer) is imported only when a command opens one.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.errors import ContextPipeError

from .cli_output import echo
from .recording_open import fail, file_head, starts_a_recording, starts_json
from .token_arg import tokens_option

if TYPE_CHECKING:
    from engine.store import ContextStore, Window


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
    if (kind := _not_a_store(db)) is not None:
        # It said "not a usable context store (file is not a database) ... move it aside and rebuild a fresh
        # store": advice for a damaged store, given of the recording or trajectory named as --db by mistake.
        fail(f"--db {db} is {kind}, not a context store: load it into one with "
             f"`cp-inspect ctx import {db} --db ctx.sqlite`, then give --db ctx.sqlite", 2)
    try:
        return ContextStore(db)
    except ContextPipeError as exc:
        if importing is None:
            fail(str(exc))
        fail(f"nothing imported from {importing} (the store is as it was): {exc}{_retry(exc)}")


def _not_a_store(db: Path) -> str | None:
    """What `db` is when it is a recording or a JSON trajectory rather than a store (None otherwise)."""
    head = file_head(db)
    if head is None:
        return None  # missing (a new store) or unreadable: the store's own open says so
    if starts_a_recording(head):
        return "a .cpsession recording"
    if starts_json(head):
        return "JSON (a trajectory or log?)"
    return None


def _retry(exc: BaseException) -> str:
    """What a failed import adds when the store was locked: the import itself may be run again. Said
    whether the lock was met as the store opened or as the import began writing (a reader no longer
    needs the lock to open it, so an import now opens and meets the other writer at its first write)."""
    from engine.store import StoreLockedError

    return "; then run the import again" if isinstance(exc, StoreLockedError) else ""


def _pins_said(exc: BaseException, budget: int) -> str:
    """The store's error, pins that do not fit said in the command's terms: its "Raise the budget or unpin
    something" named no budget, and the command line has no way to unpin (a person who had imported a few
    runs into one store, each of which pins its system prompt and task, was left without a next step)."""
    from engine.store.errors import PinsExceedBudgetError

    text = str(exc)
    if not isinstance(exc, PinsExceedBudgetError) or exc.usable <= 0:
        return text
    # The smallest budget whose usable part (the margin is a share of it) holds the pins, rounded up.
    need = -(-exc.pinned_tokens * budget // exc.usable)
    need = -(-need // 100) * 100
    return text.replace(
        "Raise the budget or unpin something",
        f"Give --budget {need} or more; or keep fewer pins in one store (each `ctx import` pins its run's "
        "system prompt and task, `ctx add --pin` its item): import runs into separate stores (--db)",
    )


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


def get(db: Path, budget_text: str, query: str | None, model: str | None, explain: bool, as_json: bool,
        fresh: bool) -> None:
    """`ctx get`'s work: serve a window that fits the budget and print it (or its explanation / manifest)."""
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
        fail(f"{_pins_said(exc, budget)}{_fresh_hint(exc) if not fresh else ''}")
        return
    finally:
        store.close()
    if empty and not as_json:  # the plain output was nothing at all, exit 0, as if the command had hung up
        echo(f"cp-inspect: {db} holds no items yet: add some with `ctx add` or `ctx import`", err=True)
    if as_json:
        m = window.manifest()
        m["messages"] = [{"role": e.role, "content": e.text} for e in window.entries]
        echo(json.dumps(m, indent=2, ensure_ascii=False, sort_keys=True))
    elif explain:
        from .cli_table import fit_text, terminal_columns

        echo(fit_text(_explain(window), terminal_columns()))  # (the manifest only: never the window's text)
    else:
        for e in window.entries:
            echo(f"--- {e.role} #{e.id} ({e.kind}, {e.form}, {e.tokens} tokens)")
            echo(e.text)


def add(db: Path, text: str | None, kind: str, pin: bool, importance: float, source: str | None) -> None:
    """`ctx add`'s work: store an item and print its id."""
    from engine.store.items import Kind, replace_surrogates

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
    echo(str(new_id))


def expand(db: Path, item_id: int, offset: int | None, limit: int | None, whole: bool) -> None:
    """`ctx expand`'s work: print the original text behind a stub or summary (a page of a long one)."""
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
        echo(text)
        return
    # The page exactly as stored (no newline added), so that pages written one after another are the
    # text; where it stands and how to get the rest go to stderr.
    echo(text, nl=False)
    lead = "\n" if text and not text.endswith("\n") else ""  # the note starts a line of its own
    rest = (
        f"\ncp-inspect: next page: ctx expand --db {db} {page.item_id} --offset {page.end} (or --all)"
        if page.left
        else ""
    )
    if page.note():
        echo(f"{lead}cp-inspect: {page.note()}{rest}", err=True)
