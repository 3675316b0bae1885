"""SQLite layout, connection settings (WAL, busy timeout) and schema versioning.

Two tables hold the originals (`items`, `links`) plus an FTS5 index over bodies. Everything else
(`token_counts`, `derived`, `file_state`, `windows`, `meta`) is a cache or a log that can be rebuilt.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from urllib.parse import quote

from engine.store.errors import StoreCorruptError, StoreError, StoreLockedError
from engine.store.row_check import ROW_ERRORS, diagnose

SCHEMA_VERSION = 2
# PRAGMA application_id of a context store ("CPST"): another program's SQLite file is refused, never
# given our tables. user_version mirrors the schema version (readable without knowing our tables).
APPLICATION_ID = 0x43505354

# External-content FTS5: the text lives once, in items.body; bodies are never updated, so an insert
# trigger is all the synchronisation needed. `_` is a token character, so a code identifier such as
# load_file is one term (a rare, cheap, precise match) rather than a phrase over the common words
# "load" and "file". The fts5vocab table gives each term's document frequency in one lookup.
_FTS = """
CREATE VIRTUAL TABLE IF NOT EXISTS items_fts USING fts5(
    body, content='items', content_rowid='id', tokenize="unicode61 tokenchars '_'"
);
CREATE VIRTUAL TABLE IF NOT EXISTS items_vocab USING fts5vocab(items_fts, 'row');
"""

# How much of a body the full-text index sees, in characters. Indexing a whole huge body (a 50 MB log
# or file dump) cost ~+820 MB of RSS and ~26 s in FTS5 alone, for a search nobody needs at that depth.
# An ordinary item (anything up to FTS_HEAD_CHARS + FTS_TAIL_CHARS, 1.1 M characters) is indexed whole,
# so its search is unchanged; a bigger one is found by its first 1 M characters and its last 100 k
# (errors and summaries sit at the end of logs), and nothing in between. The body itself is kept whole
# in items.body: get/expand/windows never read the index.
FTS_HEAD_CHARS = 1_000_000
FTS_TAIL_CHARS = 100_000
# A cut that falls inside a word moves back (the head's end) or on (the tail's start) to the nearest
# separator within this many characters, so no fragment ("internationaliz") becomes a term of its own.
# A longer run of word characters (a base64 blob, a run of CJK) is cut where it falls.
FTS_CUT_WINDOW = 512


def _word_chars() -> str:
    """Characters the index's tokenizer (unicode61, tokenchars '_') puts inside a word: its default
    categories L*, N* and Co, plus '_', for ASCII and the Latin, Greek and Cyrillic blocks (U+00C0-U+052F,
    long fully assigned: the trigger's text must not change with the Python that writes it, or each
    would replace the other's). Other characters count as
    separators here, so a cut among them still falls where it falls (a CJK run is one word to unicode61
    anyway). SQL's rtrim/ltrim strip these from one end of a window to find the nearest separator (SQL
    has no search from the right)."""
    import unicodedata

    ascii_word = "".join(chr(c) for c in range(128) if chr(c).isalnum()) + "_"
    wide = "".join(chr(c) for c in range(0xC0, 0x530) if unicodedata.category(chr(c))[0] in "LN")
    return ascii_word + wide


_WORD = _word_chars()  # letters and digits only: no quote, so it goes into SQL as a literal as it is


def _indexed(col: str) -> str:
    """SQL for the part of `col` (a body) the index holds: the whole body up to the bound, else its head
    and tail, each cut at a word boundary (see FTS_CUT_WINDOW). The newline keeps the head's last token
    and the tail's first apart. length() counts characters, as substr() does. Only core functions
    (substr, rtrim, ltrim, min, max): an older cp-inspect, or the sqlite3 shell, runs this trigger too.

    `col` is named three times at most: SQLite copies the whole value for each function argument that
    names it (a 20 MB body named eight times cost +190 MB of peak RSS), so the cut is worked out on
    copies of the head (plus the first dropped character) and the tail (plus the last dropped one),
    taken once in a subquery that OFFSET 0 keeps SQLite from flattening back into `col` references.
    Head: its last FTS_CUT_WINDOW + 1 characters with trailing word characters trimmed end at the last
    separator before the cut (all kept when the first dropped character is a separator). Tail: its
    leading word characters trimmed say how many characters of a cut word begin it."""
    h, t, w = FTS_HEAD_CHARS, FTS_TAIL_CHARS, FTS_CUT_WINDOW
    word = f"'{_WORD}'"
    kept = f"length(rtrim(substr(hd, {h - w + 1}), {word}))"  # 0: no separator in the window
    head = f"substr(hd, 1, CASE WHEN {kept} = 0 THEN {h} ELSE min({h}, {h - w} + {kept}) END)"
    win = f"substr(tl, 1, {w + 1})"
    cut = f"(length({win}) - length(ltrim({win}, {word})))"  # w + 1: no separator in the window
    tail = f"substr(tl, CASE WHEN {cut} > {w} THEN 2 ELSE max(2, {cut} + 1) END)"
    parts = f"SELECT substr({col}, 1, {h + 1}) AS hd, substr({col}, -{t + 1}) AS tl LIMIT -1 OFFSET 0"
    return (
        f"CASE WHEN length({col}) <= {h + t} THEN {col} "
        f"ELSE (SELECT {head} || char(10) || {tail} FROM ({parts})) END"
    )


# What meta 'fts_bound' holds once every row's index entry was made by _indexed as it is now: a new
# store, the v1 -> v2 refill, or reindex(). A store an older version made lacks it (its rows over the
# bound may be indexed whole, or cut mid-word); reindex() is what brings those in line.
FTS_BOUND = f"head={FTS_HEAD_CHARS} tail={FTS_TAIL_CHARS} cut=words/{FTS_CUT_WINDOW}"


# Kept in sqlite_master exactly as written here (SQLite stores the CREATE text), so _sync_trigger can
# tell an older store's trigger (which indexed whole bodies) from this one by comparing the text.
_TRIGGER = f"""CREATE TRIGGER items_ai AFTER INSERT ON items BEGIN
    INSERT INTO items_fts(rowid, body) VALUES (new.id, {_indexed("new.body")});
END"""

# Windows served to a Pipeline section (engine.store.bind_source), keyed by the pipeline's turn, so
# the inspector can go from a turn's trace to the manifest of the store window bound into it.
_BINDINGS = """
CREATE TABLE IF NOT EXISTS bindings (
    source TEXT NOT NULL,
    pipe_turn INTEGER NOT NULL,
    window_id INTEGER NOT NULL REFERENCES windows(id),
    PRIMARY KEY (source, pipe_turn)
) WITHOUT ROWID;
"""

_DDL = (
    """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS items (
    id INTEGER PRIMARY KEY,
    kind TEXT NOT NULL,
    body TEXT NOT NULL,
    hash TEXT NOT NULL,
    turn INTEGER NOT NULL,
    ts REAL,
    source TEXT,
    file_hash TEXT,
    pinned INTEGER NOT NULL DEFAULT 0,
    importance REAL NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS items_hash ON items(hash);
CREATE INDEX IF NOT EXISTS items_source ON items(source);
CREATE TABLE IF NOT EXISTS links (
    src INTEGER NOT NULL REFERENCES items(id),
    dst INTEGER NOT NULL REFERENCES items(id),
    kind TEXT NOT NULL,
    PRIMARY KEY (src, dst, kind)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS links_dst ON links(dst, kind);
CREATE TABLE IF NOT EXISTS token_counts (
    hash TEXT NOT NULL,
    tokenizer TEXT NOT NULL,
    tokens INTEGER NOT NULL,
    PRIMARY KEY (hash, tokenizer)
) WITHOUT ROWID;
-- Summaries and other derived text, keyed by a hash of (originals' hashes, producer, version).
CREATE TABLE IF NOT EXISTS derived (key TEXT PRIMARY KEY, producer TEXT NOT NULL, text TEXT NOT NULL)
    WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS file_state (path TEXT PRIMARY KEY, hash TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS windows (
    id INTEGER PRIMARY KEY,
    turn INTEGER NOT NULL,
    lane TEXT NOT NULL,
    mode TEXT NOT NULL,
    budget INTEGER NOT NULL,
    used INTEGER NOT NULL,
    text_hash TEXT NOT NULL,
    manifest TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS windows_turn ON windows(turn);
CREATE INDEX IF NOT EXISTS windows_lane ON windows(lane, id);
"""
    + _FTS
    + _BINDINGS
)


# Migrations from version N to N+1, applied in order.
_MIGRATIONS: dict[int, str] = {
    # v1 -> v2: the FTS index tokenizes identifiers whole; refilled from items.body (the originals), each
    # body bounded as the trigger bounds it ('rebuild' would index whole bodies). _sync_trigger then
    # creates the trigger.
    1: """
DROP TRIGGER IF EXISTS items_ai;
DROP TABLE IF EXISTS items_fts;
"""
    + _FTS
    + """
INSERT INTO items_fts(rowid, body) SELECT id, """
    + _indexed("body")
    + """ FROM items;
"""
    + _BINDINGS,
}

_WRITE_FAILURES = ("SQLITE_IOERR_WRITE", "SQLITE_IOERR_FSYNC", "SQLITE_IOERR_TRUNCATE", "SQLITE_IOERR_SHMSIZE")
_CORRUPT_MARKERS = ("file is not a database", "malformed", "file is encrypted", "disk image")


def translate(exc: sqlite3.Error, path: str, timeout_s: float) -> StoreError:
    """Turn a raw sqlite3 error into one a person can act on."""
    msg = str(exc).lower()
    code = str(getattr(exc, "sqlite_errorname", "") or "")
    if code == "SQLITE_FULL" or code.startswith(_WRITE_FAILURES):
        # "sqlite error: disk I/O error" said neither what failed nor what to do. A full disk is
        # SQLITE_FULL; a file size limit (ulimit -f: EFBIG) or a quota comes back as a failed write.
        return StoreError(
            f"could not write {path}: the disk is full, or a file size limit (ulimit -f) or quota was "
            f"reached ({exc}). The write that failed was undone and nothing else was lost; free space or "
            "raise the limit, then run it again"
        )
    if code.startswith("SQLITE_IOERR"):
        return StoreError(f"{path}: the operating system reported an I/O error ({code}); check the disk, then run it again")
    if any(m in msg for m in _CORRUPT_MARKERS):
        return StoreCorruptError(path, str(exc))
    if "locked" in msg or "busy" in msg:
        return StoreLockedError(path, timeout_s)
    return StoreError(f"{path}: sqlite error: {exc}")


def is_read_only(path: str | Path) -> bool:
    """An existing store this process may not write: the file's mode, or its directory's (SQLite's WAL
    needs to create files beside it)."""
    p = str(path)
    if p == ":memory:" or not os.path.exists(p):
        return False
    parent = os.path.dirname(os.path.abspath(p))
    return not os.access(p, os.W_OK) or not os.access(parent, os.W_OK)


def _check_identity(conn: sqlite3.Connection, p: str) -> None:
    """Refuse a SQLite file that is not a context store before anything is written to it."""
    app_id = conn.execute("PRAGMA application_id").fetchone()[0]
    if app_id == APPLICATION_ID:
        return
    what = "give --db a new file name or an existing context store; nothing was changed"
    if app_id != 0:
        raise StoreError(f"{p} is not a context store: it is another program's SQLite file (application id {app_id:#x}); {what}")
    tables = [
        r[0]
        for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%'")
    ]
    if not tables:
        return  # an empty database becomes a store
    if "meta" in tables and "items" in tables:
        row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        if row is not None:
            return  # a store made before the application id existed: _migrate stamps it
    shown = ", ".join(tables[:4]) + (", ..." if len(tables) > 4 else "")
    raise StoreError(f"{p} is not a context store: it is a SQLite database with other tables ({shown}); {what}")


def _connect_read_only(p: str, timeout_s: float) -> sqlite3.Connection:
    """A private in-memory copy of a store this process cannot write: reads (get, expand) work unchanged,
    and what they log (served windows, token counts) is kept for this process only."""
    uri = "file:" + quote(os.path.abspath(p))
    src = None
    for flags in ("?mode=ro", "?mode=ro&immutable=1"):  # immutable: a WAL store in a read-only directory
        try:
            src = sqlite3.connect(uri + flags, uri=True, timeout=timeout_s, check_same_thread=False)
            src.execute("SELECT count(*) FROM sqlite_master").fetchone()
            break
        except sqlite3.Error as exc:
            if src is not None:
                src.close()
            src = None
            last = exc
    if src is None:
        raise translate(last, p, timeout_s)
    try:
        _check_identity(src, p)
        mem = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        src.backup(mem)
    except sqlite3.Error as exc:
        raise translate(exc, p, timeout_s) from exc
    finally:
        src.close()
    try:
        mem.execute("PRAGMA foreign_keys = ON")
        _migrate(mem, p)
    except sqlite3.Error as exc:
        mem.close()
        raise translate(exc, p, timeout_s) from exc
    return mem


def connect(path: str | Path, timeout_s: float = 5.0) -> sqlite3.Connection:
    """Open (creating if needed) a store file with WAL, a busy timeout and the current schema. A store the
    process may not write is opened as a private in-memory copy (see is_read_only)."""
    return connect_store(path, timeout_s)[0]


_READ_ONLY_MARKERS = ("readonly database", "read-only", "unable to open database file")


def connect_store(path: str | Path, timeout_s: float = 5.0) -> tuple[sqlite3.Connection, bool]:
    """connect(), also saying whether the store was opened read-only (a private in-memory copy): by its
    mode or its directory's, or because SQLite found it could not write it (an immutable file, a
    read-only mount, root ignoring modes until the write itself fails)."""
    p = str(path)
    try:
        return _connect(p, timeout_s), is_read_only(p)
    except StoreError as exc:
        cause = exc.__cause__
        if (
            p != ":memory:"
            and os.path.isfile(p)
            and isinstance(cause, sqlite3.Error)
            and any(m in str(cause).lower() for m in _READ_ONLY_MARKERS)
        ):
            return _connect_read_only(p, timeout_s), True
        raise


def _connect(p: str, timeout_s: float) -> sqlite3.Connection:
    if p != ":memory:":
        if os.path.isdir(p):
            raise StoreError(f"{p} is a directory: give --db the path of a store file")
        parent = Path(p).resolve().parent
        if not parent.is_dir():
            raise StoreError(f"cannot create {p}: directory {parent} does not exist")
        if not os.path.exists(p) and not os.access(parent, os.W_OK | os.X_OK):
            # SQLite said only "unable to open database file".
            raise StoreError(
                f"cannot create {p}: directory {parent} is not writable (its mode or its mount); "
                "give --db a path in a directory you can write"
            )
        if is_read_only(p):
            if not os.access(p, os.R_OK):
                from engine.access import denied  # an error path's own import

                raise StoreError(f"cannot read {p}: {denied(p)}")
            return _connect_read_only(p, timeout_s)
    try:
        conn = sqlite3.connect(p, timeout=timeout_s, isolation_level=None, check_same_thread=False)
    except sqlite3.Error as exc:
        raise translate(exc, p, timeout_s) from exc
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(timeout_s * 1000)}")
        # Reading the schema is the first thing that touches page 1: a corrupt file fails here.
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        _check_identity(conn, p)
        if p != ":memory:":
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()
            if mode is None or str(mode[0]).lower() != "wal":
                raise StoreError(f"{p}: could not switch to WAL journal mode (got {mode!r})")
        conn.execute("PRAGMA synchronous = NORMAL")  # WAL + NORMAL: durable at checkpoints, fast commits
        conn.execute("PRAGMA foreign_keys = ON")
        _migrate(conn, p)
    except sqlite3.Error as exc:
        conn.close()
        raise translate(exc, p, timeout_s) from exc
    except StoreError:
        conn.close()
        raise
    except ROW_ERRORS as exc:  # a meta value that is not a count ('abc', '-1'), say
        try:
            raise_if_damaged(exc, conn, p)
        finally:
            conn.close()
        raise
    return conn


def raise_if_damaged(exc: BaseException, conn: sqlite3.Connection, path: str) -> None:
    """Raise StoreCorruptError (from `exc`) if the file holds a value the store never writes: what made
    the read fail with `exc`, a bare ValueError or TypeError (see row_check). Returns if it holds none."""
    found = diagnose(conn)
    if found is not None:
        raise StoreCorruptError(path, found, row=True) from exc
    if isinstance(exc, UnicodeDecodeError):
        # The store writes only UTF-8 (StoreTextError refuses the rest): bytes that are not came from the
        # file, a damaged page (of the schema itself, so the diagnosis could not read it) or a hand edit.
        raise StoreCorruptError(path, f"text in it is not UTF-8 ({exc.reason} at byte {exc.start})") from exc


def _is_current(conn: sqlite3.Connection) -> bool:
    """Is the store already as _migrate would leave it? Read without a lock, so that opening a current
    store never waits for the write lock: every open took it, and a process that only reads (ctx expand,
    get(), an inspector) could not even open the store while a writer held it (an import, a reindex, a
    summarizer writing through the store) and failed after its busy timeout, though WAL lets it read."""
    if conn.execute("PRAGMA application_id").fetchone()[0] != APPLICATION_ID:
        return False
    if conn.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
        return False
    try:
        row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    except sqlite3.OperationalError:  # no meta table
        return False
    if row is None or row[0] != str(SCHEMA_VERSION):
        return False
    trig = conn.execute("SELECT sql FROM sqlite_master WHERE type='trigger' AND name='items_ai'").fetchone()
    return trig is not None and " ".join(str(trig[0]).split()) == " ".join(_TRIGGER.split())


def _migrate(conn: sqlite3.Connection, p: str = ":memory:") -> None:
    if _is_current(conn):
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        has_meta = conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='meta'").fetchone()
        version = 0
        if has_meta:
            row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
            version = int(row[0]) if row else 0
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{p}: store schema version {version} is newer than this cp-inspect understands "
                f"({SCHEMA_VERSION}); upgrade cp-inspect (pip install -U contextpipe-inspector) to read it. "
                "Nothing in it was changed"
            )
        if version == 0:
            for stmt in _split(_DDL):
                conn.execute(stmt)
            conn.execute(
                "INSERT OR REPLACE INTO meta(key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),)
            )
            conn.execute("INSERT OR IGNORE INTO meta(key, value) VALUES ('turn', '0')")
            _mark_bounded(conn)
        else:
            for v in range(version, SCHEMA_VERSION):
                for stmt in _split(_MIGRATIONS[v]):
                    conn.execute(stmt)
            conn.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(SCHEMA_VERSION),))
            if version == 1:  # the index was refilled from every body, each bounded as _indexed says
                _mark_bounded(conn)
        _sync_trigger(conn)
        conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except BaseException:
        # SQLite may already have rolled back (a failed write: disk full, a file size limit); a
        # ROLLBACK then raised "no transaction is active" in place of the error that said why.
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def _sync_trigger(conn: sqlite3.Connection) -> None:
    """Create the FTS insert trigger, or replace a store's older one (which indexed whole bodies) whose
    SQL differs. No SCHEMA_VERSION bump: the tables are unchanged, an older cp-inspect opening the store
    keeps and runs this trigger as it is (it only creates triggers in a new store), and the rows an old
    trigger indexed whole stay valid entries until reindex() (`ctx reindex`) refills the index: see
    reindex() for why that is not done here."""
    row = conn.execute("SELECT sql FROM sqlite_master WHERE type='trigger' AND name='items_ai'").fetchone()
    if row is not None and " ".join(str(row[0]).split()) == " ".join(_TRIGGER.split()):
        return
    if row is not None:
        conn.execute("DROP TRIGGER items_ai")
        # Rows that trigger added were indexed another way (whole, or cut inside a word): until
        # reindex() the store's index is not all current, whatever an earlier open had recorded.
        conn.execute("DELETE FROM meta WHERE key='fts_bound'")
    conn.execute(_TRIGGER)


def _mark_bounded(conn: sqlite3.Connection) -> None:
    conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('fts_bound', ?)", (FTS_BOUND,))


def index_is_current(conn: sqlite3.Connection) -> bool:
    """Was every row's index entry made as _indexed says now? False for a store an older version made
    (its items over the bound may be indexed whole, or cut inside a word) until reindex() runs."""
    row = conn.execute("SELECT value FROM meta WHERE key='fts_bound'").fetchone()
    return row is not None and row[0] == FTS_BOUND


def index_bytes(conn: sqlite3.Connection) -> int:
    """The full-text index's size: its segment blobs, which hold nearly all of it (length() of a blob
    reads its size, not its pages)."""
    return int(conn.execute("SELECT coalesce(sum(length(block)), 0) FROM items_fts_data").fetchone()[0])


def reindex(conn: sqlite3.Connection) -> tuple[int, int]:
    """Empty the full-text index and fill it again from items.body, each body bounded as the trigger
    bounds it; return (items indexed, items over the bound). Run inside the caller's write transaction.

    Why not on open: the index keeps no record of the text it indexed for a row, and an external-content
    entry can only be deleted by handing FTS5 the exact text it indexed (a whole 50 MB body: the
    ~26 s and ~820 MB that bounding saved). 'delete-all' then a bounded refill never tokenizes more
    than FTS_HEAD_CHARS + FTS_TAIL_CHARS of any body, but it does redo every row: seconds on a store of
    hundreds of MB, too long to spend unasked when a store opens. ('rebuild' would index whole bodies.)"""
    conn.execute("INSERT INTO items_fts(items_fts) VALUES ('delete-all')")
    conn.execute(f"INSERT INTO items_fts(rowid, body) SELECT id, {_indexed('body')} FROM items")
    n, cut = conn.execute(
        f"SELECT count(*), coalesce(sum(length(body) > {FTS_HEAD_CHARS + FTS_TAIL_CHARS}), 0) FROM items"
    ).fetchone()
    _mark_bounded(conn)
    return int(n), int(cut)


def _split(script: str) -> list[str]:
    """Split DDL into statements (executescript would commit our transaction). Triggers keep their body."""
    out: list[str] = []
    buf: list[str] = []
    for line in script.splitlines():
        if line.strip().startswith("--") or not line.strip():
            continue
        buf.append(line)
        joined = "\n".join(buf).strip()
        if joined.endswith(";") and sqlite3.complete_statement(joined):
            out.append(joined)
            buf = []
    if buf:
        out.append("\n".join(buf))
    return out
