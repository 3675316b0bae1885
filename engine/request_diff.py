"""Where two provider requests first differ, and what kind of change it is.

Both requests (raw bytes, a JSON string, a dict, or the engine's SerializedRequest) are cut into
*units* in the order a provider's prefix cache reads them: tools, then the system prompt, then the
messages. Anthropic Messages, OpenAI Chat Completions, OpenAI Responses and Bedrock Converse shapes
are recognised; each unit is its canonical JSON with cache markers (`cache_control`, Bedrock
`cachePoint`) taken out, because a marker changes the bytes but not what the cache holds.

The *prefix stream* of a request is its units' bytes, each followed by a newline (canonical JSON never
contains a raw newline, so a unit can never run on into the next). `RequestDiff.offset` is the length of
the longest common prefix of the two streams: the first byte at which the provider's cache stops
matching. The first differing unit names the section (tools, system or a section id the engine gave
it, a message by index and role), the content block inside it, and a cause:

    tool_order, tool_added, tool_removed, tool_description, tool_schema,
    volatile (a timestamp, counter or id changed), latch_changed, system_edited, system_added,
    system_removed, message_rewritten, message_removed, appended (nothing broke: the request grew),
    truncated, marker_moved, model_changed, params_changed, identical

Pure functions, no I/O; used by `explain` (why the cache missed), `cp-inspect diff`, the shadow
rollout and validate_spawn.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from engine.common_prefix import common_prefix_len  # used below; still importable from here, its home before
from engine.errors import ContextPipeError
from engine.hashing import canonical_json
from engine.wording import counted, nouned

# Causes that leave the cached prefix intact.
HARMLESS = frozenset({"identical", "appended", "params_changed"})
PREFIX_KEYS = frozenset({"tools", "system", "messages", "toolConfig", "input", "instructions"})
_MARKER_KEYS = ("cache_control",)
_VOLATILE_CHARS = set("0123456789abcdefABCDEF:-./TZ+_ ")
EXCERPT = 40


class RequestDiffError(ContextPipeError, ValueError):
    """A request could not be read as a provider request body."""


@dataclass(frozen=True)
class Unit:
    """One cacheable unit of a request, in prefix order."""

    segment: str  # "tools" | "system" | "messages"
    section: str  # "tools", "system" or the engine's section id; "messages" for a message
    index: int  # position within its segment
    name: str  # tool name, or a message's role, or "" for a system block
    content: bytes  # canonical JSON, cache markers removed
    marker: bool  # a cache marker (breakpoint) sits on this unit
    parts: tuple[bytes, ...] = ()  # a message's content blocks (canonical JSON), for the block index

    @property
    def label(self) -> str:
        if self.segment == "tools":
            return f"tool {self.name!r} (#{self.index})"
        if self.segment == "system":
            sec = "" if self.section == "system" else f" [{self.section}]"
            return f"system block {self.index}{sec}"
        return f"message {self.index} ({self.name})"


@dataclass(frozen=True)
class ParsedRequest:
    """A provider request split into its prefix units (tools, system, messages) and the rest of its params."""
    shape: str  # anthropic | openai | responses | bedrock
    model: str
    units: tuple[Unit, ...]
    params: Mapping[str, Any]  # everything outside the prefix (model, max_tokens, temperature, ...)

    @property
    def stream_length(self) -> int:
        return sum(len(u.content) + 1 for u in self.units)

    def stream(self) -> bytes:
        """The prefix stream (see module doc)."""
        return b"".join(u.content + b"\n" for u in self.units)

    def markers(self) -> list[int]:
        return [i for i, u in enumerate(self.units) if u.marker]

    def tool_names(self) -> list[str]:
        return [u.name for u in self.units if u.segment == "tools"]


@dataclass(frozen=True)
class RequestDiff:
    """The first difference between two requests' prefixes, its cause and whether it breaks the cache."""
    cause: str
    breaks_cache: bool
    offset: int  # first differing byte of the prefix streams (== common prefix length)
    unit: int | None = None  # index of the first differing unit (prefix order)
    segment: str = ""
    section: str = ""
    label: str = ""
    block: int | None = None  # the content block inside a message, when it has a list of them
    unit_offset: int = 0  # byte offset inside the unit
    detail: str = ""
    before: str = ""  # excerpt of the old text around the difference
    after: str = ""
    shared_tokens_hint: int = 0  # bytes of the shared prefix (a token estimate is bytes/4)
    markers: tuple[tuple[int, ...], tuple[int, ...]] = ((), ())
    params: dict[str, list[Any]] = field(default_factory=dict)

    @property
    def identical(self) -> bool:
        return self.cause == "identical"

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["markers"] = [list(self.markers[0]), list(self.markers[1])]
        return d

    def summary(self) -> str:
        """One line: where and what."""
        if self.cause == "identical":
            return "identical requests"
        where = f"{self.label}" + (f", block {self.block}" if self.block is not None else "")
        at = f" at byte {self.offset}" if self.unit is not None else ""
        return f"{self.cause}: {where}{at}: {self.detail}".rstrip(": ")


# ------------------------------------------------------------------------------------------ parsing


def _load(req: Any) -> dict[str, Any]:
    if hasattr(req, "body") and isinstance(req.body, bytes | bytearray):
        req = req.body
    if isinstance(req, bytes | bytearray | memoryview):
        try:
            req = json.loads(bytes(req))
        except (ValueError, UnicodeDecodeError) as exc:
            raise RequestDiffError(
                f"request body is not JSON ({exc}); pass the provider request body"
            ) from exc
    elif isinstance(req, str):
        try:
            req = json.loads(req)
        except ValueError as exc:
            raise RequestDiffError(
                f"request text is not JSON ({exc}); pass the provider request body"
            ) from exc
    if not isinstance(req, Mapping):
        raise RequestDiffError(
            f"a request must be a JSON object (a provider request body), got {type(req).__name__}"
        )
    return dict(req)


def detect_shape(body: Mapping[str, Any]) -> str:
    if "modelId" in body or "toolConfig" in body or "inferenceConfig" in body:
        return "bedrock"
    if "messages" not in body and ("input" in body or "instructions" in body):
        return "responses"
    if "system" in body:
        return "anthropic"
    tools, messages = body.get("tools"), body.get("messages")  # (not lists: parse_request says so)
    for t in tools if isinstance(tools, list) else ():
        if isinstance(t, Mapping) and "input_schema" in t:
            return "anthropic"
    for m in messages if isinstance(messages, list) else ():
        if isinstance(m, Mapping) and m.get("role") in ("system", "developer", "tool"):
            return "openai"
        content = m.get("content") if isinstance(m, Mapping) else None
        if isinstance(content, list) and any(
            isinstance(c, Mapping) and c.get("type") in ("tool_use", "tool_result") for c in content
        ):
            return "anthropic"
    return "openai"


def _strip(v: Any) -> tuple[Any, bool]:
    """`v` without cache markers, and whether it carried one (at any depth up to a content block)."""
    if isinstance(v, Mapping):
        marked = any(k in v for k in _MARKER_KEYS)
        out = {}
        for k, x in v.items():
            if k in _MARKER_KEYS:
                continue
            x2, m = _strip(x)
            marked = marked or m
            out[k] = x2
        return out, marked
    if isinstance(v, list):
        items, marked = [], False
        for x in v:
            if isinstance(x, Mapping) and set(x) == {"cachePoint"}:
                marked = True
                continue
            x2, m = _strip(x)
            marked = marked or m
            items.append(x2)
        return items, marked
    return v, False


def _split_points(items: Sequence[Any]) -> list[tuple[Any, bool]]:
    """A Bedrock-style list where a `{"cachePoint": ...}` element marks the element before it."""
    out: list[tuple[Any, bool]] = []
    for x in items:
        if isinstance(x, Mapping) and set(x) == {"cachePoint"}:
            if out:
                out[-1] = (out[-1][0], True)
            continue
        out.append((x, False))
    return out


def _tool_fields(t: Any) -> tuple[str, str, Any]:
    if not isinstance(t, Mapping):
        return str(t), "", None
    if isinstance(t.get("toolSpec"), Mapping):
        s = t["toolSpec"]
        return str(s.get("name", "")), str(s.get("description", "")), s.get("inputSchema")
    if isinstance(t.get("function"), Mapping):
        f = t["function"]
        return str(f.get("name", "")), str(f.get("description", "")), f.get("parameters")
    schema = t.get("input_schema", t.get("parameters"))
    return str(t.get("name", t.get("type", ""))), str(t.get("description", "")), schema


def _listed(body: Mapping[str, Any], key: str) -> list[Any]:
    """A list field of the body (absent or null: empty). Anything else is not a provider request: a
    RequestDiffError naming the field, where it was a TypeError from deep inside (validate_spawn and
    diff_requests take raw bodies from the caller)."""
    v = body.get(key.rsplit(".", 1)[-1])
    if v is None or v == "":
        return []
    if not isinstance(v, list | tuple):
        raise RequestDiffError(f"request field {key!r} must be a list, got {type(v).__name__}")
    return list(v)


def parse_request(req: Any, sections: Sequence[str] | None = None) -> ParsedRequest:
    """Cut a provider request into units (see module doc). `sections` names the system blocks in order
    (the engine's section ids); without it they are all "system"."""
    if hasattr(req, "serialized"):  # the pipeline's Request
        req = req.serialized
    if sections is None and hasattr(req, "blocks") and hasattr(req, "body"):
        sections = [b.section for b in req.blocks if b.segment == "system"]
    body = _load(req)
    shape = detect_shape(body)
    units: list[Unit] = []
    sys_names = list(sections or ())

    def add(segment: str, raw: Any, marked: bool, name: str = "", section: str = "") -> None:
        clean, m = _strip(raw)
        idx = sum(1 for u in units if u.segment == segment)
        if segment == "system" and not section:
            section = sys_names[idx] if idx < len(sys_names) else "system"
        parts: tuple[bytes, ...] = ()
        if segment == "messages" and isinstance(clean, Mapping) and isinstance(clean.get("content"), list):
            parts = tuple(canonical_json(p) for p in clean["content"])
        units.append(Unit(segment, section or segment, idx, name, canonical_json(clean), marked or m, parts))

    # Tools first: every provider's prefix cache reads them before the system prompt.
    tools_raw: Any = _listed(body, "tools")
    if shape == "bedrock":
        config = body.get("toolConfig") or {}
        if not isinstance(config, Mapping):
            raise RequestDiffError(
                f"request field 'toolConfig' must be an object, got {type(config).__name__}"
            )
        tools_raw = _listed(config, "toolConfig.tools")
    for t, marked in _split_points(tools_raw):
        add("tools", t, marked, _tool_fields(t)[0])

    messages: list[Any] = _listed(body, "messages")
    if shape == "responses":
        if body.get("instructions"):
            add("system", {"instructions": body["instructions"]}, False)
        inp = body.get("input")
        messages = [{"role": "user", "content": inp}] if isinstance(inp, str) else _listed(body, "input")
    elif shape in ("anthropic", "bedrock"):
        system = body.get("system")
        if isinstance(system, str):
            add("system", {"type": "text", "text": system}, False)
        else:
            for s, marked in _split_points(_listed(body, "system")):
                add("system", s, marked)
    leading = shape in ("openai", "responses")
    for m in messages:
        role = str(m.get("role", m.get("type", ""))) if isinstance(m, Mapping) else ""
        if leading and role in ("system", "developer"):
            add("system", m, False)
            continue
        leading = False
        add("messages", m, False, role)
    params = {k: v for k, v in body.items() if k not in PREFIX_KEYS}
    model = str(body.get("model", body.get("modelId", "")))
    return ParsedRequest(shape, model, tuple(units), params)


# ------------------------------------------------------------------------------------------ diffing


def _excerpts(a: bytes, b: bytes, at: int) -> tuple[str, str, str, str]:
    """Readable excerpts of both sides around the first difference, and the changed *local* spans:
    from the difference, widened both ways over the characters a timestamp or an id is made of. The
    spans are "" unless both sides line up again right after them (the change is local)."""
    ta, tb = a.decode("utf-8", "replace"), b.decode("utf-8", "replace")
    # Work in characters: the byte offset may sit inside a multi-byte character.
    p = len(a[:at].decode("utf-8", "ignore"))
    lo = max(0, p - EXCERPT)
    before, after = ta[lo : p + EXCERPT], tb[lo : p + EXCERPT]
    i = p
    while i > 0 and ta[i - 1] in _VOLATILE_CHARS:
        i -= 1
    ea, eb = p, p
    while ea < len(ta) and ta[ea] in _VOLATILE_CHARS:
        ea += 1
    while eb < len(tb) and tb[eb] in _VOLATILE_CHARS:
        eb += 1
    if ta[ea : ea + 16] != tb[eb : eb + 16]:
        return before, after, "", ""
    return before, after, ta[i:ea], tb[i:eb]


_VOLATILE_RE = re.compile(r"^[0-9a-fA-F:\-./TZ+_ ]{2,64}$")


def _volatile(span_a: str, span_b: str) -> bool:
    """Both changed spans look like a timestamp, a counter or an id: digits and separators."""
    if span_a.startswith("...") or span_b.startswith("..."):
        return False  # the engine's own "[...N tokens omitted...]" trim marker, not a clock
    for s in (span_a.strip(), span_b.strip()):
        if not _VOLATILE_RE.match(s) or sum(c.isdigit() for c in s) < 2:
            return False
    return True


def diff_requests(
    a: Any,
    b: Any,
    *,
    sections_a: Sequence[str] | None = None,
    sections_b: Sequence[str] | None = None,
) -> RequestDiff:
    """The first point where request `b` stops sharing `a`'s cacheable prefix (see module doc).
    `a` is the earlier (baseline) request, `b` the later (candidate) one."""
    pa = a if isinstance(a, ParsedRequest) else parse_request(a, sections_a)
    pb = b if isinstance(b, ParsedRequest) else parse_request(b, sections_b)
    return diff_parsed(pa, pb)


def diff_parsed(pa: ParsedRequest, pb: ParsedRequest) -> RequestDiff:
    params = {
        k: [pa.params.get(k), pb.params.get(k)]
        for k in sorted(set(pa.params) | set(pb.params))
        if pa.params.get(k) != pb.params.get(k)
    }
    marks = (tuple(pa.markers()), tuple(pb.markers()))
    ua, ub = pa.units, pb.units
    offset = 0
    first = None
    for i in range(min(len(ua), len(ub))):
        if ua[i].content != ub[i].content:
            first = i
            break
        offset += len(ua[i].content) + 1
    common = dict(params=params, markers=marks, shared_tokens_hint=offset)
    if pa.model != pb.model:
        return RequestDiff(
            "model_changed",
            True,
            offset,
            first,
            detail=f"model {pa.model!r} -> {pb.model!r}: caches are per model",
            **common,  # type: ignore[arg-type]
        )
    if first is None:
        if len(ua) == len(ub):
            moved = next((i for i in range(len(ua)) if ua[i].marker != ub[i].marker), None)
            if moved is not None:
                u = ub[moved]
                return RequestDiff(
                    "marker_moved",
                    False,
                    offset,
                    moved,
                    u.segment,
                    u.section,
                    u.label,
                    detail=f"cache markers on units {list(marks[0])} -> {list(marks[1])}",
                    **common,  # type: ignore[arg-type]
                )
            if params:
                return RequestDiff(
                    "params_changed",
                    False,
                    offset,
                    detail=", ".join(f"{k} {v[0]!r} -> {v[1]!r}" for k, v in params.items()),
                    **common,  # type: ignore[arg-type]
                )
            return RequestDiff("identical", False, offset, **common)  # type: ignore[arg-type]
        longer, grew = (ub, True) if len(ub) > len(ua) else (ua, False)
        u = longer[min(len(ua), len(ub))]
        n = abs(len(ub) - len(ua))
        if grew:
            return RequestDiff(
                "appended",
                False,
                offset,
                len(ua),
                u.segment,
                u.section,
                u.label,
                detail=f"{counted(n, 'unit')} appended after the shared prefix; nothing cached was changed",
                **common,  # type: ignore[arg-type]
            )
        return RequestDiff(
            "truncated",
            True,
            offset,
            len(ub),
            u.segment,
            u.section,
            u.label,
            detail=f"{counted(n, 'unit')} dropped from the end ({u.label} onwards)",
            **common,  # type: ignore[arg-type]
        )
    x, y = ua[first], ub[first]
    at = common_prefix_len(x.content, y.content)
    offset += at
    before, after, span_a, span_b = _excerpts(x.content, y.content, at)
    block = None
    if x.parts and y.parts:
        block = next(
            (k for k in range(min(len(x.parts), len(y.parts))) if x.parts[k] != y.parts[k]),
            min(len(x.parts), len(y.parts)),
        )
    cause, detail, seg, sec, lab = _classify(pa, pb, first, span_a, span_b)
    return RequestDiff(
        cause,
        True,
        offset,
        first,
        seg,
        sec,
        lab,
        block,
        at,
        detail,
        before,
        after,
        **common,  # type: ignore[arg-type]
    )


def _classify(
    pa: ParsedRequest, pb: ParsedRequest, i: int, span_a: str, span_b: str
) -> tuple[str, str, str, str, str]:
    x, y = pa.units[i], pb.units[i]
    if x.segment == "tools" or y.segment == "tools":
        na, nb = pa.tool_names(), pb.tool_names()
        u = y if y.segment == "tools" else x
        # An edited tool first (an agent that re-registers a tool to edit it may also move it).
        ta = {v.name: v for v in pa.units if v.segment == "tools"}
        tb = {v.name: v for v in pb.units if v.segment == "tools"}
        edited = [n for n in na if n in tb and ta[n].content != tb[n].content]
        if edited:
            n = edited[0]
            da, db = (_tool_fields(json.loads(v.content)) for v in (ta[n], tb[n]))
            moved = (
                ""
                if [k for k in na if k in tb] == [k for k in nb if k in ta]
                else "; the tool order changed too"
            )
            if da[1] != db[1]:
                return (
                    "tool_description",
                    f"description of tool {n!r} edited{moved}",
                    "tools",
                    "tools",
                    u.label,
                )
            return "tool_schema", f"input schema of tool {n!r} edited{moved}", "tools", "tools", u.label
        if sorted(na) == sorted(nb):
            return "tool_order", f"tool order changed: {na} -> {nb}", "tools", "tools", u.label
        added = [n for n in nb if n not in na]
        removed = [n for n in na if n not in nb]
        if y.segment == "tools" and y.name in added:
            return "tool_added", f"new tool {y.name!r} (tools added: {added})", "tools", "tools", u.label
        if removed:
            return "tool_removed", f"{nouned(len(removed), 'tool')} removed: {removed}", "tools", "tools", u.label
        return "tool_order", f"tool order changed: {na} -> {nb}", "tools", "tools", u.label
    if x.segment == "system" or y.segment == "system":
        u = y if y.segment == "system" else x
        if x.segment != y.segment:
            cause = "system_added" if y.segment == "system" else "system_removed"
            return cause, f"{u.label} {cause.split('_')[1]}", "system", u.section, u.label
        if "latches" in (x.section, y.section):
            old, new = _line_at(x.content, y.content)
            return "latch_changed", f"a latch changed: {old!r} -> {new!r}", "system", "latches", u.label
        if _volatile(span_a, span_b):
            return (
                "volatile",
                f"a timestamp or other volatile value changed in the system prompt: {span_a!r} -> {span_b!r}",
                "system",
                u.section,
                u.label,
            )
        return "system_edited", f"{u.label} edited", "system", u.section, u.label
    u = y if y.segment == "messages" else x
    if x.segment != y.segment:
        return "message_removed", f"{x.label} removed", "messages", "messages", x.label
    n_a = sum(1 for v in pa.units if v.segment == "messages")
    n_b = sum(1 for v in pb.units if v.segment == "messages")
    if _volatile(span_a, span_b):
        return (
            "volatile",
            f"a timestamp or other volatile value changed in {u.label}: {span_a!r} -> {span_b!r}",
            "messages",
            "messages",
            u.label,
        )
    what = f"{x.label} rewritten" if x.name == y.name else f"{x.label} replaced by {y.label}"
    if n_b < n_a:
        what += f" (history shortened {n_a} -> {counted(n_b, 'message')}: compacted?)"
    return "message_rewritten", what, "messages", "messages", u.label


def _line_at(a: bytes, b: bytes) -> tuple[str, str]:
    """The line (of the JSON string holding it) where two units first differ, on both sides."""
    at = common_prefix_len(a, b)
    out = []
    for raw in (a, b):
        t = raw.decode("utf-8", "replace")
        p = len(raw[:at].decode("utf-8", "ignore"))
        start = max(t.rfind("\\n", 0, p) + 2, t.rfind('"', 0, p) + 1)
        ends = [e for e in (t.find("\\n", p), t.find('"', p)) if e >= 0]
        out.append(t[start : min(ends) if ends else len(t)])
    return out[0], out[1]


def with_engine_steps(d: RequestDiff, steps: Sequence[str]) -> RequestDiff:
    """When the engine itself rewrote the history this turn (compaction steps in its trace), that is
    the cause of a change in the messages, whatever the bytes look like."""
    from dataclasses import replace

    from engine.feedback import HISTORY_STEPS

    hist = [s for s in steps if s in HISTORY_STEPS]
    if d.segment != "messages" or not d.breaks_cache or not hist:
        return d
    return replace(
        d,
        cause="history_compacted",
        detail=f"history rewritten by {', '.join(hist)} ({d.label} changed first)",
    )


def first_difference(a: bytes, b: bytes) -> int | None:
    """Raw byte offset of the first difference between two byte strings, None when equal."""
    if a == b:
        return None
    return common_prefix_len(a, b)
