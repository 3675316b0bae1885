"""One scale for the token figures a person compares across panels: the provider's, what the prompt is
billed and cached in. The engine counts with its own tokenizer (cl100k); a provider counts its own way
(DeepSeek 9-15% more on deepseek-chat runs, Anthropic ~6% more on the demo recording). A turn's
provider count is exact once its usage arrives; before (a live turn) or from a provider that gives
none, it is the engine's count times the session's learned calibration (the trace's `calibration`, the
ratio the plan used), shown with ≈. The section manifest stays on the engine's scale (budgets are
planned in it) and says so, with the learned calibration. No UI imports: pure arithmetic over a trace or a timeline summary."""

from __future__ import annotations

from typing import Any

from panels.token_counts import tok

# What scale a figure is on, said after it where the row holds it.
PROVIDER = "provider's tokens"
SCALE_COUNTED = "all in the provider's tokens"  # the prefix's ≈: its share of the prompt the provider counted
# ... with this request's own ratio, where the row holds it: the one place it is shown (the manifest's border
# says the session's learned one, which does not change every turn).
SCALE_COUNTED_RATIO = ("all in the provider's tokens: the engine's ×{:.2f} on this request",
                       "all in the provider's tokens (the engine's ×{:.2f})")
SCALE_LEARNED = "≈ the provider's tokens: the engine's ×{:.2f}, learned"
SCALE_UNCALIBRATED = "≈ the provider's tokens: the engine's, not calibrated yet"


def learned(t: Any) -> float:
    """The session's calibration when this turn was planned (provider tokens per engine token); 1.0 before
    three replies were seen, or in a trace from before it was recorded."""
    return float(t.get("calibration") or 1.0)


def prompt_count(t: Any) -> int:
    """The provider's count of this request's prompt (cached parts included), 0 when it gave none."""
    return int((t.get("usage") or {}).get("input_tokens") or 0)


def sent(t: Any) -> tuple[int, bool]:
    """This request's size on the provider's scale, and whether it is an estimate: the provider's count, else
    the engine's count (`final_tokens`) times the learned calibration."""
    prompt = prompt_count(t)
    if prompt:
        return prompt, False
    return round((t.get("final_tokens") or 0) * learned(t)), True


def ratio(t: Any, engine_total: int | None = None) -> float:
    """Provider tokens per engine token for this request: its own (the provider's count over the engine's,
    `engine_total` or `final_tokens`) once counted, else the learned calibration. Its own, not the session's
    running average: beside this request's counts the average printed a part larger than its whole."""
    prompt = prompt_count(t)
    total = engine_total if engine_total is not None else t.get("final_tokens") or 0
    return prompt / total if prompt and total else learned(t)


def shown(n: int, estimated: bool) -> str:
    """A provider-scale figure as printed: ≈ before an estimate."""
    return ("≈" if estimated else "") + tok(n)
