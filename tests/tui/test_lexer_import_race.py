"""The first frame of `cp-inspect attach` once showed "ImportError: cannot import name 'TextLexer' from
'pygments.lexers'": at the end of its first import `pygments.lexers` replaces itself in sys.modules with
a lazy module whose `__getattr__` loads lexer classes, and a second thread importing it at that moment
gets the module object from before the swap, which has no lexer classes. The content worker and the UI
thread both highlight at start. This runs the TUI's highlighting entry points from several threads at
once in a fresh interpreter, on a fresh import of pygments' lexers each round."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CHILD = r"""
import sys, threading
sys.setswitchinterval(1e-6)  # switch threads often: the window is a few bytecodes wide
from panels import highlight, text_document

def fresh_pygments_lexers():
    for name in [n for n in sys.modules if n == "pygments.lexers" or n.startswith("pygments.lexers.")]:
        del sys.modules[name]
    import pygments
    pygments.__dict__.pop("lexers", None)
    text_document._THEMES.clear()

CALLS = [
    lambda: highlight.lexer_class("json"),
    lambda: highlight.lexer_class("python"),
    lambda: highlight.lexer_class("text"),
    lambda: text_document.prepare("import os\ndef f(): pass\n", dark=True, width=40).line(0),
    lambda: text_document.prepare("plain words\n", dark=False, width=40).line(0),
    lambda: highlight.highlight("# title\n- item\n", "markdown"),
]
errors = []
for _ in range(ROUNDS):
    fresh_pygments_lexers()
    barrier = threading.Barrier(len(CALLS))

    def run(call):
        barrier.wait()
        try:
            call()
        except Exception as exc:
            errors.append(repr(exc))

    threads = [threading.Thread(target=run, args=(c,)) for c in CALLS]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
print(len(errors), errors[:3])
"""


def test_highlighting_from_several_threads_at_first_import_never_fails() -> None:
    # The old imports (`from pygments.lexers import TextLexer`) failed ~200 times in 150 rounds.
    code = CHILD.replace("ROUNDS", "60")
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("0 "), out.stdout
