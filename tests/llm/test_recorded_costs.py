"""Costs from the usage the providers really report: answers shaped like OpenAI's and
Anthropic's documented responses, read through the real HTTP client from a model server on
loopback, priced at the models' published prices."""

from __future__ import annotations

import pytest

from bot.llm.budget import Budget
from bot.llm.prices import price_for
from tests.llm.local_server import ModelServer, Queue
from tests.llm.payloads import anthropic_message, cached_usage, tool_call_completion, tool_use
from tests.llm.test_native_tools import ARGS, READ, WRITE, Sleep, anthropic, openai, request


async def test_an_openai_answer_with_cached_prompt_tokens_is_priced_apart(sleep: Sleep) -> None:
    answer = tool_call_completion("write_file", ARGS, cached=1920)  # 2,006 prompt, 300 answer
    with ModelServer(Queue((200, answer))).running() as server:
        llm = openai(server, sleep)
        response = await llm.complete(request(READ, WRITE))
        await llm.aclose()
    budget = Budget(100_000, 10_000, 3600, price=price_for("gpt-4.1"))
    budget.spend("execution", response.usage, 1)
    # gpt-4.1: $2 input, $0.50 cached input, $8 output per million tokens.
    expected = (86 * 2.0 + 1920 * 0.50 + 300 * 8.0) / 1e6
    assert budget.ledger.cost == pytest.approx(expected)
    assert budget.ledger.to_dict()["cost"] == round(expected, 6)


async def test_an_anthropic_answer_with_cache_reads_and_writes_is_priced_apart(
    sleep: Sleep,
) -> None:
    answer = cached_usage(
        anthropic_message([tool_use("write_file", {})]), read=1200, written=600, uncached=300
    )
    with ModelServer(Queue((200, answer))).running() as server:
        llm = anthropic(server, sleep)
        response = await llm.complete(request(WRITE))
        await llm.aclose()
    budget = Budget(100_000, 10_000, 3600, price=price_for("claude-sonnet-4-5"))
    budget.spend("execution", response.usage, 1)
    # Sonnet 4.5: $3 input, $0.30 cache hits, $3.75 cache writes, $15 output.
    expected = (300 * 3.0 + 1200 * 0.30 + 600 * 3.75 + 503 * 15.0) / 1e6
    assert budget.ledger.cost == pytest.approx(expected)
