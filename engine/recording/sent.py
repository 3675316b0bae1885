"""What a captured agent actually sent at one turn, sectioned, with tokens, usage, cost and the cache break.

A recording made by the tap, the proxy, the litellm callback or an importer holds the agent's real
request (`actual` events, rebuilt by `engine.recording.why.actual_bodies`) beside the engine's shadow
plan. The inspector's request view shows this first, labelled as what was sent, and the engine's plan
after it, labelled as a what-if that was never sent. A recording made by an agent that embeds the engine
has no `actual` events: what the engine built is what was sent, and `sent_view` returns None.

Token counts use the engine's tokenizer with the same per-message overheads the simulator's `as_sent`
column uses, so the section figures add up to that column's prompt tokens; the provider's own count (the
usage line) differs by the tokenizer mismatch.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from engine.recording.journal import Event
from engine.tokens import MESSAGE_OVERHEAD_TOKENS, TokenCounter


@dataclass(frozen=True)
class SentPart:
    """One part of the request as sent (a system block, a tool, a message), labelled for display."""
    section: str  # "system" | "tools" | "messages"
    label: str  # "system", "tool bash", "[3] user", "[4] assistant", "[5] tool call_1"
    role: str
    tokens: int
    text: str


def _message_parts(i: int, m: dict[str, Any], counter: TokenCounter, leading_system: bool) -> SentPart:
    role = str(m.get("role", "user"))
    lines: list[str] = []
    n = MESSAGE_OVERHEAD_TOKENS
    thinking = m.get("reasoning_content")
    if thinking:
        lines.append(f"[reasoning]\n{thinking}")
        n += counter.count(str(thinking))
    for b in m.get("thinking_blocks") or ():
        # What the API checks each block by went back with it: said, not shown (opaque base64).
        if b.get("type") == "redacted_thinking":
            lines.append(f"[redacted thinking: {len(str(b.get('data') or ''))} characters of data sent back]")
        else:
            sig = str(b.get("signature") or "")
            lines.append(
                f"[thinking block: signed ({len(sig)}-character signature)]"
                if sig
                else "[thinking block: unsigned]"
            )
    content = str(m.get("content") or "")
    if content:
        lines.append(content)
    n += counter.count(content)
    for c in m.get("tool_calls") or ():
        args = str(c.get("arguments") or "")
        lines.append(f"-> tool call {c.get('id')} {c.get('name')} {args}")
        n += counter.count(f"{c.get('name', '')} {args}") + 4
    if role == "tool":
        n += 4
    label = f"[{i}] {role}" + (f" {m['tool_call_id']}" if m.get("tool_call_id") else "")
    return SentPart("system" if leading_system else "messages", label, role, n, "\n".join(lines))


def sent_parts(body: dict[str, Any], counter: TokenCounter) -> list[SentPart]:
    """The sent request as sections: leading system messages, the tools, then every message by role."""
    parts: list[SentPart] = []
    for t in body.get("tools") or ():
        fn = t.get("function", t)
        schema = json.dumps(fn.get("parameters"), ensure_ascii=False, sort_keys=True)
        name = str(fn.get("name", ""))
        parts.append(
            SentPart("tools", f"tool {name}", "tools", counter.count(f"{name}\n{schema}") + 4, schema)
        )
    leading = True
    msgs: list[SentPart] = []
    for i, m in enumerate(body.get("messages") or ()):
        leading = leading and m.get("role") == "system"
        msgs.append(_message_parts(i, m, counter, leading))
    system = [p for p in msgs if p.section == "system"]
    return system + parts + [p for p in msgs if p.section == "messages"]


def _usage_of(events: Sequence[Event], turn: int) -> tuple[dict[str, Any] | None, str | None]:
    usage = error = None
    for ev in events:
        if ev.get("turn") != turn:
            continue
        if ev.get("k") == "usage":
            usage = ev.get("usage")
        elif ev.get("k") == "error":
            error = f"{ev.get('kind')}: {ev.get('message', '')}"[:300]
    return usage, error


def _cost(model: str, u: dict[str, Any]) -> str:
    from engine.sim.cachesim import CallCache
    from engine.sim.pricing import UnknownModelError, cost

    inp, read = int(u.get("input_tokens") or 0), int(u.get("cache_read_tokens") or 0)
    write = int(u.get("cache_write_tokens") or 0)
    w1h = min(int(u.get("cache_write_1h_tokens") or 0), write)
    try:
        usd = cost(
            model,
            CallCache(inp, read, write, max(0, inp - read - write), w1h),
            int(u.get("output_tokens") or 0),
        )
    except UnknownModelError:
        return f"no price for {model}"
    return f"${usd:.4f}"


def sent_view(
    events: Sequence[Event],
    turn: int,
    counter: TokenCounter,
    *,
    model: str = "",
    bodies: dict[int, dict[str, Any]] | None = None,
    cache_break: str | None = None,
) -> str | None:
    """The sent request of `turn` as text (headline, usage, cost, cache break, then each section with its
    tokens), or None when the recording holds no actual requests (the engine's own session)."""
    from engine.recording.why import actual_bodies

    sent = bodies if bodies is not None else actual_bodies(events)
    if turn not in sent:
        return None
    parts = sent_parts(sent[turn], counter)
    total = sum(p.tokens for p in parts)
    by: dict[str, int] = {}
    for p in parts:
        key = p.section if p.section != "messages" else p.role
        by[key] = by.get(key, 0) + p.tokens
    out = [
        f"SENT: the request the agent actually sent at turn {turn} (captured)",
        f"  {total:,} tokens: " + " · ".join(f"{k} {v:,}" for k, v in by.items()),
    ]
    usage, error = _usage_of(events, turn)
    if usage:
        w1h = int(usage.get("cache_write_1h_tokens") or 0)
        out.append(
            f"  provider usage: input {int(usage.get('input_tokens') or 0):,} (cache read "
            f"{int(usage.get('cache_read_tokens') or 0):,} · write {int(usage.get('cache_write_tokens') or 0):,}"
            + (f", 1h {w1h:,}" if w1h else "")
            + f") · output {int(usage.get('output_tokens') or 0):,} · cost {_cost(model, usage)}"
        )
        diag = [
            f"{k} {usage[k]}"
            for k in ("cache_miss_reason", "cache_missed_input_tokens", "prompt_cache_key")
            if k in usage
        ]
        if diag:
            out.append("  provider cache diagnostics: " + " · ".join(diag))
    elif error:
        out.append(f"  call failed: {error}")
    else:
        out.append("  provider usage: none recorded")
    if cache_break:
        out.append(f"  cache: {cache_break}")
    for p in parts:
        out.append("")
        out.append(f"-- {p.label} ({p.tokens:,} tokens) --")
        if p.text:
            out.append(p.text)
    return "\n".join(out)
