"""Feedback: normalise provider usage, and attribute cache breaks to the section that changed."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from itertools import compress, count
from operator import attrgetter, is_not
from typing import Any

from engine.errors import ContextPipeError
from engine.providers.base import Block

# Cache diagnostics a provider (or the agent's request) may carry, kept verbatim in the usage event:
# Anthropic's `diagnostics.cache_miss_reason` (beta), the tokens it says were missed, OpenAI's
# `prompt_cache_key` (a request parameter that routes requests to the same cache).
# (finish_reason: why the model stopped, as the provider said it; the usage event carries it for the
# OpenTelemetry export's gen_ai.response.finish_reasons, and a replayed usage keeps it.)
DIAGNOSTIC_KEYS = ("cache_miss_reason", "cache_missed_input_tokens", "prompt_cache_key", "finish_reason")


class UsageFormatError(ContextPipeError, ValueError):
    """A usage object whose fields are not what any provider sends (names the field)."""


@dataclass(frozen=True, init=False)
class Usage:
    """One call's usage, the same on every path (engine, tap, proxy, importers, litellm).

    `input_tokens` is the whole prompt, cached parts included; `cache_write_tokens` are the tokens billed
    at a cache-write rate, of which `cache_write_1h_tokens` at the 1-hour rate (Anthropic's extended TTL).
    `extra` holds cache diagnostics (DIAGNOSTIC_KEYS) when the response or request had them, and
    `reasoning_tokens` (the part of output_tokens spent reasoning) when the provider reports some.
    """

    input_tokens: int  # all prompt tokens, cached or not
    output_tokens: int
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cache_write_1h_tokens: int = 0
    extra: tuple[tuple[str, Any], ...] = ()

    def __init__(
        self,
        input_tokens: int,
        output_tokens: int,
        cache_read_tokens: int = 0,
        cache_write_tokens: int = 0,
        cache_write_1h_tokens: int = 0,
        extra: tuple[tuple[str, Any], ...] = (),
    ) -> None:
        # Stored into the instance's dict (see engine.artifacts.Text.__init__): every call's usage is one.
        d = self.__dict__
        d["input_tokens"] = input_tokens
        d["output_tokens"] = output_tokens
        d["cache_read_tokens"] = cache_read_tokens
        d["cache_write_tokens"] = cache_write_tokens
        d["cache_write_1h_tokens"] = cache_write_1h_tokens
        d["extra"] = extra

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "cache_write_tokens": self.cache_write_tokens,
        }
        # Only when present, so recordings without 1-hour writes or diagnostics keep their old shape.
        if self.cache_write_1h_tokens:
            d["cache_write_1h_tokens"] = self.cache_write_1h_tokens
        d.update(self.extra)
        return d

    def with_extra(self, **kw: Any) -> Usage:
        """A copy with diagnostics added (None values are dropped)."""
        merged = dict(self.extra)
        merged.update({k: v for k, v in kw.items() if v is not None})
        return replace(self, extra=tuple(sorted(merged.items())))


def _get(obj: Any, name: str) -> Any:
    # A plain dict (what most callers pass) is told apart by its exact type first: the Mapping check is
    # an ABC instance check, ~1 us, and normalizing one usage reads ~15 fields.
    if type(obj) is dict or isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


def _int(obj: Any, name: str) -> int | None:
    """A token count, None when absent. Floats that are whole numbers are accepted (some proxies send
    1200.0); anything else names the field."""
    v = _get(obj, name)
    if v is None:
        return None
    if (
        isinstance(v, bool)
        or not isinstance(v, (int, float))
        or (isinstance(v, float) and not v.is_integer())
    ):
        raise UsageFormatError(f"usage field {name} is {v!r} (expected a whole number of tokens)")
    if v < 0:
        raise UsageFormatError(f"usage field {name} is {v!r} (expected a non-negative count)")
    return int(v)


def _first(obj: Any, *names: str) -> int | None:
    for n in names:
        v = _int(obj, n)
        if v is not None:
            return v
    return None


def _writes_1h(*holders: Any) -> tuple[int | None, int | None]:
    """(5m, 1h) cache-write split from Anthropic's `cache_creation` object (or litellm's
    `cache_creation_token_details`), None when no holder has it."""
    for h in holders:
        if h is None:
            continue
        m5, h1 = _int(h, "ephemeral_5m_input_tokens"), _int(h, "ephemeral_1h_input_tokens")
        if m5 is not None or h1 is not None:
            return m5 or 0, h1 or 0
    return None, None


def _diagnostics(u: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k in DIAGNOSTIC_KEYS:
        v = _get(u, k)
        if isinstance(v, (str, int)) and not isinstance(v, bool):
            out[k] = v
    reasoning = _reasoning_tokens(u)
    if reasoning:
        out["reasoning_tokens"] = reasoning
    return out


def _reasoning_tokens(u: Any) -> int | None:
    """The output tokens spent reasoning, part of output_tokens (OpenAI Chat and DeepSeek's
    `completion_tokens_details.reasoning_tokens`, Responses' `output_tokens_details.reasoning_tokens`,
    our own dict's `reasoning_tokens`): kept beside the usage for the OpenTelemetry export's
    gen_ai.usage.reasoning.output_tokens. A malformed count is left out, never an error: the usage
    itself is read all the same."""
    try:
        found = _int(u, "reasoning_tokens")
        for holder in ("completion_tokens_details", "output_tokens_details"):
            if found is not None:
                break
            details = _get(u, holder)
            if details is not None:
                found = _int(details, "reasoning_tokens")
    except UsageFormatError:
        return None
    return found


# Usage.to_dict()'s keys without diagnostics: a dict of only these is our own shape (what record_usage
# journals and replay, simulate and the benchmarks pass back), read without the provider detection.
_OWN_KEYS = frozenset(
    ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "cache_write_1h_tokens")
)


def _own_usage(u: dict[str, Any]) -> Usage | None:
    """normalize_usage's "our own dict" case for a dict of non-negative ints under _OWN_KEYS (the same
    Usage its detection reaches: no prompt_tokens, inputTokens or Anthropic cache fields, no
    diagnostics), without ~20 field look-ups; None for anything else (a float, a bool, a negative)."""
    for v in u.values():
        if type(v) is not int or v < 0:
            return None
    write = u.get("cache_write_tokens", 0)
    return Usage(
        u["input_tokens"],
        u.get("output_tokens", 0),
        u.get("cache_read_tokens", 0),
        write,
        min(u.get("cache_write_1h_tokens", 0), write),
    )


def _count(d: dict[str, Any], name: str) -> int | None:
    """d[name] when it is absent/None (None) or an exact non-negative int; -1 for anything else (a float,
    a bool, a negative, a string: _provider_usage then leaves the dict to the general reader, which
    accepts or names it)."""
    v = d.get(name)
    if v is None or (type(v) is int and v >= 0):
        return v
    return -1


# The SDKs whose usage models _provider_usage reads from their fields directly (see _sdk_fields).
_SDK_MODULES = ("anthropic.types.", "openai.types.")


# Per class, whether its instances may be read by their fields (see _sdk_fields): an SDK model class
# without computed fields. Asked once a class, not for every usage object and its nested details.
_SDK_CLASSES: dict[type, bool] = {}


def _sdk_class(cls: type) -> bool:
    ok = cls.__module__.startswith(_SDK_MODULES) and not getattr(cls, "__pydantic_computed_fields__", None)
    if len(_SDK_CLASSES) >= 64:  # (classes made at run time, one a call, would pile up)
        _SDK_CLASSES.clear()
    _SDK_CLASSES[cls] = ok
    return ok


def _sdk_fields(obj: Any) -> dict[str, Any] | None:
    """An Anthropic or OpenAI SDK model's fields (a pydantic model's __dict__, values as they are: nested
    models stay models), when that holds what model_dump() gives at its top level: no extra fields kept
    beside them, no computed ones. None for anything else (it is dumped, or read by attribute). Dumping
    a usage model, nested details included, cost ~1.5 us a call of ~5."""
    cls = type(obj)
    ok = _SDK_CLASSES.get(cls)
    if ok is None:
        ok = _sdk_class(cls)
    if not ok or getattr(obj, "__pydantic_extra__", None):
        return None
    d = getattr(obj, "__dict__", None)
    return d if type(d) is dict else None


def _nested(v: Any) -> dict[str, Any] | None:
    """A nested usage object (details, cache_creation) as a dict of its fields, None if not readable so."""
    return v if type(v) is dict else _sdk_fields(v)


def _provider_usage(u: dict[str, Any]) -> Usage | None:
    """normalize_usage's reading of the two shapes nearly every call brings, the Anthropic Messages and
    the OpenAI Chat Completions usage (as dicts, or the SDK's objects dumped), when every field it reads
    is a plain count and nothing unusual is there (diagnostics, a per-TTL write split, a Responses or
    Bedrock field); None sends the dict to the general reader below, which reaches the same Usage by
    ~25 look-ups through _get/_int (~10 us a call; this is a few dict reads).

    Kept exactly the general reader's answer for what it accepts: tests/test_usage_fast.py compares the
    two over every combination of these fields' values."""
    get = u.get
    for k in DIAGNOSTIC_KEYS:
        if get(k) is not None:
            return None
    if get("reasoning_tokens") is not None:
        return None
    # Reasoning tokens, as _reasoning_tokens finds them: the first of the two holders that has a count.
    reasoning = None
    for holder in ("completion_tokens_details", "output_tokens_details"):
        details = get(holder)
        if details is None:
            continue
        details = _nested(details)
        if details is None:
            return None
        reasoning = details.get("reasoning_tokens")
        if reasoning is not None:
            if type(reasoning) is not int or reasoning < 0:
                return None  # (what _count's -1 leads to)
            break
    extra: tuple[tuple[str, Any], ...] = (("reasoning_tokens", reasoning),) if reasoning else ()
    if get("prompt_tokens") is not None:  # OpenAI Chat (prompt_tokens includes the cached part)
        if get("cache_creation") is not None:
            return None
        total, out = get("prompt_tokens"), get("completion_tokens")
        hit, read, write = get("prompt_cache_hit_tokens"), get("cache_read_input_tokens"), None
        # Each a count or absent, as _count reads them (read in line: ~0.1 us a call, ~8 a usage).
        for v in (total, out, hit, read):
            if v is not None and (type(v) is not int or v < 0):
                return None
        details = get("prompt_tokens_details")
        if details is not None:
            if type(details) is not dict:  # _nested(details) in line: every OpenAI usage has details
                details = _sdk_fields(details)
            if details is None or details.get("cache_creation_token_details") is not None:
                return None
            dget = details.get
            cached, created, written = (
                dget("cached_tokens"),
                dget("cache_creation_tokens"),
                dget("cache_write_tokens"),
            )
            for v in (cached, created, written):
                if v is not None and (type(v) is not int or v < 0):
                    return None
            write = created if created is not None else written
            if read is None:
                read = cached
        if hit is not None:
            read = hit
        if get("cache_creation_input_tokens") is not None:
            write = _count(u, "cache_creation_input_tokens")
        if -1 in (total, out, hit, read, write):
            return None
        total, read, write = total or 0, read or 0, write or 0
        if total < read + write:
            total += write  # as the general reader: older litellm left cache writes out of prompt_tokens
        return Usage(total, out or 0, read, write, 0, extra)
    if (
        get("inputTokens") is not None
        or get("input_tokens") is None
        or get("input_tokens_details") is not None
    ):
        return None  # Bedrock, our own dict (its own fast path above) or OpenAI Responses
    total, out = get("input_tokens"), get("output_tokens")
    read, write = get("cache_read_input_tokens"), get("cache_creation_input_tokens")
    # Each a count or absent, as _count reads them (read in line, as above).
    for v in (total, out, read, write):
        if v is not None and (type(v) is not int or v < 0):
            return None
    # The writes split by TTL (Anthropic's cache_creation), as _writes_1h reads them.
    m5 = h1 = None
    split = get("cache_creation")
    if split is not None:
        split = _nested(split)
        if split is None:
            return None
        m5, h1 = _count(split, "ephemeral_5m_input_tokens"), _count(split, "ephemeral_1h_input_tokens")
        if m5 is not None or h1 is not None:
            m5, h1 = m5 or 0, h1 or 0
    if -1 in (total, out, read, write, m5, h1):
        return None
    if write is None and m5 is not None:
        write = m5 + (h1 or 0)
    if read is None and write is None:
        # No Anthropic cache field (an Anthropic usage without them, or our own dict with a field more):
        # the total already includes any cached part, counted in our own fields if there.
        own_read, own_write = _count(u, "cache_read_tokens"), _count(u, "cache_write_tokens")
        own_1h = _count(u, "cache_write_1h_tokens")
        if -1 in (own_read, own_write, own_1h):
            return None
        own_write = own_write or 0
        return Usage(total or 0, out or 0, own_read or 0, own_write, min(own_1h or 0, own_write), extra)
    # Anthropic: input_tokens counts only the uncached part.
    read, write = read or 0, write or 0
    return Usage((total or 0) + read + write, out or 0, read, write, min(h1 or 0, write), extra)


def normalize_usage(u: Any) -> Usage:
    """The one usage normaliser every path uses. Accepts, as dicts or SDK objects:

    - Anthropic Messages: `input_tokens` (uncached part only) + `cache_read_input_tokens` +
      `cache_creation_input_tokens`, with `cache_creation: {ephemeral_5m_input_tokens,
      ephemeral_1h_input_tokens}` splitting the writes by TTL;
    - OpenAI Chat Completions: `prompt_tokens` (cached included), `prompt_tokens_details.cached_tokens`
      (and `cache_write_tokens` where the model reports them);
    - OpenAI Responses: `input_tokens` (cached included), `input_tokens_details.cached_tokens` /
      `cache_write_tokens`;
    - DeepSeek: `prompt_tokens` + `prompt_cache_hit_tokens` / `prompt_cache_miss_tokens`;
    - litellm's Usage (OpenAI-shaped, plus `cache_creation_input_tokens`/`cache_read_input_tokens` for
      Anthropic models and `prompt_tokens_details.cache_creation_tokens`);
    - Bedrock Converse (inputTokens, cacheReadInputTokens, cacheWriteInputTokens);
    - our own dict (`to_dict()`), or a Usage.
    """
    if isinstance(u, Usage):
        return u
    if type(u) is dict and u.keys() <= _OWN_KEYS and "input_tokens" in u:
        own = _own_usage(u)
        if own is not None:
            return own
    if type(u) is not dict:
        fields = _sdk_fields(u)
        if fields is not None:
            fast = _provider_usage(fields)
            if fast is not None:
                return fast
    if u is None:
        raise UsageFormatError(
            "usage is None: pass the provider response's usage object (a stream: OpenAI sends it only "
            "in the last chunk, with stream_options={'include_usage': True}; Anthropic's is "
            "stream.get_final_message().usage)"
        )
    given = type(u).__name__  # named in the error: model_dump() below leaves only a dict
    if type(u) is not dict and not isinstance(u, Mapping) and hasattr(u, "model_dump"):
        try:
            u = u.model_dump()
        except Exception:  # an SDK object that cannot dump itself: read its attributes instead
            pass
    if type(u) is dict:
        fast = _provider_usage(u)
        if fast is not None:
            return fast
    extra = tuple(sorted(_diagnostics(u).items()))
    if _get(u, "prompt_tokens") is not None:  # OpenAI / DeepSeek / litellm: prompt_tokens includes cached
        details = _get(u, "prompt_tokens_details")
        total = _int(u, "prompt_tokens") or 0
        read = _first(u, "prompt_cache_hit_tokens", "cache_read_input_tokens")
        if read is None and details is not None:
            read = _int(details, "cached_tokens")
        write = _int(u, "cache_creation_input_tokens")
        if write is None and details is not None:
            # litellm's cache_creation_tokens; OpenAI's own cache_write_tokens (newer models report them)
            write = _first(details, "cache_creation_tokens", "cache_write_tokens")
        m5, h1 = _writes_1h(
            _get(u, "cache_creation"), _get(details, "cache_creation_token_details") if details else None
        )
        if write is None and m5 is not None:
            write = m5 + (h1 or 0)
        read, write = read or 0, write or 0
        if total < read + write:
            # Older litellm versions left Anthropic cache writes out of prompt_tokens: add them back.
            total += write
        return Usage(total, _int(u, "completion_tokens") or 0, read, write, min(h1 or 0, write), extra)
    if _get(u, "inputTokens") is not None:  # Bedrock: inputTokens excludes cache reads and writes
        read = _int(u, "cacheReadInputTokens") or 0
        write = _int(u, "cacheWriteInputTokens") or 0
        total = (_int(u, "inputTokens") or 0) + read + write
        return Usage(total, _int(u, "outputTokens") or 0, read, write, 0, extra)
    if _get(u, "input_tokens") is not None:
        total = _int(u, "input_tokens") or 0
        out = _int(u, "output_tokens") or 0
        details = _get(u, "input_tokens_details")
        if details is not None and _get(u, "cache_read_input_tokens") is None:
            # OpenAI Responses: input_tokens already includes the cached part
            read = _int(details, "cached_tokens") or 0
            write = _int(details, "cache_write_tokens") or 0
            return Usage(total, out, read, write, 0, extra)
        a_read = _int(u, "cache_read_input_tokens")
        a_write = _int(u, "cache_creation_input_tokens")
        m5, h1 = _writes_1h(_get(u, "cache_creation"))
        if a_write is None and m5 is not None:
            a_write = m5 + (h1 or 0)
        if a_read is not None or a_write is not None:
            # Anthropic: input_tokens counts only the uncached part
            read, write = a_read or 0, a_write or 0
            return Usage(total + read + write, out, read, write, min(h1 or 0, write), extra)
        # our own dict: the total already includes cached parts
        write = _int(u, "cache_write_tokens") or 0
        return Usage(
            total,
            out,
            _int(u, "cache_read_tokens") or 0,
            write,
            min(_int(u, "cache_write_1h_tokens") or 0, write),
            extra,
        )
    if _get(u, "output_tokens") is not None:
        # Anthropic's message_delta event carries the output count alone (MessageDeltaUsage): recorded
        # as it is, the call would read as a free prompt.
        raise UsageFormatError(
            f"usage object {given} has output tokens but no input tokens: a stream's last delta, not "
            "the whole call's usage; pass stream.get_final_message().usage (the .stream() helper), or "
            "with create(stream=True) the message_start event's message.usage with output_tokens set "
            "from the message_delta event's"
        )
    raise UsageFormatError(
        f"unrecognised usage object {given}: expected Anthropic, OpenAI, DeepSeek, litellm or "
        "Bedrock usage fields"
    )


def finish_reason_of(response: Any) -> str | None:
    """Why the model stopped, as the provider said it (dict or SDK object): Anthropic's `stop_reason`
    (end_turn, tool_use, max_tokens...), the first choice's `finish_reason` of OpenAI's Chat Completions
    and the APIs shaped like it (stop, tool_calls, length...), Bedrock Converse's `stopReason`, OpenAI's
    Responses API's `status` (completed...) or, for an `incomplete` response, its
    `incomplete_details.reason` (max_output_tokens, content_filter: the one word that says why). None
    when the response does not say (a stream cut short, a shape none of these)."""
    try:
        for name in ("stop_reason", "stopReason"):
            reason = _get(response, name)
            if isinstance(reason, str) and reason:
                return reason
        if _get(response, "object") == "response":
            return responses_stop(response)
        choices = _get(response, "choices")
        if isinstance(choices, list | tuple) and choices:
            reason = _get(choices[0], "finish_reason")
            if isinstance(reason, str) and reason:
                return reason
    except Exception:  # an SDK object whose attributes raise: the reason is only ever a nicety
        return None
    return None


def responses_stop(response: Any) -> str | None:
    """A Responses API response's finish reason: its `status`, or for an `incomplete` one its
    `incomplete_details.reason`. For callers that know the body is one (the capture paths: a compatible
    server may leave out `object: "response"`, which finish_reason_of goes by)."""
    try:
        status = _get(response, "status")
        if status == "incomplete":
            why = _get(_get(response, "incomplete_details"), "reason")
            if isinstance(why, str) and why:
                return why
        return status if isinstance(status, str) and status else None
    except Exception:  # an SDK object whose attributes raise: the reason is only ever a nicety
        return None


def reply_diagnostics(response: Any) -> dict[str, Any]:
    """What a reply says beside its usage that the usage event keeps: the cache diagnostics and the
    finish reason."""
    out = cache_diagnostics(response)
    reason = finish_reason_of(response)
    if reason is not None:
        out["finish_reason"] = reason
    return out


def cache_diagnostics(response: Any) -> dict[str, Any]:
    """Anthropic's cache diagnostics from a response (dict or SDK object): `diagnostics.cache_miss_reason`
    is an object whose `type` names what changed (model_changed, system_changed, tools_changed,
    messages_changed, ...); the missed-token count may sit in it or beside it. {} when absent."""
    diag = _get(response, "diagnostics")
    if diag is None:
        return {}
    reason = _get(diag, "cache_miss_reason")
    out: dict[str, Any] = {}
    if isinstance(reason, str):
        out["cache_miss_reason"] = reason
    elif reason is not None:
        t = _get(reason, "type")
        if isinstance(t, str):
            out["cache_miss_reason"] = t
        missed = _get(reason, "cache_missed_input_tokens")
        if isinstance(missed, int) and not isinstance(missed, bool):
            out["cache_missed_input_tokens"] = missed
    missed = _get(diag, "cache_missed_input_tokens")
    if isinstance(missed, int) and not isinstance(missed, bool):
        out.setdefault("cache_missed_input_tokens", missed)
    return out


_SHA = attrgetter("sha")

HISTORY_STEPS = (
    "clear_tool_results",
    "spill",
    "llm_summary",
    "drop_rounds",
    "compact_history",
    "trim_sections",
)


def attribute_cache_break(
    prev: list[Block] | None,
    cur: list[Block],
    prev_prefix_blocks: int,
    *,
    model_changed: bool,
    flipped_latches: list[str],
    actions: list[dict[str, Any]],
) -> dict[str, str] | None:
    """The cache broke if a block inside the previous request's cacheable prefix changed.
    Returns {"section", "cause"} naming the first changed block's section, or None."""
    if prev is None:
        return None
    if model_changed:
        return {"section": "(model)", "cause": "model changed: caches are per model"}
    n = min(prev_prefix_blocks, len(prev))
    # The usual turn: the whole cached prefix is still there. Between compactions the serializer hands
    # back the very Block objects it sent last turn, so identity answers for most of it: the hashes are
    # compared (in C) only from the first block that is a new object (the one that carried last turn's
    # tail marker, usually the last of the prefix). Comparing every block's hash once identity failed
    # there was ~25 us a turn at 300 blocks.
    if n <= len(cur):
        k = next(compress(count(), map(is_not, prev[:n], cur[:n])), n)
        if k == n or list(map(_SHA, prev[k:n])) == list(map(_SHA, cur[k:n])):
            return None
    for i in range(n):
        if i >= len(cur) or cur[i].sha != prev[i].sha:
            if i >= len(cur):
                return {"section": prev[i].section, "cause": "request shorter than the cached prefix"}
            # Name the section whose block changed, vanished (a removed block shifts the rest) or was
            # inserted: a new block before the old one (a section that appears this turn) shifts the
            # rest the other way, and the old one is still there, one further on.
            inserted = i + 1 < len(cur) and cur[i + 1].sha == prev[i].sha
            b = cur[i] if cur[i].section == prev[i].section or inserted else prev[i]
            if b.segment == "tools":
                return {"section": b.section, "cause": "tool schemas changed (trimmed, added or edited)"}
            if flipped_latches and b.section == "latches":
                return {"section": b.section, "cause": f"latch flipped: {', '.join(flipped_latches)}"}
            if b.section == "history":
                steps = [a["step"] for a in actions if a["step"] in HISTORY_STEPS]
                why = f"history rewritten by {', '.join(steps)}" if steps else "history rewritten"
                return {"section": b.section, "cause": why}
            return {"section": b.section, "cause": f"section {b.section} content changed"}
    return None
