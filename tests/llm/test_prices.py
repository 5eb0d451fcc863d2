"""Prices and costs: the operator's list first, the published list by model family, free
for a model the list does not know (a local server's)."""

from __future__ import annotations

import pytest

from bot.llm.prices import FREE, Price, dollars, price_for


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("gpt-4o-2024-08-06", Price(2.50, 10.0, 1.25)),
        ("gpt-4o-mini", Price(0.15, 0.60, 0.075)),  # not gpt-4o's price
        ("claude-sonnet-4-20250514", Price(3.0, 15.0, 0.30, 3.75)),
        ("claude-opus-4-1-20250805", Price(15.0, 75.0, 1.50, 18.75)),
        ("claude-opus-4-5", Price(5.0, 25.0, 0.50, 6.25)),
        ("anthropic/claude-3-5-haiku-latest", Price(0.80, 4.0, 0.08, 1.0)),  # via a proxy
        ("qwen2.5-coder", FREE),
        ("llama3.1:8b", FREE),
    ],
)
def test_a_model_gets_its_published_price_or_none(model: str, expected: Price) -> None:
    assert price_for(model) == expected


def test_the_operators_price_wins() -> None:
    mine = Price(1.0, 2.0)
    assert price_for("gpt-4o", {"gpt-4o": mine}) is mine
    assert price_for("my-finetune", {"my-finetune": mine}) is mine


def test_cost_of_openai_and_anthropic_usage() -> None:
    # OpenAI: 10,000 prompt tokens of which 4,000 cached, 1,000 completion (gpt-4o).
    openai = price_for("gpt-4o").cost(10_000, 1_000, cached=4_000)
    assert openai == pytest.approx((6_000 * 2.50 + 4_000 * 1.25 + 1_000 * 10.0) / 1e6)
    # Anthropic: 3,000 read from the cache, 2,000 written to it, 500 plain (Sonnet 4).
    anthropic = price_for("claude-sonnet-4").cost(5_500, 800, cached=3_000, cache_write=2_000)
    expected = (500 * 3.0 + 3_000 * 0.30 + 2_000 * 3.75 + 800 * 15.0) / 1e6
    assert anthropic == pytest.approx(expected)
    assert FREE.cost(1_000_000, 1_000_000) == 0.0
    # Without cache prices, cached tokens cost what input does.
    assert Price(1.0, 1.0).cost(1_000, 0, cached=1_000) == pytest.approx(0.001)


def test_dollars_reads_like_a_bill() -> None:
    assert [dollars(x) for x in (0, 0.00042, 0.0123, 1.5, 1234.5)] == [
        "$0",
        "$0.0004",
        "$0.012",
        "$1.50",
        "$1,234.50",
    ]
