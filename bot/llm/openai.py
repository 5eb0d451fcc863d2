"""Any OpenAI-compatible chat-completions endpoint: OpenAI, Ollama (/v1), vLLM, LM Studio,
llama.cpp server.

Plain httpx rather than the ``openai`` SDK: the bot needs its own retry policy
(1, 2, 4 s, ``Retry-After``, typed errors) for two endpoints, and the servers
above differ in what they accept. Output modes degrade on a 400 that names the
response format: ``json_schema`` -> ``json_object`` -> ``text`` (schema given in
the prompt instead). Other known refusals adjust the request too (OpenAI's newer
models want ``max_completion_tokens`` and the default temperature). Whatever
worked is remembered for the provider instance. Sending, retries, errors, usage
and health are ``HttpChatLLM``'s; this module builds the body and reads the answer.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from bot.llm.base import LLMRequest, OutputMode
from bot.llm.http_chat import HttpChatLLM
from bot.llm.transport import REFUSAL_STATUSES, with_json_instructions

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
    if status not in REFUSAL_STATUSES:
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


class OpenAICompatibleLLM(HttpChatLLM):
    """``LLM`` over POST {base_url}/chat/completions."""

    name = "openai"
    chat_path = "/chat/completions"
    models_path = "/models"
    answer_shape = "a chat.completion object"
    usage_keys = ("prompt_tokens", "completion_tokens")
    quirks = Quirks()  # what worked, per instance once a refusal taught something

    @property
    def mode(self) -> OutputMode:
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

    def _text(self, data: Any, request: LLMRequest) -> str:
        """The text of the first choice of a chat.completion object."""
        message = data["choices"][0]["message"]
        content = message.get("content")
        if content is None:
            content = message.get("refusal") or ""
        if not isinstance(content, str):
            raise TypeError("message.content is not a string")
        return content

    def _learn(self, mode: OutputMode, status: int, body: str) -> bool:
        adjusted = adjust(self.quirks, mode, status, body)
        if adjusted is None:
            return False
        self.quirks = adjusted
        return True
