"""Any OpenAI-compatible chat-completions endpoint: OpenAI, Ollama (/v1), vLLM, LM Studio,
llama.cpp server.

Plain httpx rather than the ``openai`` SDK: the bot needs its own retry policy
(1, 2, 4 s, ``Retry-After``, typed errors) for two endpoints, and the servers
above differ in what they accept. Output modes degrade on a 400 that names the
response format: ``json_schema`` -> ``json_object`` -> ``text`` (schema given in
the prompt instead). Other known refusals adjust the request too (OpenAI's newer
models want ``max_completion_tokens`` and the default temperature). Whatever
worked is remembered for the provider instance. A request with functions offers them
as ``tools`` (``native.py``) and reads the first of ``message.tool_calls``. Prompt
caching is the server's own (OpenAI caches prompt prefixes of 1,024 tokens and more by
itself): the usage's ``prompt_tokens_details.cached_tokens`` says how much of the prompt
it read from the cache. Sending, retries, errors and health are ``HttpChatLLM``'s; this
module builds the body and reads the answer.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

from bot.llm.base import FunctionCall, LLMRequest, OutputMode, Usage
from bot.llm.http_chat import HttpChatLLM
from bot.llm.native import openai_tools
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


def chat_usage(data: dict[str, Any]) -> Usage | None:
    """A chat.completion's ``usage`` (``prompt_tokens`` includes the cached ones)."""
    usage = data.get("usage")
    if not isinstance(usage, dict) or not isinstance(usage.get("prompt_tokens"), int):
        return None
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    return Usage(
        int(usage["prompt_tokens"]),
        int(usage.get("completion_tokens") or 0),
        cached_tokens=cached if isinstance(cached, int) else 0,
    )


def first_tool_call(message: dict[str, Any], names: set[str]) -> FunctionCall | None:
    """The first ``tool_calls`` entry of an assistant message that calls one of ``names``."""
    for entry in message.get("tool_calls") or ():
        function = entry.get("function") if isinstance(entry, dict) else None
        if isinstance(function, dict) and function.get("name") in names:
            arguments = function.get("arguments")
            if not isinstance(arguments, str):  # some servers send the object itself
                arguments = json.dumps(arguments, ensure_ascii=False)
            return FunctionCall(str(function["name"]), arguments)
    return None


class OpenAICompatibleLLM(HttpChatLLM):
    """``LLM`` over POST {base_url}/chat/completions."""

    name = "openai"
    chat_path = "/chat/completions"
    models_path = "/models"
    answer_shape = "a chat.completion object"
    quirks = Quirks()  # what worked, per instance once a refusal taught something

    @property
    def mode(self) -> OutputMode:
        return self.quirks.mode

    def _headers(self) -> dict[str, str]:
        headers = {"accept": "application/json"}
        if self._api_key:
            headers["authorization"] = f"Bearer {self._api_key}"
        return headers

    def _body(self, request: LLMRequest, mode: OutputMode, native: bool) -> dict[str, Any]:
        messages = request.messages
        if request.schema is not None and mode != "json_schema" and not native:
            messages = with_json_instructions(messages, request.schema)
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": m.role, "content": m.content} for m in messages],
            self.quirks.length_field: request.max_tokens,
        }
        if self.quirks.temperature:
            body["temperature"] = request.temperature
        if native:
            body.update(openai_tools(request.functions))
            return body  # the call is the answer: no response format to impose
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

    def _function_call(self, data: Any, request: LLMRequest) -> FunctionCall | None:
        message = data["choices"][0]["message"]
        return first_tool_call(message, {f.name for f in request.functions})

    def _reported_usage(self, data: Any) -> Usage | None:
        return chat_usage(data)

    def _learn(self, mode: OutputMode, status: int, body: str) -> bool:
        adjusted = adjust(self.quirks, mode, status, body)
        if adjusted is None:
            return False
        self.quirks = adjusted
        return True
