"""What `cp-inspect find FILE TEXT` does: the turns where TEXT entered or left what a recording sent
(inspector/content_search.py, the scan the inspector's `/` runs), one line each with its section and a
snippet, or `--json`. Exit 1 when no turn sent it, as grep does: a script can ask `find ... && ...`."""

from __future__ import annotations

import json
from pathlib import Path

from engine.wording import counted

from .cli_output import echo
from .content_search import LEAVES, Change
from .recording_open import fail, open_recording


def find(file: Path, text: str, as_json: bool = False) -> None:
    from engine.errors import ContextPipeError

    from .content_search import ContentScan, describe, snippet
    from .sources.file import FileSource

    if not text.strip():
        fail("find: give the text to search for (any case), e.g. cp-inspect find run.cpsession 'tier.py'", 2)
    reader = open_recording(file)
    source = FileSource(file, reader=reader)
    turns = reader.turn_numbers()
    scan = ContentScan(text, source)
    scan.open_for(source)  # one pass over the recording (its own reader), as verify reads it
    try:
        scan.scan_to(turns, lambda: False)
        rows: list[dict[str, object]] = []
        for c in scan.changes:
            words = ""
            if c.kind != LEAVES:  # the text where it came in: its last occurrence in that section
                words = snippet(source.section_content(c.turn, c.section), scan.needle, last=True)
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
    if as_json:
        changes = [{k: v for k, v in row.items() if k != "short"} for row in rows]
        echo(
            json.dumps(
                {
                    "file": str(file),
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
        echo(
            f"{text!r} in what {file} sent ({counted(len(turns), 'turn')}): it enters or leaves the prompt "
            f"on {counted(len(rows), 'turn')}{unread}"
        )
        width = len(f"{rows[-1]['turn']:,}")
        for row in rows:
            tail = f"  {row['snippet']}" if row["snippet"] else ""
            echo(f"  turn {row['turn']:>{width},}  {row['short']}{tail}")
    if not rows:
        raise SystemExit(1)


def _short(c: Change) -> str:
    """One change as a column of the listing: enters / again / leaves, the section, the counts."""
    if c.kind == LEAVES:
        return f"leaves  {c.section}  (was {c.before})"
    if not c.before:
        return f"enters  {c.section}  ({counted(c.count, 'match', 'matches')})"
    return f"again   {c.section}  ({c.before} -> {c.count})"
