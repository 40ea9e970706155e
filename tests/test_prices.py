"""List prices: a model's base input price in dollars, for the PR comment's figures."""

from __future__ import annotations

from fractions import Fraction

import pytest
from prefixlock.cache.prices import LIST_PRICES, PRICE_TABLE, input_price


@pytest.mark.parametrize(
    ("model", "price"),
    [
        ("claude-sonnet-4-5", Fraction(3)),
        ("claude-sonnet-4-5-20250929", Fraction(3)),
        ("anthropic.claude-sonnet-4-5-20250929-v1:0", Fraction(3)),  # Bedrock: Anthropic's
        ("us.anthropic.claude-opus-4-1-20250805-v1:0", Fraction(15)),
        ("claude-opus-4-5", Fraction(5)),  # not Opus 4's $15: the longest name wins
        ("claude-sonnet-5-5", Fraction(2)),
        ("gpt-5", Fraction(5, 4)),
        ("gpt-5-mini-2025-08-07", Fraction(1, 4)),
        ("gpt-4.1", Fraction(2)),
        ("gpt-4.1-mini", Fraction(2, 5)),
        ("o3-mini", Fraction(11, 10)),
        ("gemini-2.5-pro", Fraction(5, 4)),
        ("gemini-2.5-flash-lite", Fraction(1, 10)),
    ],
)
def test_input_price_by_the_longest_known_name(model: str, price: Fraction) -> None:
    assert input_price(model) == price


@pytest.mark.parametrize("model", ["gpt-5.2", "gpt-50", "claude-sonnet", "mistral-large", ""])
def test_a_model_the_table_does_not_know_has_no_price(model: str) -> None:
    """Never a guess: ``gpt-5.2`` is not ``gpt-5``, ``gpt-50`` not ``gpt-5``."""
    assert input_price(model) is None


def test_the_table_is_named_with_its_date_and_unit() -> None:
    assert PRICE_TABLE == "prefixlock list prices of 2026-12-07 (USD per million base input tokens)"
    assert all(price > 0 for price in LIST_PRICES.values())
