"""Importers: real agent trajectories in, one neutral typed session model out.

    from engine.importers import load
    session = load("run.traj.json")              # format sniffed from the content
    session = load("log.jsonl", "proxy-jsonl", model="claude-sonnet-4-5", provider="anthropic")

Every format module turns its source into `ImportedSession` (see `model.py`): one `CallRec` per model
call, the prompt as sent, the response, the tools, and provider usage where the source has it.
A file that does not fit raises `ImportFormatError` naming the format and the first misfit.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine.importers import claude_trace, mini_swe_agent, openhands, proxy_jsonl, swe_agent, swe_smith
from engine.importers._common import EMPTY_FILE, Ctx, parse_json, read_text
from engine.importers.model import (
    ANY_FORMAT,
    CallRec,
    ImportedSession,
    ImportFormatError,
    Interner,
    MessageRec,
    NoSuchConversation,
    ToolCallRec,
    ToolSchemaRec,
    UsageRec,
    validate_pairing,
)
from engine.wording import counted

__all__ = [
    "FORMATS",
    "CallRec",
    "ImportFormatError",
    "ImportedSession",
    "Interner",
    "MessageRec",
    "NoSuchConversation",
    "ToolCallRec",
    "ToolSchemaRec",
    "UsageRec",
    "conversation_list",
    "load",
    "sniff",
    "validate_pairing",
]


class _Format:
    """Registry entry: how to recognise a format and how to parse it from the file's text."""

    def __init__(
        self,
        name: str,
        parse_text: Callable[[str, str], ImportedSession],
        sniff_text: Callable[[str, Any], bool],
        suffixes: tuple[str, ...],
        parse_one: Callable[[str, str, int], ImportedSession] | None = None,
    ) -> None:
        self.name = name
        self.parse_text = parse_text
        self.sniff_text = sniff_text  # (text, parsed JSON or _NOT_JSON) -> bool
        self.suffixes = suffixes
        # (text, path, N) -> conversation N of a log holding several (1 = the largest); None: one only
        self.parse_one = parse_one

    def __repr__(self) -> str:
        return f"<format {self.name}>"


_NOT_JSON = object()


def _json_format(name: str, mod: Any, suffixes: tuple[str, ...]) -> _Format:
    def parse_text(text: str, path: str) -> ImportedSession:
        session: ImportedSession = mod.parse(parse_json(text, Ctx(name, path)), path)
        return session

    def sniff_text(text: str, data: Any) -> bool:
        return data is not _NOT_JSON and bool(mod.sniff(data))

    return _Format(name, parse_text, sniff_text, suffixes)


def _jsonl_sniffer(sniff_line: Callable[[Any], bool]) -> Callable[[str, Any], bool]:
    def sniff_text(text: str, data: Any) -> bool:
        # A one-line JSONL file is also valid JSON; either way the first object must be a request/response pair.
        first = next((ln for ln in text.splitlines() if ln.strip()), "")
        try:
            return sniff_line(json.loads(first))
        except json.JSONDecodeError:
            return False

    return sniff_text


# Order matters for sniffing: the most specific markers first (mini-swe-agent's trajectory_format,
# SWE-agent's history+trajectory), then OpenAI tool-call lists, then text-embedded calls.
FORMATS: dict[str, _Format] = {
    "mini-swe-agent": _json_format("mini-swe-agent", mini_swe_agent, (".traj.json",)),
    "swe-agent": _json_format("swe-agent", swe_agent, (".traj",)),
    "openhands": _json_format("openhands", openhands, ()),
    "swe-smith": _json_format("swe-smith", swe_smith, ()),
    "claude-trace": _Format(
        "claude-trace",
        claude_trace.parse_lines,
        _jsonl_sniffer(claude_trace.sniff_line),
        (),
        claude_trace.parse_lines,
    ),
    "proxy-jsonl": _Format(
        "proxy-jsonl",
        proxy_jsonl.parse_lines,
        _jsonl_sniffer(proxy_jsonl.sniff_line),
        (".jsonl",),
        proxy_jsonl.parse_lines,
    ),
}


def sniff(path: str | Path, text: str | None = None) -> str:
    """Name of the format of `path`, or ImportFormatError saying why none fits."""
    p = str(path)
    if text is None:
        text = read_text(p, ANY_FORMAT)
    try:
        data: Any = json.loads(text)
    except json.JSONDecodeError as e:
        data = _NOT_JSON
        err = e
    for name, fmt in FORMATS.items():
        if fmt.sniff_text(text, data):
            return name
    # Nothing matched: name the format the file name promises, so the error is about the right thing.
    by_suffix = next((n for n, f in FORMATS.items() if any(p.endswith(s) for s in f.suffixes)), None)
    if data is _NOT_JSON:
        fmt_name = by_suffix or ANY_FORMAT
        if not text.strip():  # it said "invalid JSON at line 1, column 1: Expecting value"
            raise ImportFormatError(fmt_name, p, "", EMPTY_FILE)
        raise ImportFormatError(
            fmt_name, p, "", f"invalid JSON at line {err.lineno}, column {err.colno}: {err.msg}"
        )
    if by_suffix is not None:
        # Let that format's parser report the first thing that does not fit (or accept the file).
        FORMATS[by_suffix].parse_text(text, p)
        return by_suffix
    if (
        isinstance(data, list)
        and data
        and all(isinstance(e, dict) for e in data)
        and any("action" in e or "observation" in e for e in data)
    ):
        # OpenHands' own event stream: actions and observations, not the prompts the model was sent.
        raise ImportFormatError(
            ANY_FORMAT,
            p,
            "",
            "it is a list of action/observation events (OpenHands' event stream), which does not hold the "
            "messages sent to the model; import a record of the conversation's messages instead (an "
            "OpenHands record with `messages` and `tools`, as agent-data-protocol exports it)",
        )
    known = ", ".join(FORMATS)
    shape = f"an object with keys {sorted(data)[:8]}" if isinstance(data, dict) else type(data).__name__
    raise ImportFormatError(ANY_FORMAT, p, "", f"top level is {shape}; tried {known}")


def _one_line(session: ImportedSession) -> str:
    """The listing line of a file that holds one conversation (as proxy_jsonl.describe_conversations)."""
    first = session.calls[0].messages if session.calls else ()
    text = " ".join(next((m.content for m in first if m.role != "system" and m.content.strip()), "").split())
    shown = repr(text if len(text) <= 48 else text[:45] + "...") if text else "(no message)"
    return f"1: {counted(len(session.calls), 'call')} on {session.model}, {shown}"


def conversation_list(session: ImportedSession) -> list[str]:
    """The conversations of the file `session` came from, one line each, numbered as load's
    `conversation` takes them (a trajectory of one conversation: one line)."""
    listed = session.meta.get("conversation_list")
    return list(listed) if listed else [_one_line(session)]


def _check_named_format(format: str, path: str, text: str) -> None:
    """A file named as one format that is recognisably another is refused, saying which: the parsers
    share OpenAI's message shape, so an OpenHands record read as mini-swe-agent came out with
    mini-swe-agent's bash tool in place of its own tools, and a SWE-smith record read as OpenHands or
    mini-swe-agent with its calls left as text, each without a word."""
    try:
        data: Any = json.loads(text)
    except json.JSONDecodeError:
        data = _NOT_JSON  # JSON lines, or broken: the named format's parser says what is wrong
    if FORMATS[format].sniff_text(text, data):
        return
    other = next((n for n, f in FORMATS.items() if n != format and f.sniff_text(text, data)), None)
    if other is not None:
        article = "an" if other[0] in "aeiou" else "a"
        raise ImportFormatError(
            format, path, "", f"the file is {article} {other} trajectory: import it as `{other}` (or `auto`)"
        )


def load(
    path: str | Path,
    format: str | None = None,
    *,
    model: str | None = None,
    provider: str | None = None,
    conversation: int | None = None,
) -> ImportedSession:
    """Import one trajectory file. `format` None sniffs it; `model`/`provider` override what the file says
    (many sources do not name the model at all). `conversation`: which of a log's conversations (1 = the
    one with the most calls, as `meta["conversation_list"]` numbers them; proxy JSONL and claude-trace
    logs hold several); NoSuchConversation for a number the file does not have."""
    p = str(path)
    if format is not None and format not in FORMATS:
        raise ValueError(f"unknown import format {format!r}; choose one of {', '.join(FORMATS)}")
    text = read_text(p, format or ANY_FORMAT)
    if format is not None:
        _check_named_format(format, p, text)
    name = format or sniff(p, text)
    fmt = FORMATS[name]
    if conversation is None or conversation == 1 and fmt.parse_one is None:
        session = fmt.parse_text(text, p)
    elif fmt.parse_one is not None:
        session = fmt.parse_one(text, p, conversation)
    else:
        session = fmt.parse_text(text, p)
        raise NoSuchConversation(
            name,
            p,
            "",
            f"holds one conversation (a {name} trajectory); conversation {conversation} does not exist",
            [_one_line(session)],
        )
    if model is not None:
        session.model = model
    if provider is not None:
        session.provider = provider
    return session
