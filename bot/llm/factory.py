"""Build the configured LLM provider from ``LLMSettings``."""

from __future__ import annotations

import httpx

from bot.config import ConfigError, LLMSettings
from bot.llm.anthropic import DEFAULT_BASE_URL as ANTHROPIC_BASE_URL
from bot.llm.anthropic import AnthropicLLM
from bot.llm.base import LLM
from bot.llm.dialect import DialectStore
from bot.llm.openai import OpenAICompatibleLLM
from bot.llm.scripted import ScriptedLLM

# The default base_url is Ollama's; with provider anthropic it means "not set".
_DEFAULT_BASE_URL = str(LLMSettings.model_fields["base_url"].default)


def anthropic_base_url(base_url: str) -> str:
    """Anthropic's API unless the user pointed ``llm.base_url`` elsewhere."""
    return ANTHROPIC_BASE_URL if base_url in ("", _DEFAULT_BASE_URL) else base_url


def make_llm(
    settings: LLMSettings,
    *,
    http: httpx.AsyncClient | None = None,
    dialects: DialectStore | None = None,
) -> LLM:
    """The provider ``settings.provider`` names; ``http`` is shared when given (not closed);
    ``dialects`` keeps the structured-output dialect found per endpoint and model."""
    if settings.provider == "scripted":
        if settings.script_path is None:
            raise ConfigError("llm.script_path: required when llm.provider is scripted")
        if settings.script_path.is_dir():  # a folder of per-task scripts (`bot eval`'s):
            return ScriptedLLM([])  # each evaluation task reads its own; others have none
        return ScriptedLLM(settings.script_path)
    api_key = settings.api_key.get_secret_value() if settings.api_key is not None else None
    if settings.provider == "anthropic":
        return AnthropicLLM(
            base_url=anthropic_base_url(settings.base_url),
            model=settings.model,
            api_key=api_key,
            http=http,
            timeout=settings.request_timeout,
            max_retries=settings.max_retries,
            native_tools=settings.native_tools,
            prompt_cache=settings.prompt_cache,
        )
    return OpenAICompatibleLLM(
        structured_output=settings.structured_output,
        dialects=dialects,
        base_url=settings.base_url,
        model=settings.model,
        api_key=api_key,
        http=http,
        timeout=settings.request_timeout,
        max_retries=settings.max_retries,
        native_tools=settings.native_tools,
    )
