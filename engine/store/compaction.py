"""Rule-based compaction: how an item looks as a stub or a summary, and the summary cache keys.

No model is involved here. JSON bodies shrink to their shape; other long bodies keep their head
and tail lines; a finished subtask collapses to its result plus a link to its steps. Model-written
summaries come from an application callback and are cached by the hash of the originals plus the
prompt version, so the same originals and prompt never cost a second call.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from engine.hashing import content_hash
from engine.store.items import Item, Kind

# Bump when the rule-based summary text changes, so cached derived text is not reused across versions.
RULES_VERSION = "rules-v1"

Summarizer = Callable[[Sequence[str]], str]
"""Application callback: originals' texts (oldest first) -> summary text. The store holds no model key."""


def header(item_id: int, kind: Kind, source: str | None) -> str:
    src = f" {source}" if source else ""
    return f"[#{item_id} {kind.value}{src}]"


def full_prefix(item_id: int, kind: Kind, source: str | None) -> str:
    """What render_full puts before an item's body (a paged expand streams the body after it)."""
    # Messages and tool results go out verbatim, so a window that keeps them keeps their exact bytes
    # (cache hits) and costs what the agent's own prompt would. File reads, memories and summaries
    # carry a header because the id and path are what make them usable out of their original place.
    if kind.is_message or kind is Kind.TOOL_RESULT:
        return ""
    return header(item_id, kind, source) + "\n"


def render_full(item: Item) -> str:
    prefix = full_prefix(item.id, item.kind, item.source)
    return prefix + item.body if prefix else item.body


def stub_text(item: Item, full_tokens: int, stale: bool = False) -> str:
    first = ""
    for line in item.body.splitlines():
        if line.strip():
            first = line.strip()
            break
    if len(first) > 60:
        first = first[:57] + "..."
    mark = " STALE" if stale else ""
    # Only file paths are worth their tokens in a stub; tool-call ids are long random strings.
    src = f" {item.source}" if item.source and item.kind is Kind.FILE_READ else ""
    return f"[#{item.id} {item.kind.value}{src} {full_tokens}t{mark}: {first}; expand({item.id})]"


def duplicate_text(item: Item, of_id: int) -> str:
    return f"[#{item.id} {item.kind.value}: identical to #{of_id} above]"


def summary_key(original_hashes: Sequence[str], producer: str) -> str:
    """Cache key: the originals (by content hash, in order) plus who produced the text and how."""
    return content_hash({"originals": list(original_hashes), "producer": producer})


# ---- JSON shape ---------------------------------------------------------------------------------


def _shape(value: Any, terms: tuple[str, ...], depth: int = 0) -> Any:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k in value:  # keep the document's key order: it is part of the original's meaning
            v = value[k]
            if terms and any(t in str(k).lower() for t in terms) and len(json.dumps(v, default=str)) < 400:
                out[k] = v  # a field the query asked about survives in full
            else:
                out[k] = _shape(v, terms, depth + 1)
        return out
    if isinstance(value, list):
        if not value:
            return []
        head = _shape(value[0], terms, depth + 1)
        return [head, f"... {len(value)} items"] if len(value) > 1 else [head]
    if isinstance(value, str):
        if terms and any(t in value.lower() for t in terms) and len(value) <= 200:
            return value
        return value if len(value) <= 24 else f"<str {len(value)} chars>"
    return value


def json_shape(body: str, terms: tuple[str, ...] = ()) -> str | None:
    """The body's JSON shape (keys, array lengths, query-matched fields), or None if not JSON."""
    s = body.lstrip()
    if not s or s[0] not in "[{":
        return None
    try:
        value = json.loads(body)
        shaped = json.dumps(_shape(value, terms), ensure_ascii=False, separators=(",", ":"))
    except (ValueError, RecursionError):
        # RecursionError: nesting deeper than the interpreter's stack (a tool printing "[[[[...", a
        # pathological document). Such a body is text to the store; letting it escape made every
        # refresh() of the store fail, so no window could be served from it again.
        return None
    return "JSON shape (values elided): " + shaped


def excerpt(body: str, target_chars: int) -> str:
    """Head and tail lines of a long body, with the count of what was left out."""
    lines = body.splitlines()
    half = max(1, target_chars // 2)
    head: list[str] = []
    used = 0
    for ln in lines:
        if used + len(ln) > half and head:
            break
        head.append(ln[:half])
        used += len(ln[:half]) + 1
    tail: list[str] = []
    used = 0
    for ln in reversed(lines[len(head) :]):
        if used + len(ln) > half and tail:
            break
        tail.append(ln[-half:])
        used += len(ln[-half:]) + 1
    tail.reverse()
    omitted = len(lines) - len(head) - len(tail)
    if omitted <= 0:
        return body
    return "\n".join([*head, f"... [{omitted} lines omitted] ...", *tail])


def rule_summary(item: Item, target_tokens: int, terms: tuple[str, ...] = ()) -> str:
    """The summary form without a model: JSON shape, or head+tail excerpt, under the item's header."""
    shaped = json_shape(item.body, terms)
    text = shaped if shaped is not None else excerpt(item.body, target_tokens * 4)
    return (
        header(item.id, item.kind, item.source) + f" (summary; expand({item.id}) for the full text)\n" + text
    )


def subtask_body(step_ids: Sequence[int], result: Item) -> str:
    first, last = min(step_ids), max(step_ids)
    return (
        f"Subtask finished ({len(step_ids)} steps, #{first}..#{last}; expand this item to see them). "
        f"Result (#{result.id}):\n{result.body}"
    )
