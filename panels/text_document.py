"""A highlighted text prepared for the content view: split into source lines and wrapped to a width.

Built in the content worker (pure functions of the text, the theme and the width, no widget), so the
UI thread only ever draws the lines on screen: a 120,000-character history costs what 30 lines cost."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from rich.cells import cell_len
from rich.style import Style
from rich.text import Text
from textual.strip import Strip

from panels.highlight import guess_language, highlight

_WORD = re.compile(r"\S+\s*|\s+")


@dataclass
class TextDocument:
    """`lines`: the highlighted text's source lines (one Text each, no newline). `rows`: the wrapped
    display rows as (source line, first and end character of the row in that line).
    `dark`: the theme the highlighting is for; `width`: the width the rows are wrapped to.
    `first_rows`: the first screenful of rows already drawn (by the worker) on `first_rows_style`."""

    text: str
    language: str
    dark: bool
    width: int
    lines: list[Text]
    rows: list[tuple[int, int, int]]
    first_rows: dict[int, Strip] = field(default_factory=dict)
    first_rows_style: Style | None = None

    @property
    def plain_lines(self) -> list[str]:
        return [line.plain for line in self.lines]


def _breaks(plain: str, width: int) -> list[int]:
    """Character offsets where a line longer than `width` cells wraps: between words, as a pager
    would; a word longer than the width is folded at the width. Trailing spaces may overhang (cropped)."""
    cuts: list[int] = []
    used = 0
    for match in _WORD.finditer(plain):
        start, word = match.start(), match.group()
        body = cell_len(word.rstrip())
        if used and used + body > width:
            cuts.append(start)
            used = 0
        if body > width:  # longer than a row: fold it cell by cell
            for i, ch in enumerate(word):
                w = cell_len(ch)
                if used and used + w > width:
                    cuts.append(start + i)
                    used = 0
                used += w
        else:
            used += cell_len(word)
    return cuts


def wrap_rows(lines: list[Text], width: int) -> list[tuple[int, int, int]]:
    """The display rows of `lines` wrapped to `width` cells (at least 1), as (source line, first
    character, end character): plain ints, not Text pieces, so a long text adds few objects for the
    garbage collector to scan (the view slices the few rows it draws)."""
    width = max(1, width)
    rows: list[tuple[int, int, int]] = []
    for i, line in enumerate(lines):
        plain = line.plain
        end = len(plain)
        if end <= width and cell_len(plain) <= width:
            rows.append((i, 0, end))
            continue
        starts = [0, *_breaks(plain, width)]
        rows.extend((i, a, b) for a, b in zip(starts, [*starts[1:], end], strict=True))
    return rows


def row_text(doc: TextDocument, index: int) -> tuple[int, int, Text]:
    """(source line, first character, the row's highlighted Text) of display row `index`."""
    line_no, start, end = doc.rows[index]
    line = doc.lines[line_no]
    return line_no, start, line if start == 0 and end == len(line.plain) else line[start:end]


def split_lines(highlighted: Text) -> list[Text]:
    if "\t" in highlighted.plain:
        highlighted = highlighted.copy()
        highlighted.expand_tabs(8)
    return list(highlighted.split("\n", allow_blank=True))


def prepare(text: str, dark: bool, width: int, highlighted: Text | None = None) -> TextDocument:
    """Highlight (unless given, for this `dark`-ness), split and wrap `text`: the slow part of showing it."""
    language = guess_language(text)
    if highlighted is None:
        highlighted = highlight(text, language, dark)
    lines = split_lines(highlighted)
    return TextDocument(text, language, dark, width, lines, wrap_rows(lines, width))


def rewrap(doc: TextDocument, width: int) -> TextDocument:
    return TextDocument(doc.text, doc.language, doc.dark, width, doc.lines, wrap_rows(doc.lines, width))
