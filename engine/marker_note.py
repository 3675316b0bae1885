"""Reading a trace's place_markers step: why it placed fewer markers than the provider allows.

A reader of traces (`cp-inspect explain`, the inspector's cache layout) needs only this, and it is kept
apart from engine/optimize/markers.py, the rule that writes the step: importing that module runs
engine/optimize/__init__.py, every optimizer rule, the assembly and the providers (~35 ms of CPU before a
long recording's first frame, which draws the cache layout; BENCHMARKS.md, Start-up). The rule and its
readers share the step's name through here, so they cannot drift apart.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from engine.wording import counted

NAME = "place_markers"  # the step's name in a trace (engine.optimize.markers.NAME)
_OLD_SHORT = re.compile(r"\b(\d+) prefix\(es\)")


def note_of(steps: Iterable[Mapping[str, Any]]) -> str:
    """Why a trace's place_markers step placed fewer markers than its provider allows (what follows the
    count in its detail or reason), or "": for the trace's readers (explain, the cache layout)."""
    for s in steps:
        if s.get("step") == NAME:
            text = str(s.get("detail") or s.get("reason") or "")
            count, sep, rest = text.partition("; ")
            # A provider that caches by itself (automatic) has no count: its whole text is the note.
            note = rest if sep else ("" if count.split(" ")[0].isdigit() else text)
            # Recordings journaled before the count was worded say "1 prefix(es) under": read as now.
            return _OLD_SHORT.sub(lambda m: counted(int(m[1]), "prefix", "prefixes"), note)
    return ""
