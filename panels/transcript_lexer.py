"""A pygments lexer for a message transcript: the history section as the content view shows it
(inspector/sources/replaying.section_text: "## user", "[tool call ID NAME] {args}", "[tool result ID
(form)]" and each message's text).

Lexed as Python (one tool result held a `def`), the transcript's prose had Python's keywords coloured
("is", "not", "for" in every sentence); as Markdown, the End key on a 122k-character history took
twice Python's time. Here the structure is what it is and each part gets the lexer it needs:
  - the role headings as a prompt (bold), the tool call / tool result headers as subheadings;
  - a tool result's output by what it holds (a JSON document, a unified diff, Python code or a
    traceback), else plain; a tool call's arguments as JSON when they parse;
  - a message's text plain, but for Markdown headings and fenced code blocks, which are lexed by the
    language their fence names (python, json, diff, bash...), plain when it names none or one not here;
  - mini-swe-agent's observation (`<returncode>N</returncode>`, then `<output>...</output>`, or for a long
    one `<warning>`, `<output_head>`, `<elided_chars>`, `<output_tail>`): its tags quiet (a non-zero
    return code as an error), what the command printed by what it holds, as a tool's output is. A
    tool-calling run sends it as the tool result; older runs (the command in a ```bash fence of the
    assistant's text) as the next user message, whose text was shown plain.
Prose, most of a transcript, is one regex scan, and a part's tokens are kept (by its text) for the next
document: a history repeats all but its newest messages from one turn to the next, so a step lexes what
the turn added.

Imported on the first transcript shown (panels/highlight.lexer_class), with pygments."""

from __future__ import annotations

import json
import re
import threading
from collections import OrderedDict
from collections.abc import Iterator

from pygments.lexer import Lexer
from pygments.lexers.data import JsonLexer
from pygments.lexers.diff import DiffLexer
from pygments.lexers.python import PythonLexer, PythonTracebackLexer
from pygments.lexers.shell import BashLexer
from pygments.token import Comment, Generic, Text, _TokenType

ROLES = "system|user|assistant|tool|developer|function|model"
# A line that starts a message or one of its tool parts, as section_text writes them.
_HEADER = re.compile(rf"^(?:(## (?:{ROLES}))$|(\[tool result [^\n]*\])$|(\[tool call [^\]\n]*\] ?))", re.M)
# A transcript: its first non-blank line is a role heading (a compacted history may start with a summary,
# so any role heading on a line of its own, followed by a tool part or another role heading, will do).
_ROLE_LINE = re.compile(rf"^## (?:{ROLES})$", re.M)
_PROSE_MARKS = re.compile(r"^(#{1,6} [^\n]*)$|^(```|~~~)[ \t]*([\w+#.-]*)[^\n]*\n", re.M)
# mini-swe-agent's observation template: it starts with the return code; the command's output follows in
# <output> (or, cut for length, in <output_head> and <output_tail> around <elided_chars> after a <warning>).
_OBSERVATION = re.compile(r"\s*<returncode>-?\d+</returncode>")
_OBSERVATION_MARK = re.compile(
    r"<returncode>(-?\d+)</returncode>|<(output|output_head|output_tail)>\n?|<(warning|elided_chars)>.*?</\3>", re.S
)
_DIFF = re.compile(r"^(?:diff --git |--- a/|\+\+\+ b/|@@ -\d)", re.M)
_PYTHON = re.compile(r"^(?:\s*def |\s*class |import \w|from [\w.]+ import )", re.M)

_FENCE_LEXERS: dict[str, type[Lexer]] = {
    "python": PythonLexer,
    "py": PythonLexer,
    "python3": PythonLexer,
    "pycon": PythonLexer,
    "json": JsonLexer,
    "diff": DiffLexer,
    "patch": DiffLexer,
    "bash": BashLexer,
    "sh": BashLexer,
    "shell": BashLexer,
    "console": BashLexer,
    "zsh": BashLexer,
}

# (rel. start, token type, text) of a part, by (kind, text): parts repeat across turns. Bounded by the
# characters kept (a 120k history's parts twice over); shared by the content worker and the UI thread.
_Tokens = tuple[tuple[int, _TokenType, str], ...]
KEPT_CHARS = 400_000
_kept: OrderedDict[tuple[str, str], _Tokens] = OrderedDict()
_kept_chars = 0
_lock = threading.Lock()
_lexers: dict[type[Lexer], Lexer] = {}


def is_transcript(text: str) -> bool:
    """Whether `text` is a message transcript: it starts with a role heading (after blank lines), or holds
    one and a tool part header (a history whose first item is a compaction summary)."""
    head = text.lstrip("\n")
    first = _ROLE_LINE.match(head)
    if first is not None:
        return True
    return _ROLE_LINE.search(text) is not None and ("\n[tool call " in text or "\n[tool result " in text)


def _lexer(cls: type[Lexer]) -> Lexer:
    # A regex lexer keeps no state between calls: one instance each serves every part.
    found = _lexers.get(cls)
    if found is None:
        found = _lexers[cls] = cls()
    return found


def _output_lexer(text: str) -> type[Lexer] | None:
    """The lexer for a tool's output by what it holds; None: plain."""
    stripped = text.strip()
    if stripped[:1] in "{[" and stripped[-1:] in "}]":
        try:
            json.loads(stripped)
            return JsonLexer
        except ValueError:
            pass
    if _DIFF.search(text):
        return DiffLexer
    if stripped.startswith("Traceback (most recent call last)"):
        return PythonTracebackLexer
    if _PYTHON.search(text):
        return PythonLexer
    return None


def _lexed(cls: type[Lexer] | None, text: str) -> Iterator[tuple[int, _TokenType, str]]:
    if cls is None:
        yield 0, Text, text
    else:
        yield from _lexer(cls).get_tokens_unprocessed(text)


def _observation(text: str) -> Iterator[tuple[int, _TokenType, str]]:
    """mini-swe-agent's report of a command: the tags quiet (Comment; a non-zero return code as an error),
    each output block's body by what it holds (_output_lexer), anything else plain."""
    at = 0
    while (m := _OBSERVATION_MARK.search(text, at)) is not None:
        if m.start() > at:
            yield at, Text, text[at : m.start()]
        at = m.end()
        code, block = m.group(1), m.group(2)
        if block is None:
            yield m.start(), Generic.Error if code is not None and code != "0" else Comment, m.group()
            continue
        yield m.start(), Comment, m.group()
        # The body runs to the block's last closing tag: what the command printed may hold the tag itself.
        end_tag = f"</{block}>"
        close = text.rfind(end_tag, at)
        body_end = close if close >= 0 else len(text)
        body = text[at:body_end]
        for start, ttype, value in _lexed(_output_lexer(body), body):
            yield at + start, ttype, value
        at = body_end
        if close >= 0:
            yield close, Comment, end_tag
            at = close + len(end_tag)
    if at < len(text):
        yield at, Text, text[at:]


def _prose(text: str) -> Iterator[tuple[int, _TokenType, str]]:
    """A message's text: plain, but for Markdown headings and fenced code (by its fence's language). A
    user message that is mini-swe-agent's observation (a run without tool calls) is lexed as one."""
    if _OBSERVATION.match(text):
        yield from _observation(text)
        return
    at = 0
    while (m := _PROSE_MARKS.search(text, at)) is not None:
        if m.start() > at:
            yield at, Text, text[at : m.start()]
        at = m.end()
        if m.group(1) is not None:  # a heading
            yield m.start(), Generic.Heading, m.group(1)
            continue
        # a fence: its code runs to the closing fence (or the end of the text), lexed as the fence says
        yield m.start(), Comment, m.group()
        close = re.compile(rf"^{re.escape(m.group(2))}[ \t]*$", re.M).search(text, at)
        code_end = close.start() if close is not None else len(text)
        for start, ttype, value in _lexed(_FENCE_LEXERS.get(m.group(3).lower()), text[at:code_end]):
            yield at + start, ttype, value
        at = code_end
        if close is not None:
            yield close.start(), Comment, close.group()
            at = close.end()
    if at < len(text):
        yield at, Text, text[at:]


def _part(kind: str, text: str) -> _Tokens:
    """The tokens of one part (`kind`: prose, output, args), kept by its text."""
    global _kept_chars
    key = (kind, text)
    with _lock:
        found = _kept.get(key)
        if found is not None:
            _kept.move_to_end(key)
            return found
    if kind == "prose":
        tokens = tuple(_prose(text))
    elif kind == "output":
        observed = _OBSERVATION.match(text) is not None
        tokens = tuple(_observation(text) if observed else _lexed(_output_lexer(text), text))
    else:
        tokens = tuple(_lexed(_output_lexer(text) if text.lstrip()[:1] in "{[" else None, text))
    if len(text) <= KEPT_CHARS // 4:  # a huge part would push out every other
        with _lock:
            if key not in _kept:
                _kept[key] = tokens
                _kept_chars += len(text)
                while _kept_chars > KEPT_CHARS:
                    (_, old), _ = _kept.popitem(last=False)
                    _kept_chars -= len(old)
    return tokens


class TranscriptLexer(Lexer):
    name = "transcript"
    aliases = ["transcript"]

    def get_tokens_unprocessed(self, text: str) -> Iterator[tuple[int, _TokenType, str]]:  # type: ignore[override]
        at, kind = 0, "prose"
        for m in _HEADER.finditer(text):
            yield from _segment(kind, text, at, m.start())
            role, result = m.group(1), m.group(2)
            # who speaks stands out (bold in both themes); a tool part's header is quieter, as a subheading
            yield m.start(), Generic.Prompt if role is not None else Generic.Subheading, m.group()
            at = m.end()
            kind = "prose" if role is not None else "output" if result is not None else "args"
        yield from _segment(kind, text, at, len(text))


def _segment(kind: str, text: str, start: int, end: int) -> Iterator[tuple[int, _TokenType, str]]:
    """The tokens of text[start:end], a part. Its trailing newlines apart: the newest message ends the
    text on one turn and is followed by the next message's blank line on the next, the same part."""
    part = text[start:end]
    body = part.rstrip("\n")
    if body:
        for at, ttype, value in _part(kind, body):
            yield start + at, ttype, value
    if len(body) < len(part):
        yield start + len(body), Text, part[len(body) :]


def kept_parts() -> int:
    """How many parts' tokens are kept (tests)."""
    with _lock:
        return len(_kept)


def forget() -> None:
    """Drop the kept tokens (tests; a theme does not change them: they are token types, not styles)."""
    global _kept_chars
    with _lock:
        _kept.clear()
        _kept_chars = 0
