"""What `cp-inspect find FILE TEXT` does: the turns where TEXT entered or left what a recording sent
(inspector/content_search.py, the scan the inspector's `/` runs), one line each with its section and a
snippet, or `--json`. Exit 1 when no turn sent it, as grep does: a script can ask `find ... && ...`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from engine.wording import counted

from .cli_output import echo
from .content_search import LEAVES, Change, FoldIndex
from .recording_open import fail, open_recording, warn_plain


def find(target: str | Path, text: str, as_json: bool = False) -> None:
    from engine.errors import ContextPipeError

    from .content_search import ContentScan, describe, snippet

    if not text.strip():
        fail("find: give the text to search for (any case), e.g. cp-inspect find run.cpsession 'tier.py'", 2)
    source, turns, file, folded = _open(target)
    scan = ContentScan(text, source, folded)
    if folded is None:
        # One pass: a recording's (its own reader, as verify reads it), an agent's journal.
        scan.open_for(source)
    try:
        scan.scan_to(turns, lambda: False)
        rows: list[dict[str, object]] = []
        for c in scan.changes:
            words = ""
            if c.kind != LEAVES:  # the text where it came in: its last occurrence in that section
                words = snippet(scan.section_text(c.turn, c.section), scan.needle, last=True)
            rows.append(
                {
                    "turn": c.turn,
                    "kind": c.kind,
                    "section": c.section,
                    "matches": c.count,
                    "before": c.before,
                    "snippet": words,
                    "what": describe(c, text),
                    "short": _short(c),
                }
            )
    except ContextPipeError as exc:
        fail(f"{file}: {exc}")
    except OSError as exc:
        fail(f"cannot read {file}: {exc.strerror or exc}")
    finally:
        scan.close()
        source.close()
    unread = f"; {counted(scan.unreadable, 'turn')} could not be read" if scan.unreadable else ""
    if scan.unreadable_why:  # (why, and what to do: a corrupt frame's error names the salvage command)
        unread += f": {scan.unreadable_why.removeprefix(f'{file}: ')}"
    if as_json:
        changes = [{k: v for k, v in row.items() if k != "short"} for row in rows]
        echo(
            json.dumps(
                {
                    "file": str(target),
                    "text": text,
                    "turns": len(turns),
                    "unreadable": scan.unreadable,
                    "changes": changes,
                },
                indent=2,
                ensure_ascii=False,
            )
        )
    elif not rows:
        echo(f"{text!r} is in none of the {counted(len(turns), 'turn')} {file} sent{unread}")
    else:
        from .cli_table import terminal_columns, wrapped

        room = terminal_columns()
        head = (
            f"{text!r} in what {file} sent ({counted(len(turns), 'turn')}): it enters or leaves the prompt "
            f"on {counted(len(rows), 'turn')}{unread}"
        )
        for line in wrapped(head, room):
            echo(line)
        width = len(f"{rows[-1]['turn']:,}")
        for row in rows:
            line = f"  turn {row['turn']:>{width},}  {row['short']}"
            if row["snippet"]:
                fits = None if room is None else room - len(line) - 2
                line += "  " + _fit(str(row["snippet"]), scan.needle, fits)
            echo(line)
    if not rows:
        raise SystemExit(1)


def _open(target: str | Path) -> tuple[Any, list[int], str, FoldIndex | None]:
    """(the source, its turn numbers, what to call it, the index of what each turn sent that reading it
    made, if it did): a recording, or a running agent's journal up to now through its probe (a PID or
    PID.SESSION that is not a file here), as `explain PID` reads it."""
    from engine.probe.runtime_dir import parse_target

    from .sources.file import FileSource

    live = parse_target(str(target))
    if live is None or Path(target).exists():
        reader = open_recording(Path(target))
        return FileSource(Path(target), reader=reader), reader.turn_numbers(), str(target), None
    from engine.errors import ContextPipeError

    from .sources.live import LiveSource
    from .sources.live_recording import open_recorded

    name = f"agent {target}"
    index = FoldIndex()
    try:
        # A recording agent's turns are read from its recording (checked as attach checks it) in one pass,
        # as a recording's are: the agent sends nothing and no journal is fetched. Else the fold stream (as
        # attach): the agent builds no trace for us, and sends its journal by range; our fold of it builds
        # each request, and the search reads that build (`index`), not another.
        got, why = open_recorded(live[0], live[1], backfill_idle=None, on_build=index.add)
    except ContextPipeError as exc:
        fail(str(exc))
    if why is not None:
        warn_plain(why)  # (as attach says it)
    if not isinstance(got, LiveSource):
        checked = FileSource(Path(got.path), reader=got)
        by_fd = Path(f"/proc/self/fd/{got.fileno()}")
        if by_fd.exists():  # the texts from the file checked, not whatever has its name by then
            checked.texts.path = by_fd
        return checked, got.turn_numbers(), name, None
    src = got
    try:
        src.replayer()  # the journal to its end as the agent has it now (fetched by range)
    except ContextPipeError as exc:
        src.close()
        fail(f"{name}: {exc}")
    turns = [ev["turn"] for ev in src.events if ev.get("k") == "request"]
    # An agent that sends no fold stream (from before it): its journal is built in one pass of its own.
    return src, turns, name, index if index.turns else None


def _fit(snippet: str, needle: str, room: int | None) -> str:
    """A snippet in `room` columns (None: a pipe's, whole): the part around its match (the section's last
    occurrence of `needle`, lower-cased, which the snippet was taken around), each cut end marked with an
    ellipsis. Whole, a snippet took a listing row to ~110 columns, and at 80 every row wrapped under the
    next one's turn number."""
    if room is None or len(snippet) <= room:
        return snippet
    # (A terminal too narrow for the row: the row wraps, and the snippet still says something.)
    keep = max(room, 12) - 2
    core = snippet.strip("…")
    at = core.lower().rfind(needle)
    middle = at + len(needle) // 2 if at >= 0 and needle else len(core) // 2
    start = max(0, min(middle - keep // 2, len(core) - keep))
    left = "…" if start > 0 or snippet.startswith("…") else ""
    right = "…" if start + keep < len(core) or snippet.endswith("…") else ""
    return left + core[start : start + keep] + right


def _short(c: Change) -> str:
    """One change as a column of the listing: enters / again / leaves, the section, the counts."""
    if c.kind == LEAVES:
        return f"leaves  {c.section}  (was {c.before})"
    if not c.before:
        return f"enters  {c.section}  ({counted(c.count, 'match', 'matches')})"
    return f"again   {c.section}  ({c.before} -> {c.count})"
