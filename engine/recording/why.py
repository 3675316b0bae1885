"""Why the cache missed: each turn's request against the previous one, at the first point they differ.

Two views of one recorded turn, both through `engine.request_diff`:

- `engine`: the request the engine built (rebuilt by replay, optionally under what-if overrides), which is
  what was sent when the agent embeds the engine;
- `as_sent`: the request the agent really sent, when the recording holds it (`actual` events written by
  the tap, the proxy and the importers: message and tool-schema blobs, rebuilt here as an OpenAI-shaped
  body; the shape does not matter to the diff, only the order and bytes of the units).

Plus the provider's own diagnostics when the usage event carries them (Anthropic's `cache_miss_reason`
and `cache_missed_input_tokens`, OpenAI's `prompt_cache_key`).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from engine.errors import ContextPipeError
from engine.recording.journal import Event
from engine.recording.replay import Replayer
from engine.recording.text_window import LazyBlob
from engine.request_diff import RequestDiff, diff_requests, with_engine_steps
from engine.whatif import Overrides

# Causes where the old and new text around the difference say more than the label does.
TEXT_CAUSES = frozenset(
    {"volatile", "system_edited", "message_rewritten", "history_compacted", "tool_description", "tool_schema"}
)
DIAGNOSTIC_KEYS = ("cache_miss_reason", "cache_missed_input_tokens", "prompt_cache_key")


def actual_bodies(events: Iterable[Event]) -> dict[int, dict[str, Any]]:
    """turn -> the request the agent actually sent, rebuilt from `actual` events (empty when none)."""
    acc = ActualBodies()
    for ev in events:
        acc.feed(ev)
    return acc.out


class ActualBodies:
    """actual_bodies() fed one event at a time, so a caller that reads a recording once (explain) need
    not hold its events. `turns`: keep only these turns' bodies (None: all); every turn's body is still
    built as it goes by, so a malformed one fails here exactly as in actual_bodies()."""

    def __init__(self, turns: Collection[int] | None = None) -> None:
        self.turns = None if turns is None else frozenset(turns)
        self.out: dict[int, dict[str, Any]] = {}
        # Text blobs are the very str objects the events (and a replay's fold) hold: sharing costs a slot.
        # A blob event that keeps its text in the recording (text_window.LazyBlob) is kept as it is and
        # read only if a body names it: reading each would read the whole file for one turn's body.
        self._blobs = _Texts()
        self._prev: list[str] = []
        self._tools: list[dict[str, Any]] = []

    def feed(self, ev: Event) -> None:
        k = ev.get("k")
        blobs = self._blobs
        if k == "blob":
            if isinstance(ev, LazyBlob):  # its text stays in the file until a body names it
                blobs[ev["h"]] = ev
            else:
                d = ev["data"]
                blobs[ev["h"]] = d if isinstance(d, str) else d.decode()
        elif k == "actual":
            cur = self._prev[: ev["base"]] + list(ev["add"])
            self._prev = cur
            if "tools" in ev:
                names = ev.get("tool_names") or [""] * len(ev["tools"])
                descs = ev.get("tool_descriptions") or [None] * len(ev["tools"])
                tools = []
                for n, h, dh in zip(names, ev["tools"], descs, strict=False):
                    fn: dict[str, Any] = {"name": n, "parameters": _json(blobs.get(h, "null"))}
                    if dh is not None:  # recorded since the as-sent tools carry their descriptions
                        fn["description"] = blobs.get(dh, "")
                    tools.append({"type": "function", "function": fn})
                self._tools = tools
            body = {
                "model": str(ev.get("model", "")),
                "tools": self._tools,
                "messages": [_message(blobs, h) for h in cur],
            }
            turn = int(ev["turn"])  # after the body, as actual_bodies() always did: the same error first
            if self.turns is None or turn in self.turns:
                self.out[turn] = body


class _Texts(dict[str, Any]):
    """hash -> text, or -> the blob event to read it from when `get` asks for it."""

    def get(self, h: str, default: Any = None) -> Any:  # type: ignore[override]
        v = dict.get(self, h)
        if v is None:
            return default
        if isinstance(v, str):
            return v
        d = v["data"]
        return d if isinstance(d, str) else d.decode()


def _json(s: str) -> Any:
    try:
        return json.loads(s)
    except ValueError:
        return s


def _message(blobs: Mapping[str, str], h: str) -> dict[str, Any]:
    d = _json(blobs.get(h, "{}"))
    if not isinstance(d, dict):
        return {"role": "user", "content": str(d)}
    m: dict[str, Any] = {
        "role": d.get("role", "user"),
        "content": blobs.get(d.get("content_h", ""), d.get("content", "")),
    }
    if d.get("tool_calls"):
        m["tool_calls"] = [
            {"id": c.get("id"), "name": c.get("name"), "arguments": blobs.get(c.get("arguments_h", ""), "")}
            for c in d["tool_calls"]
        ]
    if d.get("tool_call_id") is not None:
        m["tool_call_id"] = d["tool_call_id"]
    if d.get("thinking_h") or d.get("thinking"):
        m["reasoning_content"] = blobs.get(d.get("thinking_h", ""), d.get("thinking", ""))
    if isinstance(d.get("thinking_blocks"), list):
        # Anthropic's blocks with their signatures and redacted data (litellm's `thinking_blocks` shape)
        m["thinking_blocks"] = [
            _thinking_block(blobs, b) for b in d["thinking_blocks"] if isinstance(b, dict)
        ]
    return m


def _thinking_block(blobs: Mapping[str, str], b: dict[str, Any]) -> dict[str, Any]:
    if b.get("type") == "redacted_thinking":
        return {"type": "redacted_thinking", "data": blobs.get(b.get("data_h", ""), b.get("data", ""))}
    return {
        "type": "thinking",
        "thinking": blobs.get(b.get("thinking_h", ""), b.get("thinking", "")),
        "signature": b.get("signature", ""),
    }


def diagnostics(events: Sequence[Event], turn: int) -> dict[str, Any]:
    """The provider's cache diagnostics recorded with turn `turn`'s usage (empty when none)."""
    out: dict[str, Any] = {}
    for ev in events:
        if ev.get("k") == "usage" and ev.get("turn") == turn:
            for src in (ev.get("usage") or {}, ev.get("diagnostics") or {}, ev):
                for key in DIAGNOSTIC_KEYS:
                    if key in src and src[key] is not None:
                        out[key] = src[key]
    return out


def why_missed(
    events: Sequence[Event],
    turn: int,
    overrides: Overrides | None = None,
    *,
    replayer: Replayer | None = None,
    actual: Mapping[int, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Turn `turn` against turn `turn - 1`: {"turn", "previous", "engine", "as_sent", "diagnostics"},
    each diff as RequestDiff.to_json() plus a one-line "summary" (None when there is no previous turn
    or the request cannot be rebuilt; "error" says why)."""
    out: dict[str, Any] = {"turn": turn, "previous": turn - 1 if turn > 0 else None}
    out["diagnostics"] = diagnostics(events, turn)
    out["engine"] = out["as_sent"] = None
    if turn <= 0:
        return out
    try:
        rp = replayer or Replayer(events)
        a = rp.replan(turn - 1, overrides).serialized
        built = rp.replan(turn, overrides)
        steps = [str(x["step"]) for x in built.trace.get("actions", ())]
        d = _pack(with_engine_steps(diff_requests(a, built.serialized), steps))
        out["engine"] = d
    except ContextPipeError as exc:
        out["error"] = str(exc)
    sent = actual if actual is not None else actual_bodies(events)
    if turn in sent and turn - 1 in sent:
        out["as_sent"] = _pack(diff_requests(sent[turn - 1], sent[turn]))
    return out


def _pack(d: RequestDiff) -> dict[str, Any]:
    j = d.to_json()
    j["summary"] = d.summary()
    return j


def describe(why: Mapping[str, Any]) -> list[str]:
    """Text lines for `explain` and the TUI."""
    lines: list[str] = []
    if why.get("previous") is None:
        return ["first turn: nothing cached yet"]
    for key, name in (("as_sent", "as sent"), ("engine", "engine")):
        d = why.get(key)
        if d is None:
            continue
        verdict = "cache prefix broken" if d["breaks_cache"] else "prefix kept"
        lines.append(f"vs turn {why['previous']} ({name}): {verdict}: {d['summary']}")
        if d["breaks_cache"] and d.get("before") and d["cause"] in TEXT_CAUSES:
            lines.append(f"    was: {d['before']!r}")
            lines.append(f"    now: {d['after']!r}")
    if why.get("error"):
        lines.append(f"vs turn {why['previous']}: not rebuilt ({why['error']})")
    diag = why.get("diagnostics") or {}
    if "cache_miss_reason" in diag or "cache_missed_input_tokens" in diag:
        missed = diag.get("cache_missed_input_tokens")
        lines.append(
            f"provider says: {diag.get('cache_miss_reason', 'cache miss')}"
            + (f" ({missed} input tokens missed the cache)" if missed is not None else "")
        )
    if "prompt_cache_key" in diag:
        lines.append(f"prompt_cache_key: {diag['prompt_cache_key']}")
    return lines
