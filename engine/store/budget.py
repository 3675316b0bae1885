"""What a window is measured in: the budget a caller asks for (validated) and the tokenizer for a model."""

from __future__ import annotations

from engine.errors import ConfigError
from engine.tokens import (
    MESSAGE_OVERHEAD_TOKENS,
    REPLY_PRIMING_TOKENS,
    Budget,
    CharTokenizer,
    Tokenizer,
    default_tokenizer,
)

MAX_BUDGET = 100_000_000

_CHARS = CharTokenizer()


def tokenizer_for(model: str | Tokenizer | None) -> Tokenizer:
    """The tokenizer used to count a window for `model`.

    Every chat model is counted with cl100k_base (offline) unless the caller passes its own
    Tokenizer; "chars" selects the 4-characters-per-token estimate. Counts are cached per tokenizer
    name, so two tokenizers never share a cached count.
    """
    if model is None or isinstance(model, str):
        if model is not None and model.lower() in ("chars", "chars/4"):
            return _CHARS
        return default_tokenizer()
    return model


def parse_budget(budget: int | Budget) -> Budget:
    if isinstance(budget, Budget):
        b = budget
    else:
        if isinstance(budget, bool) or not isinstance(budget, int):
            raise ConfigError(f"budget must be a whole number of tokens, got {budget!r}")
        if budget <= 0:
            raise ConfigError(f"budget must be a positive number of tokens, got {budget}")
        if budget > MAX_BUDGET:
            raise ConfigError(f"budget {budget} is absurd: no model has a window above {MAX_BUDGET:,} tokens")
        b = Budget(budget)
    if b.limit <= 0:
        raise ConfigError(f"budget must be a positive number of tokens, got {b.limit}")
    if b.usable <= REPLY_PRIMING_TOKENS + MESSAGE_OVERHEAD_TOKENS:
        raise ConfigError(f"budget {b.limit} is too small to hold even one message")
    return b
