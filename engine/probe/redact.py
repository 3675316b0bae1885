"""Redaction for the probe stream (CONTEXTPIPE_REDACT=1): an allow-list of structural fields.

What may pass in clear is listed here; everything else is replaced. A deny-list ("hide `content` and
`text`") leaked every field nobody thought of (error messages, binder exception text, tool names and
descriptions, latch names, section notes, the agent's argv), so the rule is the other way round:

* numbers, booleans and None pass (ids, counts, token figures, pressures, times);
* a string passes only if it is a word of the engine's own vocabulary (event kinds, tier names,
  section kinds, scopes, priorities, forms, optimizer steps, alert rules, providers...) or a hex hash
  under a key that holds hashes (`h`, `sha256`, the per-section hashes of a request, ...);
* a mapping key passes only if it is an engine field name or a vocabulary word; any other key (a tool
  name, a source id, a property of a tool schema) becomes `#` plus the first 16 hex digits of its
  SHA-256, so the shape of the event is kept and equal keys stay equal;
* every other string (and bytes) becomes `{"sha256": ..., "size": ...}`, size in bytes of UTF-8. Blob
  hashes `h` are already SHA-256 of the text, so this adds nothing a reader could not learn from them.

The agent's model and provider names pass under their own keys (`cp-inspect ps` shows them); the
hello's argv does not (see handshake).
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from engine.types import CacheScope, Form, Lifecycle, Priority, SectionKind, Tier

# Engine field names: keys that may appear in clear. Values under them are still checked.
FIELD_KEYS = frozenset(
    """
    k h t id turn trace sha sha256 request_sha256 prefix_sha256 in add base time role parts part err
    kind tier tier_reason raw predictive text pressure sections actions skipped steps step status reason
    detail tokens tokens_saved budget planned form omitted changed items scope priority estimate
    estimated estimated_tokens final_tokens usage input_tokens output_tokens cache_read_tokens
    cache_write_tokens cacheable_prefix_tokens calibration ceiling limit usable reserves response
    thinking schema percentile thresholds trim_schemas compact_history aggressive_prune limits
    keep_recent_results max_clear_tokens max_reorder_moves spill_threshold reorder clear_tool_results
    spill llm_summary drop_rounds trim_sections place_markers markers cache_break section cause alerts
    rule severity message latch_flips recovery note error config window margin max_output_tokens
    default_response_reserve thinking_reserve schema_reserve query_source model provider
    engine_version start_time session spec lifecycle max_tokens timeout_s name list bound
    spill_failures summary data count code protocol pid argv snapshot turns redacted queue_limit
    tools tool_names system_fingerprint description content lost
    at attempts edited applied edited_turns edited_parts
    """.split()
)

# Engine words: string values that may appear in clear.
VOCAB = frozenset(
    {
        # event and frame kinds
        *"session source content tool untool latch emergent config part msg summary request turn usage "
        "error blob actual dropped hello pong edit diag".split(),
        # the kinds of `diag` events (a tap's error, a retried call, a history the agent rewrote) and
        # what an agent's edit rewrote (engine.capture.tap_rewrite's `edited_parts`)
        *"tap_error retried history_rewrite reply edited truncated".split(),
        # message parts and roles
        *"text thinking call result user assistant system".split(),
        # optimizer steps, their statuses, alert rules and severities
        *"reorder trim_schemas clear_tool_results spill llm_summary drop_rounds trim_sections "
        "place_markers applied not_needed skipped gated failed".split(),
        *"bind_degraded cache_break cache_miss_unexplained circuit_breaker compaction_cascade "
        "estimate_error high_pressure latch_flip prompt_too_long prompt_too_long_recovery "
        "spill_failure info warning critical".split(),
        # sections the engine itself names, and providers
        *"tools latches history".split(),
        *"anthropic openai bedrock prefix deepseek".split(),
        *(t.label for t in Tier),
        *(s.label for s in CacheScope),
        *(p.label for p in Priority),
        *(str(k) for k in SectionKind),
        *(str(f) for f in Form),
        *(str(lc) for lc in Lifecycle),
    }
)

# Keys whose string values are hashes: passed when they are hex and nothing else.
HASH_KEYS = frozenset({"h", "sha", "sha256", "request_sha256", "prefix_sha256", "in", "add", "sections"})
# Keys whose values are free-form names the agent's operator chose for the session, passed when they
# look like a model or provider identifier (shown by `cp-inspect ps`).
NAME_KEYS = frozenset({"model", "provider", "engine_version", "query_source"})

_HEX = re.compile(r"[0-9a-f]{8,128}")
_IDENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/@-]{0,99}")


def _digest(value: str | bytes) -> dict[str, Any]:
    raw = value.encode("utf-8", "surrogatepass") if isinstance(value, str) else value
    return {"sha256": hashlib.sha256(raw).hexdigest(), "size": len(raw)}


def _key(key: Any) -> Any:
    if not isinstance(key, str):
        return key if isinstance(key, int | float | bool) or key is None else _hkey(repr(key))
    if key in FIELD_KEYS or key in VOCAB:
        return key
    return _hkey(key)


def _hkey(key: str) -> str:
    return "#" + hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _value(value: Any, key: str) -> Any:
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, str):
        if value in VOCAB:
            return value
        if key in HASH_KEYS and _HEX.fullmatch(value):
            return value
        if key in NAME_KEYS and _IDENT.fullmatch(value):
            return value
        return _digest(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return _digest(bytes(value))
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            rk = _key(k)
            # A hashed key (a source id, say) says nothing about its value: judge the value by the
            # nearest field name above it (`sections` of a request maps ids to hashes).
            out[rk] = _value(v, rk if rk in FIELD_KEYS else key)
        return out
    if isinstance(value, list | tuple):
        return [_value(v, key) for v in value]
    return _digest(repr(value))


def redact_event(event: dict[str, Any]) -> dict[str, Any]:
    """A copy of `event` with only structural fields in clear (the original is untouched)."""
    out = _value(event, "")
    return out if isinstance(out, dict) else {"k": "dropped", "count": 1}
