"""A command's plain-text table fitted to the width it is printed at, and that width.

`report` printed 91 columns and `simulate --policies all` 100 whatever the terminal: at 80 columns every
row wrapped onto a second line, and the columns no longer lined up with their heads. On a terminal a
table now fits its width: a column that can give room does (report's session names, cut in the middle
as before), and columns that still do not fit go to a second table under the first, which repeats the
first column (the row's name), as a wide data frame prints in R. No column is dropped: each says
something the others do not (a policy's breaks are not its compactions). Prose lines (notes, the
policies' descriptions; `explain`'s and `diff`'s text, `fit_text`) are wrapped at the width, their
continuation indented.

A pipe gets the whole table on one line a row, as before, whatever COLUMNS says: a script that reads
the output (or `--json`'s caller) sees the same bytes on any terminal. On a terminal COLUMNS comes
first, as `ls` and `ps` honour it, then the terminal's own size.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass


def terminal_columns() -> int | None:
    """The terminal's width when stdout is one (COLUMNS first), else None (a pipe: no fitting)."""
    import shutil
    import sys

    isatty = getattr(sys.stdout, "isatty", None)
    if isatty is None or not isatty():
        return None
    return shutil.get_terminal_size().columns


@dataclass
class Column:
    """A column's head and cells; `width` the cells' width (padding included), `left` aligned left."""

    head: str
    cells: Sequence[str]
    width: int
    left: bool = False

    def cell(self, text: str) -> str:
        return text.ljust(self.width) if self.left else text.rjust(self.width)


def fitted(columns: Sequence[Column], room: int | None, gap: str = "") -> list[str]:
    """The table's lines, head first: every column side by side when they fit in `room` (None: always),
    else the first column with as many of the next as fit, then the first with the next ones, each
    group a table of its own after a blank line. A column that does not fit even beside the first
    alone is a group of its own (the terminal wraps it)."""
    first, rest = columns[0], list(columns[1:])
    groups: list[list[Column]] = []
    used = first.width
    for col in rest:
        if groups and (room is None or used + len(gap) + col.width <= room):
            groups[-1].append(col)
            used += len(gap) + col.width
        else:
            groups.append([col])
            used = first.width + len(gap) + col.width
    lines: list[str] = []
    for g in groups or [[]]:
        if lines:
            lines.append("")
        group = [first, *g]
        lines.append(gap.join(c.cell(c.head) for c in group).rstrip())
        for i in range(len(first.cells)):
            lines.append(gap.join(c.cell(c.cells[i]) for c in group).rstrip())
    return lines


def wrapped(line: str, room: int | None, indent: str = "  ") -> list[str]:
    """A prose line as printed at `room` columns: whole when it fits or in a pipe (None), else wrapped
    at spaces with its continuation lines indented."""
    if room is None or len(line) <= room:
        return [line]
    return textwrap.wrap(
        line, room, subsequent_indent=indent, break_long_words=False, break_on_hyphens=False
    ) or [line]


def fit_text(text: str, room: int | None) -> str:
    """Each line of `text` in `room` columns (None, a pipe: as it is), wrapped at spaces with its
    continuation indented past the line's own indent: `explain`'s steps and `diff`'s turns ran to
    ~150-220 columns, and a terminal wrapped them at column 0, under the next line's indent."""
    if room is None:
        return text
    out: list[str] = []
    for line in text.split("\n"):
        out += wrapped(line, room, " " * (len(line) - len(line.lstrip(" "))) + "    ")
    return "\n".join(out)
