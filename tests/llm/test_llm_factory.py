"""make_llm builds the configured provider."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from bot.config import ConfigError, LLMSettings
from bot.llm.anthropic import AnthropicLLM
from bot.llm.base import LLMRequest, Message
from bot.llm.dialect import Dialect
from bot.llm.factory import make_llm
from bot.llm.openai import OpenAICompatibleLLM
from tests.llm.payloads import Replay, chat_completion, ok


async def test_openai_provider_uses_the_shared_client_and_key() -> None:
    replay = Replay(ok(chat_completion("{}")))
    http = replay.client()
    settings = LLMSettings(
        provider="openai",
        base_url="http://vllm.internal:8000/v1",
        model="qwen",
        api_key=SecretStr("k-123"),
        max_retries=1,
    )
    llm = make_llm(settings, http=http)
    assert isinstance(llm, OpenAICompatibleLLM)
    await llm.complete(LLMRequest(phase="p", messages=(Message("user", "hi"),)))
    assert str(replay.requests[0].url) == "http://vllm.internal:8000/v1/chat/completions"
    assert replay.requests[0].headers["authorization"] == "Bearer k-123"
    assert replay.body(0)["model"] == "qwen"
    await llm.aclose()
    assert not http.is_closed
    await http.aclose()


async def test_openai_provider_gets_the_pinned_mode_and_the_dialect_store() -> None:
    class Kept:
        async def get_llm_dialect(self, endpoint: str, model: str) -> None:
            return None

        async def put_llm_dialect(
            self, endpoint: str, model: str, *, dialect: str, server: str
        ) -> None:
            return None

    kept = Kept()
    settings = LLMSettings(provider="openai", structured_output="none")
    llm = make_llm(settings, dialects=kept)
    assert isinstance(llm, OpenAICompatibleLLM)
    assert llm.structured_output == "none" and llm.dialect is Dialect.INSTRUCTIONS
    assert llm._dialects is kept
    await llm.aclose()


async def test_anthropic_defaults_to_the_anthropic_api() -> None:
    llm = make_llm(LLMSettings(provider="anthropic", model="claude-sonnet-4-5"))
    assert isinstance(llm, AnthropicLLM)
    assert llm.base_url == "https://api.anthropic.com"
    await llm.aclose()
    custom = make_llm(LLMSettings(provider="anthropic", base_url="http://gw.local/v1"))
    assert isinstance(custom, AnthropicLLM) and custom.base_url == "http://gw.local"
    await custom.aclose()


def test_scripted_needs_a_script_path() -> None:
    with pytest.raises(ConfigError, match=r"llm.script_path"):
        make_llm(LLMSettings(provider="scripted"))
