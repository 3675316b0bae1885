"""The `as_sent` column's requests: exactly what a captured agent sent (its `actual` events), as engine
Blocks counted with the engine's tokenizer, with the request's own cache breakpoints where it kept them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from engine.artifacts import Text, Thinking, ToolCall, ToolResult, ToolSchema
from engine.assembly import Measure
from engine.providers.base import Block
from engine.recording.journal import Event
from engine.sim.simulate_requests import SentBlock, _Req
from engine.tokens import MESSAGE_OVERHEAD_TOKENS, TokenCounter


def _as_sent(
    events: list[Event], blobs: Mapping[str, str], counter: TokenCounter, anthropic_style: bool
) -> list[_Req]:
    """The requests exactly as the agent sent them, from `actual` events, as engine Blocks."""
    # Imported here: only recordings of captured agents have `actual` events.
    from engine.recording.actual import actual_requests

    msgs = actual_requests(events)
    tools: list[tuple[int, str]] = []
    times: dict[int, float] = {}
    tool_by_turn: dict[int, list[tuple[int, str]]] = {}
    marks_by_turn: dict[int, list[Any]] = {}
    for ev in events:
        if ev.get("k") != "actual":
            continue
        if "tools" in ev:
            tools = _sent_tools(ev, blobs, counter)
        tool_by_turn[ev["turn"]] = tools
        if ev.get("time") is not None:
            times[ev["turn"]] = float(ev["time"])
        if ev.get("marks") is not None:
            marks_by_turn[ev["turn"]] = ev["marks"]
    sized: dict[str, tuple[int, str]] = {}

    def message(h: str) -> tuple[int, str]:
        got = sized.get(h)
        if got is None:
            d = json.loads(blobs[h])
            role = str(d.get("role", "user"))
            # Counts are keyed as the engine keys the same text (the part's hash, which is a function
            # of the text), so a text the engine already counted is not tokenized a second time.
            content = blobs.get(d.get("content_h", ""), "")
            cid = d.get("tool_call_id")
            part: Text | ToolResult = (
                ToolResult(str(cid), content) if role == "tool" and cid is not None else Text(content)
            )
            n = MESSAGE_OVERHEAD_TOKENS + counter.count(content, part.sha)
            if d.get("thinking_h"):  # reasoning sent back with the history (DeepSeek reasoner)
                thinking = blobs.get(d["thinking_h"], "")
                n += counter.count(thinking, Thinking(thinking).sha)
            if role == "tool":
                n += 4  # as Measure counts a tool result
            for x in d.get("media") or ():  # its images, counted as the engine counts a media part
                n += int(x.get("tokens") or 0)
            for c in d.get("tool_calls") or ():
                args = blobs.get(c.get("arguments_h", ""), "")
                name = str(c.get("name", ""))
                n += counter.count(f"{name} {args}", ToolCall(str(c.get("id", "")), name, args).sha) + 4
            got = sized[h] = (n, role)
        return got

    out: list[_Req] = []
    for turn in sorted(msgs):
        blocks: list[Block] = []
        for n, th in tool_by_turn.get(turn, []):
            blocks.append(Block("tools", "tools", th, n, False))
        leading_system = True
        for h in msgs[turn]:
            n, role = message(h)
            leading_system = leading_system and role == "system"
            seg = "system" if leading_system else "messages"
            blocks.append(Block("identity" if seg == "system" else "history", seg, h, n, False))
        marks = marks_by_turn.get(turn)
        if anthropic_style and marks is not None:
            # The request's own breakpoints (an Anthropic capture or log keeps them): where and for how
            # long the agent asked for caching, 1-hour ones included. None at all: nothing was cached.
            ntools = len(tool_by_turn.get(turn, ()))
            for kind, i, ttl in marks:
                at = int(i) if kind == "tool" else ntools + int(i)
                if 0 <= at < len(blocks):
                    b = blocks[at]
                    blocks[at] = (
                        SentBlock(b.section, b.segment, b.sha, b.tokens, True, str(ttl))
                        if ttl != "5m"
                        else replace(b, marker=True)
                    )
        elif anthropic_style and blocks:
            # A source that does not keep the breakpoints: assume what a harness sending to Anthropic
            # does (mini-swe-agent, SWE-agent, Claude Code): one rolling cache_control breakpoint on the
            # newest message. Without it nothing is cached.
            blocks[-1] = replace(blocks[-1], marker=True)
        out.append(_Req(turn, times.get(turn, 0.0), blocks, [], []))
    return out


def _sent_tools(ev: Event, blobs: Mapping[str, str], counter: TokenCounter) -> list[tuple[int, str]]:
    """(tokens, parameters blob hash) of each tool an `actual` event lists, counted as the engine counts
    the same schema (assembly.Measure.part: name, description and parameters), so the as-sent column
    and the engine's columns price one tool alike. Recordings made before imports kept the descriptions
    (no `tool_descriptions`) are counted without them, as they were: the text is not there."""
    hashes = ev["tools"]
    names = ev.get("tool_names") or [""] * len(hashes)
    descs = ev.get("tool_descriptions")
    part = Measure(counter).part  # the engine's own count of a schema, not a copy of its formula
    out: list[tuple[int, str]] = []
    for i, (name, th) in enumerate(zip(names, hashes, strict=False)):
        params = blobs.get(th, "")
        if descs is not None and i < len(descs):
            n = part(ToolSchema(str(name), blobs.get(descs[i], ""), params))
        else:
            n = counter.count(f"{name}\n{params}") + 4
        out.append((n, th))
    return out


def _actual_and_blobs(events: Iterable[Event]) -> tuple[list[Event], dict[str, str]]:
    """The `actual` events and the blobs (replayer_blobs) of a journal, in one pass: what _as_sent reads."""
    actual: list[Event] = []
    blobs: dict[str, str] = {}
    for e in events:
        k = e.get("k")
        if k == "actual":
            actual.append(e)
        elif k == "blob":
            d = e["data"]
            blobs[e["h"]] = d if isinstance(d, str) else d.decode()
    return actual, blobs
