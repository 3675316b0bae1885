"""The evaluation's input: a trajectory as steps, and the anchors (paths, identifiers) the metric counts.

The metric itself ("used", "served", "task present") is defined in the `evaluate` module docstring.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

_EXT = (
    r"(?:py|pyi|pyx|cfg|toml|ini|txt|md|rst|json|yaml|yml|js|ts|c|h|cc|cpp|sh|html|sql|csv|xml|java|rb|go|rs)"
)
PATH_RE = re.compile(rf"(?:[\w.-]+/)+[\w.-]*\w|\b[\w-]+\.{_EXT}\b")
IDENT_RE = re.compile(
    r"\b(?:[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+|_+[A-Za-z0-9]+(?:_[A-Za-z0-9]+)*_*|[A-Za-z]*[a-z][A-Z][A-Za-z0-9]*)\b"
)


def anchors(text: str) -> set[str]:
    """File paths and code identifiers in `text` (see the `evaluate` module docstring)."""
    out: set[str] = set()
    for m in PATH_RE.finditer(text):
        p = m.group(0).strip("./")
        if len(p) >= 5 and not p.startswith(("http:", "https:")) and any(c.isalpha() for c in p):
            out.add(p)
    for m in IDENT_RE.finditer(text):
        w = m.group(0)
        if len(w) >= 5 and w.strip("_"):
            out.add(w)
    return out


def path_anchors(text: str) -> set[str]:
    return {p for p in (m.group(0).strip("./") for m in PATH_RE.finditer(text)) if len(p) >= 5}


@dataclass(frozen=True)
class Msg:
    """One message of an evaluation step's prompt."""
    role: str
    text: str
    call_ids: tuple[str, ...] = ()  # tool-call ids an assistant message made
    reply_to: str | None = None  # tool-call id a tool result answers


@dataclass(frozen=True)
class Step:
    """One call of a trajectory for `cp-inspect eval`: its prompt and the output the window is scored against."""
    prompt: tuple[Msg, ...]
    output: str  # response text + decoded tool-call arguments (what the metric reads)


def _decode_args(arguments: str) -> str:
    try:
        value = json.loads(arguments)
    except ValueError:
        return arguments
    parts: list[str] = []

    def walk(v: Any) -> None:
        if isinstance(v, str):
            parts.append(v)
        elif isinstance(v, dict):
            for k in v:
                walk(v[k])
        elif isinstance(v, list):
            for x in v:
                walk(x)

    walk(value)
    return "\n".join(parts)


def _msg(m: Any) -> Msg:
    calls = tuple(getattr(m, "tool_calls", ()) or ())
    text = m.content or ""
    if calls:
        # What the model saw of its own calls: name and the arguments as sent.
        text = (text + "\n" if text else "") + "\n".join(f"{c.name}({c.arguments})" for c in calls)
    return Msg(m.role, text, tuple(c.id for c in calls), getattr(m, "tool_call_id", None))


def steps_from_session(session: Any) -> list[Step]:
    """ImportedSession -> steps (prompt as sent, response text for the metric). Failed calls are skipped."""
    out: list[Step] = []
    for call in session.calls:
        if call.response is None:
            continue
        r = call.response
        output = (r.content or "") + "\n" + "\n".join(_decode_args(c.arguments) for c in r.tool_calls)
        out.append(Step(tuple(_msg(m) for m in call.messages), output))
    return out
