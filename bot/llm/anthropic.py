"""Anthropic's Messages API (POST {base_url}/v1/messages), over plain httpx.

Structured output uses one tool named after the phase, with the phase schema as
its ``input_schema``, forced by ``tool_choice``: the API hands back the document as
already-parsed JSON (``tool_use.input``), for every Claude model. A prefilled
assistant ``{`` would be simpler but newer models refuse prefills. When the
endpoint refuses the tool (a 400 naming it, e.g. a proxy without tool support),
the provider falls back to instructions in the system prompt and remembers that.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import httpx

from bot.llm.base import (
    HealthReport,
    LLMBadRequest,
    LLMError,
    LLMRequest,
    LLMResponse,
    Message,
    OutputMode,
)
from bot.llm.health import health_report
from bot.llm.transport import (
    Call,
    Sleep,
    error_message,
    fetch_model_ids,
    send,
    usage_from,
    with_json_instructions,
)

API_VERSION = "2023-06-01"
DEFAULT_BASE_URL = "https://api.anthropic.com"
_TOOL_WORDS = ("tool", "input_schema")


def api_root(base_url: str) -> str:
    """``base_url`` without a trailing ``/v1`` (the paths below add it)."""
    root = base_url.rstrip("/")
    return root.removesuffix("/v1") if root.endswith("/v1") else root


def tool_refused(status: int, body: str) -> bool:
    """A 400 that blames the forced tool: fall back to instructions."""
    text = body.lower()
    return status in (400, 422) and any(word in text for word in _TOOL_WORDS)


def split_messages(messages: Sequence[Message]) -> tuple[str, list[dict[str, str]]]:
    """(system prompt, turns) with consecutive turns of one role merged."""
    system = "\n\n".join(m.content for m in messages if m.role == "system")
    turns: list[dict[str, str]] = []
    for message in messages:
        if message.role == "system":
            continue
        if turns and turns[-1]["role"] == message.role:
            turns[-1]["content"] += "\n\n" + message.content
        else:
            turns.append({"role": message.role, "content": message.content})
    return system, turns


def tool_name(phase: str) -> str:
    cleaned = "".join(c if c.isalnum() or c in "_-" else "_" for c in phase)
    return cleaned[:64] or "answer"


def _text(data: Any, phase: str) -> str:
    """The phase document (tool input, as JSON) or the joined text blocks."""
    blocks = data["content"]
    for block in blocks:
        if block.get("type") == "tool_use" and block.get("name") == tool_name(phase):
            return json.dumps(block.get("input"), ensure_ascii=False)
    return "".join(str(b["text"]) for b in blocks if b.get("type") == "text")


class AnthropicLLM:
    """``LLM`` over the Anthropic Messages API."""

    def __init__(
        self,
        *,
        model: str,
        api_key: str | None,
        base_url: str = DEFAULT_BASE_URL,
        http: httpx.AsyncClient | None = None,
        timeout: float = 120.0,
        max_retries: int = 3,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self.name = "anthropic"
        self.base_url = api_root(base_url)
        self.model = model
        self.mode: OutputMode = "json_schema"
        self._api_key = api_key
        self._owns_http = http is None
        self._http = http if http is not None else httpx.AsyncClient()
        self._timeout = timeout
        self._max_retries = max_retries
        self._sleep = sleep

    def _headers(self) -> dict[str, str]:
        headers = {"anthropic-version": API_VERSION, "accept": "application/json"}
        if self._api_key:
            headers["x-api-key"] = self._api_key
        return headers

    def _body(self, request: LLMRequest, mode: OutputMode) -> dict[str, Any]:
        messages = request.messages
        if request.schema is not None and mode == "text":
            messages = with_json_instructions(messages, request.schema)
        system, turns = split_messages(messages)
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
            "messages": turns,
        }
        if system:
            body["system"] = system
        if request.schema is not None and mode == "json_schema":
            name = tool_name(request.phase)
            body["tools"] = [
                {
                    "name": name,
                    "description": f"Submit the {request.phase} document.",
                    "input_schema": request.schema,
                }
            ]
            body["tool_choice"] = {"type": "tool", "name": name}
        return body

    async def complete(self, request: LLMRequest) -> LLMResponse:
        url = f"{self.base_url}/v1/messages"
        while True:
            mode: OutputMode = self.mode if request.schema is not None else "text"
            call = Call("POST", url, self._headers(), self._body(request, mode), request.phase)
            response = await send(
                self._http,
                call,
                timeout=self._timeout,
                sleep=self._sleep,
                max_retries=self._max_retries,
            )
            if response.is_success:
                return self._parse(response, request, mode)
            if mode == "json_schema" and tool_refused(response.status_code, response.text):
                self.mode = "text"
                continue
            raise LLMBadRequest(
                f"{request.phase}: HTTP {response.status_code} from {url}: "
                f"{error_message(response)}"
            )

    def _parse(
        self, response: httpx.Response, request: LLMRequest, mode: OutputMode
    ) -> LLMResponse:
        try:
            data = response.json()
            text = _text(data, request.phase)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise LLMError(
                f"{request.phase}: {response.url} did not answer with a Messages API object "
                f"({type(exc).__name__}: {exc}); check LLM_BASE_URL"
            ) from exc
        return LLMResponse(
            text=text,
            usage=usage_from(data, request, text, prompt="input_tokens", answer="output_tokens"),
            model=str(data.get("model") or self.model),
            mode=mode,
        )

    async def health(self) -> HealthReport:
        listing = await fetch_model_ids(
            self._http, f"{self.base_url}/v1/models?limit=1000", self._headers()
        )
        return health_report(
            "anthropic",
            self.base_url,
            self.model,
            status=listing.status,
            models=listing.models,
            error=listing.error,
        )

    async def aclose(self) -> None:
        if self._owns_http:
            await self._http.aclose()
