"""A text prepared for the content view: split into source lines, wrapped to a width, and highlighted
lazily, only as far down as the rows that are drawn.

`prepare` runs in the content worker and does only the cheap part (split and wrap: a few ms for a
120,000-character history); pygments runs when a row is drawn, from the start of the text up to a
little past that row (its lexer state carries across lines, so lexing from the top is what makes a
row deep in a multi-line string come out as a full highlight would). Highlighting all 120k characters
up front took the worker 0.3-0.5 s holding the GIL on every step, so the new text appeared that late."""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from itertools import accumulate
from typing import TYPE_CHECKING

from rich.cells import cell_len
from rich.style import Style
from rich.text import Span, Text
from textual.strip import Strip

from panels.fmt import VISIBLE_CONTROLS  # (control characters made visible, not sent)
from panels.highlight import MAX_CHARS, OMISSION, SPILL, _fg_only, guess_language, lexer_class, rich_syntax

if TYPE_CHECKING:  # pygments and rich.syntax are imported when a text is first highlighted (lexer_class)
    from pygments.token import _TokenType
    from rich.syntax import PygmentsSyntaxTheme

_WORD = re.compile(r"\S+\s*|\s+")
LEX_AHEAD = 256  # characters lexed past the row asked for (pygments' Python lexer: ~1 ms per 1,000)
TRUNCATED_NOTE = "… showing the first {:,} characters"


_THEMES: dict[bool, tuple[Style, PygmentsSyntaxTheme, dict[_TokenType, Style | str | None]]] = {}


def _theme(dark: bool) -> tuple[Style, PygmentsSyntaxTheme, dict[_TokenType, Style | str | None]]:
    """(base style, pygments theme, styles by token type) of the dark or light theme, shared by every
    document (building a theme's styles took ~8 ms; a dict shared by threads is safe under the GIL)."""
    if dark not in _THEMES:
        syntax = rich_syntax()  # (pygments' imports go through highlight's lock: see lexer_class)
        name = "monokai" if dark else "friendly"
        # The base style rich's Syntax gives the whole text (the theme's, on the default background).
        plain = lexer_class("text")()
        base = syntax.Syntax("", plain, theme=name, background_color="default")._get_base_style()
        _THEMES[dark] = (base, syntax.PygmentsSyntaxTheme(name), {})
    return _THEMES[dark]


class LineHighlighter:
    """Highlighted source lines of `text` on demand. Lexes from the start, only as far as asked, and
    remembers the styled tokens, so each character is lexed once whatever the order rows are drawn in.
    Not thread-safe: the worker that makes it may use it, then hands it to the UI thread."""

    def __init__(self, text: str, language: str, dark: bool) -> None:
        self.text = text
        self.base_style, self._theme, self._styles = _theme(dark)
        from pygments.token import Token

        lexer = lexer_class(language)
        self._tokens: Iterator[tuple[int, _TokenType, str]] | None = (
            None if lexer is lexer_class("text") else iter(lexer().get_tokens_unprocessed(text)))
        self.lexed = 0 if self._tokens is not None else len(text)  # characters lexed so far
        # Plain text is one token (Token.Text) that the theme may still colour: every line gets it.
        self._whole = self._style(Token.Text) if self._tokens is None else None
        # Styled tokens in text order (they do not overlap): ends, starts, styles.
        self._ends: list[int] = []
        self._starts: list[int] = []
        self._token_styles: list[Style | str] = []
        # The optimizer's marks (omissions, spill references) over the whole text: one regex pass.
        self._marks = [(m.start(), m.end(), style) for rx, style in
                       ((OMISSION, "bold black on yellow"), (SPILL, "bold underline magenta"))
                       for m in rx.finditer(text)]

    def _style(self, token_type: _TokenType) -> Style | str | None:
        try:
            return self._styles[token_type]
        except KeyError:
            styled = _fg_only(self._theme.get_style_for_token(token_type))
            # a null style draws nothing: no span for it
            style = self._styles[token_type] = styled or None
            return style

    def lex_to(self, end: int) -> None:
        """Lex at least the first `end` characters (plus LEX_AHEAD)."""
        tokens = self._tokens
        if tokens is None or self.lexed >= end:
            return
        goal = end + LEX_AHEAD
        ends, starts, styles, style_of = self._ends, self._starts, self._token_styles, self._style
        for start, token_type, value in tokens:
            stop = start + len(value)
            style = style_of(token_type)
            if style is not None and stop > start:
                starts.append(start)
                ends.append(stop)
                styles.append(style)
            if stop >= goal:
                self.lexed = stop
                return
        self.lexed = len(self.text)
        self._tokens = None

    def line(self, start: int, end: int) -> Text:
        """The highlighted text[start:end] (one source line)."""
        self.lex_to(end)
        spans = [] if self._whole is None or start == end else [Span(0, end - start, self._whole)]
        ends, starts, styles = self._ends, self._starts, self._token_styles
        i = bisect_right(ends, start)
        while i < len(starts) and starts[i] < end:
            spans.append(Span(max(starts[i], start) - start, min(ends[i], end) - start, styles[i]))
            i += 1
        for a, b, style in self._marks:  # after the tokens' styles, as highlight_regex puts them
            if a < end and b > start:
                spans.append(Span(max(a, start) - start, min(b, end) - start, style))
        return Text(self.text[start:end], style=self.base_style, spans=spans)


@dataclass
class TextDocument:
    """`plain`: the source lines shown (tabs expanded, no newline). `rows`: the wrapped display rows
    as (source line, first and end character of the row in that line). `starts`: each line's offset
    in the highlighter's text. `dark`: the theme the highlighting is for; `width`: the width the rows
    are wrapped to. `first_rows`: the first screenful of rows already drawn (by the worker) on
    `first_rows_style`. `note`: a last line that is not part of the text (truncation)."""

    text: str
    language: str
    dark: bool
    width: int
    plain: list[str]
    starts: list[int]
    rows: list[tuple[int, int, int]]
    highlighter: LineHighlighter
    note: str | None = None
    first_rows: dict[int, Strip] = field(default_factory=dict)
    first_rows_style: Style | None = None

    @property
    def plain_lines(self) -> list[str]:
        return self.plain

    def line(self, index: int) -> Text:
        """Source line `index`, highlighted (lexing the text up to it if it was not yet)."""
        if self.note is not None and index == len(self.plain) - 1:
            return Text(self.note, style="italic")
        start = self.starts[index]
        return self.highlighter.line(start, start + len(self.plain[index]))


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


def wrap_rows(lines: list[str], width: int) -> list[tuple[int, int, int]]:
    """The display rows of `lines` wrapped to `width` cells (at least 1), as (source line, first
    character, end character): plain ints, not Text pieces, so a long text adds few objects for the
    garbage collector to scan (the view slices the few rows it draws)."""
    width = max(1, width)
    rows: list[tuple[int, int, int]] = []
    for i, plain in enumerate(lines):
        end = len(plain)
        # ASCII has one cell a character: no need to measure it
        if end <= width and (plain.isascii() or cell_len(plain) <= width):
            rows.append((i, 0, end))
            continue
        starts = [0, *_breaks(plain, width)]
        rows.extend((i, a, b) for a, b in zip(starts, [*starts[1:], end], strict=True))
    return rows


def row_text(doc: TextDocument, index: int) -> tuple[int, int, Text]:
    """(source line, first character, the row's highlighted Text) of display row `index`."""
    line_no, start, end = doc.rows[index]
    line = doc.line(line_no)
    return line_no, start, line if start == 0 and end == len(line.plain) else line[start:end]


def prepare(text: str, dark: bool, width: int) -> TextDocument:
    """Split and wrap `text` for the `dark` or light theme; highlighting is left for when rows are drawn."""
    truncated = len(text) > MAX_CHARS
    # Rich's Text drops these control codes (carriage return, backspace, bell, vertical tab, form
    # feed) from whatever it is given, so a highlighted line of "a\r\n" text would be shorter than
    # the row cut from it and slicing the row past its end raised (the worker died and the view
    # kept the previous turn: a CRLF pasted issue in pydicom-1413's history). Rows, offsets and the
    # highlighter all count characters of the text as drawn. The other control codes are made visible
    # (VISIBLE_CONTROLS), not passed to the terminal.
    shown = text[:MAX_CHARS].translate(VISIBLE_CONTROLS).expandtabs(8).rstrip()
    language = guess_language(text)  # the whole text: a cut-off JSON document does not parse
    plain = shown.split("\n")
    starts = list(accumulate((len(line) + 1 for line in plain[:-1]), initial=0))
    note = TRUNCATED_NOTE.format(MAX_CHARS) if truncated else None
    if note is not None:
        plain.append(note)
    return TextDocument(text, language, dark, width, plain, starts, wrap_rows(plain, width),
                        # ends in a newline, as pygments' get_tokens makes it: some rules need one
                        # (Markdown's list item on the last line)
                        LineHighlighter(shown + "\n", language, dark), note)


def rewrap(doc: TextDocument, width: int) -> TextDocument:
    return replace(doc, width=width, rows=wrap_rows(doc.plain, width), first_rows={}, first_rows_style=None)
