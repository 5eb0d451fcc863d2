"""The Anthropic Messages API provider against transport-level fakes."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

import pytest

from bot.llm.anthropic import AnthropicLLM, api_root, split_messages, tool_refused
from bot.llm.base import LLMBadRequest, LLMError, LLMRequest, LLMUnavailable, Message
from tests.llm.payloads import (
    Replay,
    anthropic_error,
    anthropic_message,
    anthropic_models,
    ok,
    status,
    tool_use,
)

Sleep = Callable[[float], Awaitable[None]]
SCHEMA = {"type": "object", "required": ["phase"], "properties": {"phase": {"const": "planning"}}}
REQUEST = LLMRequest(
    phase="planning",
    messages=(
        Message("system", "You plan."),
        Message("user", "Fix the bug"),
        Message("assistant", "not json"),
        Message("user", "Try again"),
        Message("user", "Only JSON, please"),
    ),
    schema=SCHEMA,
    max_tokens=300,
    temperature=0.1,
)


def make(replay: Replay, sleep: Sleep, base_url: str = "https://api.anthropic.com") -> AnthropicLLM:
    return AnthropicLLM(
        base_url=base_url,
        model="claude-sonnet-4-5",
        api_key="sk-ant-test",
        http=replay.client(),
        sleep=sleep,
    )


async def test_request_shape_and_tool_answer(sleep: Sleep) -> None:
    replay = Replay(ok(anthropic_message([tool_use("planning", {"phase": "planning"})])))
    response = await make(replay, sleep).complete(REQUEST)
    assert json.loads(response.text) == {"phase": "planning"}
    assert (response.usage.prompt_tokens, response.usage.completion_tokens) == (2095, 503)
    assert (response.model, response.mode) == ("claude-sonnet-4-5-20250929", "json_schema")
    sent = replay.requests[0]
    assert str(sent.url) == "https://api.anthropic.com/v1/messages"
    assert sent.headers["x-api-key"] == "sk-ant-test"
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in sent.headers
    assert replay.body(0) == {
        "model": "claude-sonnet-4-5",
        "max_tokens": 300,
        "temperature": 0.1,
        # the stable prefix (tools, system prompt) ends with a cache breakpoint
        "system": [{"type": "text", "text": "You plan.", "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {"role": "user", "content": "Fix the bug"},
            {"role": "assistant", "content": "not json"},
            {"role": "user", "content": "Try again\n\nOnly JSON, please"},
        ],
        "tools": [
            {
                "name": "planning",
                "description": "Submit the planning document.",
                "input_schema": SCHEMA,
            }
        ],
        "tool_choice": {"type": "tool", "name": "planning"},
    }


async def test_base_url_with_v1_suffix_is_normalised(sleep: Sleep) -> None:
    replay = Replay(ok(anthropic_message([tool_use("planning", {})])))
    await make(replay, sleep, base_url="https://proxy.example/anthropic/v1/").complete(REQUEST)
    assert str(replay.requests[0].url) == "https://proxy.example/anthropic/v1/messages"


async def test_text_blocks_are_joined_without_schema(sleep: Sleep) -> None:
    blocks = [{"type": "text", "text": "Hello, "}, {"type": "text", "text": "world"}]
    replay = Replay(ok(anthropic_message(blocks, stop_reason="end_turn")))
    plain = LLMRequest(phase="chat", messages=(Message("user", "hi"),))
    response = await make(replay, sleep).complete(plain)
    assert (response.text, response.mode) == ("Hello, world", "text")
    body = replay.body(0)
    assert "tools" not in body and "tool_choice" not in body and "system" not in body


async def test_refused_tool_falls_back_to_instructions_and_remembers(sleep: Sleep) -> None:
    refused = anthropic_error("invalid_request_error", "tools: Input tag 'tool' is not supported")
    text_answer = anthropic_message(
        [{"type": "text", "text": '{"phase": "planning"}'}], stop_reason="end_turn"
    )
    replay = Replay(status(400, refused), ok(text_answer), ok(text_answer))
    llm = make(replay, sleep)
    first = await llm.complete(REQUEST)
    assert (first.text, first.mode) == ('{"phase": "planning"}', "text")
    body = replay.body(1)
    assert "tools" not in body
    [system] = body["system"]
    assert system["text"].startswith("You plan.\n\nReply with exactly one JSON object")
    assert json.dumps(SCHEMA) in system["text"]
    await llm.complete(REQUEST)
    assert len(replay.requests) == 3 and "tools" not in replay.body(2)


async def test_overloaded_529_is_retried(sleep: Sleep, waits: list[float]) -> None:
    overloaded = anthropic_error("overloaded_error", "Overloaded")
    replay = Replay(status(529, overloaded), ok(anthropic_message([tool_use("planning", {})])))
    await make(replay, sleep).complete(REQUEST)
    assert waits == [1.0]


async def test_rate_limit_honours_retry_after_then_gives_up(
    sleep: Sleep, waits: list[float]
) -> None:
    limited = anthropic_error("rate_limit_error", "Number of requests has exceeded your limit")
    replay = Replay(*(status(429, limited, **{"retry-after": "7"}) for _ in range(4)))
    with pytest.raises(LLMUnavailable, match=r"HTTP 429.*exceeded your limit"):
        await make(replay, sleep).complete(REQUEST)
    assert waits == [7.0, 7.0, 7.0]


async def test_bad_key_is_a_bad_request(sleep: Sleep, waits: list[float]) -> None:
    replay = Replay(status(401, anthropic_error("authentication_error", "invalid x-api-key")))
    with pytest.raises(LLMBadRequest, match=r"HTTP 401.*invalid x-api-key"):
        await make(replay, sleep).complete(REQUEST)
    assert waits == []


async def test_non_message_answer_is_an_error(sleep: Sleep) -> None:
    replay = Replay(ok({"object": "chat.completion", "choices": []}))
    with pytest.raises(LLMError, match=r"did not answer with a Messages API object"):
        await make(replay, sleep).complete(REQUEST)


async def test_health_lists_models_with_the_api_headers(sleep: Sleep) -> None:
    replay = Replay(
        ok(anthropic_models("claude-sonnet-4-5-20250929", "claude-opus-4-1-20250805")),
        ok(anthropic_message([tool_use("probe", {"ok": True})])),
    )
    report = await make(replay, sleep).health()
    sent = replay.requests[0]
    assert str(sent.url) == "https://api.anthropic.com/v1/models?limit=1000"
    assert sent.headers["x-api-key"] == "sk-ant-test"
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert report.provider == "anthropic"
    assert report.reachable and report.model_available  # alias of a dated snapshot
    assert report.setup_steps == ()
    # one small structured request (the forced tool) predicts that tasks will work
    assert replay.body(1)["tool_choice"] == {"type": "tool", "name": "probe"}
    assert (report.answered, report.dialect, report.server) == (True, "json_schema", "Anthropic")


async def test_health_missing_model_lists_the_choices(sleep: Sleep) -> None:
    replay = Replay(ok(anthropic_models("claude-opus-4-1-20250805")))
    report = await make(replay, sleep).health()
    assert report.model_available is False
    assert report.setup_steps == ("Set LLM_MODEL to one of: claude-opus-4-1-20250805",)


async def test_health_bad_key(sleep: Sleep) -> None:
    replay = Replay(status(401, anthropic_error("authentication_error", "invalid x-api-key")))
    report = await make(replay, sleep).health()
    assert report.error == "HTTP 401: invalid x-api-key"
    assert report.setup_steps == (
        "Set LLM_API_KEY (or ANTHROPIC_API_KEY) to a valid API key for https://api.anthropic.com",
    )


def test_helpers() -> None:
    assert api_root("https://api.anthropic.com/v1/") == "https://api.anthropic.com"
    assert api_root("https://api.anthropic.com") == "https://api.anthropic.com"
    assert tool_refused(400, '{"error": {"message": "tool_choice is not supported"}}')
    assert not tool_refused(400, '{"error": {"message": "max_tokens too large"}}')
    assert not tool_refused(401, "tool")
    system, turns = split_messages([Message("user", "a"), Message("system", "s")])
    assert (system, turns) == ("s", [{"role": "user", "content": "a"}])
