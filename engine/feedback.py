"""Feedback: normalise provider usage, and attribute cache breaks to the section that changed."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.providers.base import Block


@dataclass(frozen=True)
class Usage:
    input_tokens: int  # all prompt tokens, cached or not
    output_tokens: int
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    def to_dict(self) -> dict[str, int]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "cache_write_tokens": self.cache_write_tokens,
        }


def _get(obj: Any, name: str) -> Any:
    if isinstance(obj, dict):
        return obj.get(name)
    return getattr(obj, name, None)


def normalize_usage(u: Any) -> Usage:
    """Accepts Anthropic (input_tokens + cache_read_input_tokens + cache_creation_input_tokens),
    OpenAI (prompt_tokens, prompt_tokens_details.cached_tokens), DeepSeek (prompt_cache_hit_tokens),
    Bedrock Converse (inputTokens, cacheReadInputTokens, cacheWriteInputTokens), as dicts or SDK objects,
    or our own Usage."""
    if isinstance(u, Usage):
        return u
    if u is None:
        raise ValueError("usage is None: pass the provider response's usage object")
    if _get(u, "prompt_tokens") is not None:  # OpenAI / DeepSeek: prompt_tokens includes cached tokens
        details = _get(u, "prompt_tokens_details")
        cached = _get(u, "prompt_cache_hit_tokens")
        if cached is None and details is not None:
            cached = _get(details, "cached_tokens")
        return Usage(
            int(_get(u, "prompt_tokens")), int(_get(u, "completion_tokens") or 0), int(cached or 0), 0
        )
    if _get(u, "inputTokens") is not None:  # Bedrock: inputTokens excludes cache reads and writes
        read = int(_get(u, "cacheReadInputTokens") or 0)
        write = int(_get(u, "cacheWriteInputTokens") or 0)
        return Usage(
            int(_get(u, "inputTokens")) + read + write, int(_get(u, "outputTokens") or 0), read, write
        )
    if _get(u, "input_tokens") is not None:
        read = int(_get(u, "cache_read_input_tokens") or _get(u, "cache_read_tokens") or 0)
        write = int(_get(u, "cache_creation_input_tokens") or _get(u, "cache_write_tokens") or 0)
        # Anthropic's input_tokens counts only the uncached part; our own dicts already hold the total.
        total = int(_get(u, "input_tokens"))
        if (
            _get(u, "cache_read_input_tokens") is not None
            or _get(u, "cache_creation_input_tokens") is not None
        ):
            total += read + write
        return Usage(total, int(_get(u, "output_tokens") or 0), read, write)
    raise ValueError(
        f"unrecognised usage object {type(u).__name__}: expected Anthropic, OpenAI, DeepSeek or Bedrock usage fields"
    )


HISTORY_STEPS = ("clear_tool_results", "spill", "llm_summary", "drop_rounds", "trim_sections")


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
    for i in range(n):
        if i >= len(cur) or cur[i].sha != prev[i].sha:
            if i >= len(cur):
                return {"section": prev[i].section, "cause": "request shorter than the cached prefix"}
            # Name the section whose block changed or vanished (a removed block shifts the rest).
            b = cur[i] if cur[i].section == prev[i].section else prev[i]
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
