"""The price table resolves a model to its own row, never to another model's (sim23).

A dated snapshot or a provider's prefix resolves to the model's row, but a newer minor version or a
smaller tier is a different model: claude-opus-4-6 was billed as claude-opus-4 (3x its price) and
gpt-4.1-nano as gpt-4.1 (about 20x)."""

from __future__ import annotations

import pytest

from engine.sim.pricing import UnknownModelError, load_prices


def test_newer_claude_versions_have_their_own_rows() -> None:
    t = load_prices()
    for m in ("claude-opus-4-6", "claude-opus-4-7"):
        row = t.get(m)
        assert (row.model, row.input, row.output, row.cache_read, row.cache_write, row.cache_write_1h) == (
            m,
            5.0,
            25.0,
            0.5,
            6.25,
            10.0,
        )
    assert t.get("claude-sonnet-4-6").model == "claude-sonnet-4-6"


@pytest.mark.parametrize(
    "model", ["claude-opus-4-8", "claude-sonnet-4-9-20270101", "gpt-4.1-nano", "gpt-4.1-nano-2025-04-14"]
)
def test_another_model_is_refused_not_priced_as_its_family(model: str) -> None:
    with pytest.raises(UnknownModelError, match=f"no price for model '{model}'.*Add a row"):
        load_prices().get(model)


@pytest.mark.parametrize(
    "model,row",
    [
        ("claude-opus-4-20250514", "claude-opus-4"),
        ("claude-opus-4-1-20250805", "claude-opus-4-1"),
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
        ("us.anthropic.claude-3-5-haiku-20241022-v1:0", "claude-3-5-haiku"),
        ("anthropic/claude-sonnet-4", "claude-sonnet-4"),
        ("gpt-4o-2024-08-06", "gpt-4o"),
        ("gpt-4o-mini-2024-07-18", "gpt-4o-mini"),
        ("gpt-4-1106-preview", "gpt-4-turbo"),
        ("claude-sonnet-4-error429", "claude-sonnet-4"),  # a test stand-in's name keeps working
    ],
)
def test_snapshots_and_prefixed_names_resolve_to_their_model(model: str, row: str) -> None:
    assert load_prices().get(model).model == row


@pytest.mark.parametrize(
    "model,row",
    [
        # Vertex AI's MODEL@DATE: "claude-opus-4-5@20251101" was priced as claude-opus-4 (3x Opus 4.5's price).
        ("claude-opus-4-5@20251101", "claude-opus-4-5"),
        ("claude-sonnet-4-5@20250929", "claude-sonnet-4-5"),
        ("claude-3-5-haiku@20241022", "claude-3-5-haiku"),
        # OpenRouter's dotted slugs were refused.
        ("openrouter/anthropic/claude-sonnet-4.5", "claude-sonnet-4-5"),
        ("anthropic/claude-opus-4.1", "claude-opus-4-1"),
        # A dot stays a dot outside Claude names.
        ("gpt-4.1-mini-2025-04-14", "gpt-4.1-mini"),
    ],
)
def test_vertex_snapshots_and_dotted_slugs_resolve_to_their_model(model: str, row: str) -> None:
    assert load_prices().get(model).model == row


def test_a_vertex_name_of_another_model_is_still_refused() -> None:
    with pytest.raises(UnknownModelError):
        load_prices().get("claude-opus-4-8@20270101")
