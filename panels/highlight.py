"""Syntax highlighting for the content viewer: pygments via rich, plus the optimizer's own marks
(`[...N tokens omitted...]`, spill references) so a person sees at once what was cut and where it went."""

from __future__ import annotations

import json
import re
import threading
from types import ModuleType
from typing import TYPE_CHECKING

from rich.style import Style
from rich.text import Span, Text

if TYPE_CHECKING:
    from pygments.lexer import Lexer

# engine/assembly.omission_marker: "[...N tokens omitted...]", or with what was cut ("... omitted (28 earlier
# rounds dropped)...]", compaction's marker, which this missed: the history's biggest cut was not marked).
OMISSION = re.compile(r"\[\.\.\.\d[\d,]* tokens omitted(?: \([^()\n]*\))?\.\.\.\]")
SPILL = re.compile(r"spill://[\w./-]+|\[(?:spilled|tool result cleared)[^\]]*\]")
MAX_CHARS = 200_000  # beyond this the viewer shows a prefix; highlighting megabytes would stall a frame

# Every import of pygments' lexers (and of rich.syntax, which imports them) goes through this lock. At the
# end of its first import `pygments.lexers` swaps itself in sys.modules for a lazy module; a second thread
# importing a lexer module in that moment (the content worker while the UI thread highlights) got the
# module from before the swap ("cannot import name 'TextLexer'") or found no entry at all
# (KeyError('pygments.lexers') from importlib). Importing one thread at a time closes both; once loaded,
# an import is a dictionary lookup, so the lock costs nothing a frame would notice. Reentrant: loading
# the transcript lexer imports lexer modules of its own.
_PYGMENTS_IMPORTS = threading.RLock()


def guess_language(text: str) -> str:
    """JSON if it parses, Python for tracebacks/code, Markdown for prose. Cheap and predictable,
    unlike pygments' guess_lexer, which is slow and often wrong on short snippets."""
    stripped = text.lstrip()
    # A captured turn's request view (engine/recording/sent.py: "SENT: the request the agent actually
    # sent ...") is a report of the messages, not code: one tool result holding a `def` made the whole
    # view "python" (its title said so and Python's keywords were coloured through the transcript).
    if stripped.startswith("SENT: "):
        return "text"
    # A history section's messages ("## user", tool calls and results): lexed part by part, each as what
    # it is (panels/transcript_lexer.py); as "python" (for a `def` in one tool result) every "is" and
    # "not" of its prose was coloured as a keyword.
    if stripped.startswith("## ") or "\n## " in text[:MAX_CHARS]:
        with _PYGMENTS_IMPORTS:
            from panels.transcript_lexer import is_transcript
        if is_transcript(text[:MAX_CHARS]):
            return "transcript"
    if stripped[:1] in "{[" and not stripped.startswith("[..."):
        try:
            json.loads(text)
            return "json"
        except ValueError:
            pass
    if re.search(r"^(Traceback|\s*def |\s*class |import |from \w+ import)", text, re.M):
        return "python"
    if re.search(r"^(#{1,6} |[-*] |\*\*)", text, re.M):
        return "markdown"
    return "text"


def lexer_class(language: str) -> type[Lexer]:
    """pygments' lexer for a `guess_language` answer (plain text for anything else). pygments (and rich's
    Syntax, which imports it) are imported on the first text shown, not with the app: ~40 ms of
    start-up, and the first screen shows no content.

    Imported from their own modules, never as `from pygments.lexers import ...`: at the end of its first
    import that package replaces itself in sys.modules with a lazy module, and a thread importing it at
    that moment (the content worker, while the UI thread highlights) gets the module from before the
    swap, which has no lexer classes: "cannot import name 'TextLexer'" on the first frame. And only
    under `_PYGMENTS_IMPORTS`: even their own modules raced, rarely, while the package loaded."""
    with _PYGMENTS_IMPORTS:
        from pygments.lexers.data import JsonLexer
        from pygments.lexers.markup import MarkdownLexer
        from pygments.lexers.python import PythonLexer
        from pygments.lexers.special import TextLexer

        if language == "transcript":
            from panels.transcript_lexer import TranscriptLexer

            return TranscriptLexer
    lexers: dict[str, type[Lexer]] = {"json": JsonLexer, "python": PythonLexer, "markdown": MarkdownLexer}
    return lexers.get(language, TextLexer)


def rich_syntax() -> ModuleType:
    """rich.syntax, imported (it imports pygments' lexers) under the same lock as `lexer_class`."""
    with _PYGMENTS_IMPORTS:
        import rich.syntax

    return rich.syntax


def _fg_only(style: str | Style) -> str | Style:
    if isinstance(style, Style) and style.bgcolor is not None:
        return Style(color=style.color, bold=style.bold, italic=style.italic, underline=style.underline)
    return style


def highlight(text: str, language: str | None = None, dark: bool = True) -> Text:
    truncated = len(text) > MAX_CHARS
    text = text[:MAX_CHARS]
    language = language or guess_language(text)
    theme = "monokai" if dark else "friendly"
    syntax = rich_syntax().Syntax(text, lexer_class(language)(), theme=theme, background_color="default")
    out = syntax.highlight(text)
    out.rstrip()
    # Drop the pygments theme's background so the viewer sits on the app theme's surface.
    out.spans = [Span(sp.start, sp.end, _fg_only(sp.style)) for sp in out.spans]
    out.highlight_regex(OMISSION, "bold black on yellow")
    out.highlight_regex(SPILL, "bold underline magenta")
    if truncated:
        out.append(f"\n… showing the first {MAX_CHARS:,} characters", style="italic")
    return out
