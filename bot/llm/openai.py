"""Any OpenAI-compatible chat-completions endpoint: OpenAI, Ollama (/v1), vLLM, LM Studio,
llama.cpp server.

Plain httpx rather than the ``openai`` SDK: the bot needs its own retry policy
(1, 2, 4 s, ``Retry-After``, typed errors) for two endpoints, and the servers
above differ in what they accept. Output modes degrade on a 400 that names the
response format: ``json_schema`` -> ``json_object`` -> ``text`` (schema given in
the prompt instead). Other known refusals adjust the request too (OpenAI's newer
models want ``max_completion_tokens`` and the default temperature). Whatever
worked is remembered for the provider instance.
"""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass
from typing import Any

import httpx

from bot.llm.base import (
    HealthReport,
    LLMBadRequest,
    LLMError,
    LLMRequest,
    LLMResponse,
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

_MODES: tuple[OutputMode, ...] = ("json_schema", "json_object", "text")
_FORMAT_WORDS = ("response_format", "json_schema", "json_object", "unsupported", "not supported")


@dataclass(frozen=True, slots=True)
class Quirks:
    """What this endpoint accepts, learned from its refusals."""

    mode: OutputMode = "json_schema"
    length_field: str = "max_tokens"
    temperature: bool = True


def adjust(quirks: Quirks, used: OutputMode, status: int, body: str) -> Quirks | None:
    """The request shape to try after a refusal, or None when nothing is left to change.

    ``used`` is the output mode of the refused request; ``body`` its error body.
    """
    if status not in (400, 422):
        return None
    text = body.lower()
    if quirks.length_field == "max_tokens" and "max_completion_tokens" in text:
        return dataclasses.replace(quirks, length_field="max_completion_tokens")
    if quirks.temperature and "temperature" in text:
        return dataclasses.replace(quirks, temperature=False)
    if used != "text" and any(word in text for word in _FORMAT_WORDS):
        lower = _MODES[max(_MODES.index(used) + 1, _MODES.index(quirks.mode))]
        return dataclasses.replace(quirks, mode=lower)
    return None


def response_format(phase: str, schema: dict[str, Any] | None, mode: OutputMode) -> Any:
    if mode == "json_schema" and schema is not None:
        return {
            "type": "json_schema",
            "json_schema": {"name": phase, "schema": schema, "strict": False},
        }
    if mode == "json_object":
        return {"type": "json_object"}
    return None


def _content(data: Any) -> str:
    """The text of the first choice of a chat.completion object."""
    message = data["choices"][0]["message"]
    content = message.get("content")
    if content is None:
        content = message.get("refusal") or ""
    if not isinstance(content, str):
        raise TypeError("message.content is not a string")
    return content


class OpenAICompatibleLLM:
    """``LLM`` over POST {base_url}/chat/completions."""

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str | None = None,
        http: httpx.AsyncClient | None = None,
        timeout: float = 120.0,
        max_retries: int = 3,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self.name = "openai"
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.quirks = Quirks()
        self._api_key = api_key
        self._owns_http = http is None
        self._http = http if http is not None else httpx.AsyncClient()
        self._timeout = timeout
        self._max_retries = max_retries
        self._sleep = sleep

    @property
    def mode(self) -> OutputMode:
        """The output mode the next request with a schema will use."""
        return self.quirks.mode

    def _headers(self) -> dict[str, str]:
        headers = {"accept": "application/json"}
        if self._api_key:
            headers["authorization"] = f"Bearer {self._api_key}"
        return headers

    def _body(self, request: LLMRequest, mode: OutputMode) -> dict[str, Any]:
        messages = request.messages
        if request.schema is not None and mode != "json_schema":
            messages = with_json_instructions(messages, request.schema)
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": m.role, "content": m.content} for m in messages],
            self.quirks.length_field: request.max_tokens,
        }
        if self.quirks.temperature:
            body["temperature"] = request.temperature
        fmt = response_format(request.phase, request.schema, mode)
        if fmt is not None:
            body["response_format"] = fmt
        return body

    async def complete(self, request: LLMRequest) -> LLMResponse:
        url = f"{self.base_url}/chat/completions"
        while True:
            mode: OutputMode = self.quirks.mode if request.schema is not None else "text"
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
            adjusted = adjust(self.quirks, mode, response.status_code, response.text)
            if adjusted is None:
                raise LLMBadRequest(
                    f"{request.phase}: HTTP {response.status_code} from {url}: "
                    f"{error_message(response)}"
                )
            self.quirks = adjusted

    def _parse(
        self, response: httpx.Response, request: LLMRequest, mode: OutputMode
    ) -> LLMResponse:
        try:
            data = response.json()
            text = _content(data)
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
            raise LLMError(
                f"{request.phase}: {response.url} did not answer with a chat.completion object "
                f"({type(exc).__name__}: {exc}); check LLM_BASE_URL"
            ) from exc
        return LLMResponse(
            text=text,
            usage=usage_from(
                data, request, text, prompt="prompt_tokens", answer="completion_tokens"
            ),
            model=str(data.get("model") or self.model),
            mode=mode,
        )

    async def health(self) -> HealthReport:
        listing = await fetch_model_ids(self._http, f"{self.base_url}/models", self._headers())
        return health_report(
            "openai",
            self.base_url,
            self.model,
            status=listing.status,
            models=listing.models,
            error=listing.error,
        )

    async def aclose(self) -> None:
        if self._owns_http:
            await self._http.aclose()
