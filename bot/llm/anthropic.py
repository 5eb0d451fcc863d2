"""Anthropic's Messages API (POST {base_url}/v1/messages), over plain httpx.

Structured output uses one tool named after the phase, with the phase schema as
its ``input_schema``, forced by ``tool_choice``: the API hands back the document as
already-parsed JSON (``tool_use.input``), for every Claude model. A prefilled
assistant ``{`` would be simpler but newer models refuse prefills. When the
endpoint refuses the tool (a 400 naming it, e.g. a proxy without tool support),
the provider falls back to instructions in the system prompt and remembers that.
A request with functions offers them as the tools instead (``native.py``), and the
``tool_use`` block that calls one is the answer.

Prompt caching: the stable prefix (the tools, then the system prompt) ends with a
``cache_control: {"type": "ephemeral"}`` breakpoint, so later calls of the same phase
read it from the cache (the API ignores it below its minimum length). The usage's
``input_tokens`` excludes the cached part: the prompt is ``input_tokens`` +
``cache_read_input_tokens`` + ``cache_creation_input_tokens``. An endpoint that refuses
``cache_control`` (a proxy) is asked again without it, and that is remembered.
Sending, retries, errors and health are ``HttpChatLLM``'s.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from bot.llm.base import FunctionCall, LLMRequest, Message, OutputMode, Usage
from bot.llm.http_chat import HttpChatLLM
from bot.llm.native import anthropic_tools
from bot.llm.transport import REFUSAL_STATUSES, with_json_instructions

API_VERSION = "2023-06-01"
DEFAULT_BASE_URL = "https://api.anthropic.com"
_TOOL_WORDS = ("tool", "input_schema")
EPHEMERAL = {"type": "ephemeral"}


def api_root(base_url: str) -> str:
    """``base_url`` without a trailing ``/v1`` (the paths below add it)."""
    root = base_url.rstrip("/")
    return root.removesuffix("/v1") if root.endswith("/v1") else root


def tool_refused(status: int, body: str) -> bool:
    """A 400 that blames the forced tool: fall back to instructions."""
    text = body.lower()
    return status in REFUSAL_STATUSES and any(word in text for word in _TOOL_WORDS)


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


def message_usage(data: dict[str, Any]) -> Usage | None:
    """A Messages API ``usage``, with the cached parts counted into the prompt."""
    usage = data.get("usage")
    if not isinstance(usage, dict) or not isinstance(usage.get("input_tokens"), int):
        return None
    read = usage.get("cache_read_input_tokens")
    written = usage.get("cache_creation_input_tokens")
    read = read if isinstance(read, int) else 0
    written = written if isinstance(written, int) else 0
    return Usage(
        int(usage["input_tokens"]) + read + written,
        int(usage.get("output_tokens") or 0),
        cached_tokens=read,
        cache_write_tokens=written,
    )


def mark_cacheable(body: dict[str, Any]) -> None:
    """Put one cache breakpoint at the end of the stable prefix (tools, then system)."""
    system = body.get("system")
    if isinstance(system, str) and system:
        body["system"] = [{"type": "text", "text": system, "cache_control": EPHEMERAL}]
    elif body.get("tools"):
        body["tools"][-1] = {**body["tools"][-1], "cache_control": EPHEMERAL}


def message_body(
    request: LLMRequest, *, model: str, mode: OutputMode, native: bool, prompt_cache: bool
) -> dict[str, Any]:
    """The Messages API request for ``request`` (pure: the benchmark measures it too)."""
    messages = request.messages
    if request.schema is not None and mode == "text" and not native:
        messages = with_json_instructions(messages, request.schema)
    system, turns = split_messages(messages)
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": request.max_tokens,
        "temperature": request.temperature,
        "messages": turns,
    }
    if system:
        body["system"] = system
    if native:
        body.update(anthropic_tools(request.functions))
    elif request.schema is not None and mode == "json_schema":
        name = tool_name(request.phase)
        body["tools"] = [
            {
                "name": name,
                "description": f"Submit the {request.phase} document.",
                "input_schema": request.schema,
            }
        ]
        body["tool_choice"] = {"type": "tool", "name": name}
    if prompt_cache:
        mark_cacheable(body)
    return body


def cached_prefix(body: dict[str, Any]) -> str:
    """The part of ``body`` up to its cache breakpoint (tools, then system), as text: what
    a later request with the same prefix reads from the cache."""
    system = body.get("system")
    text = system[0]["text"] if isinstance(system, list) else ""
    return json.dumps(body.get("tools", []), ensure_ascii=False) + text


def tool_name(phase: str) -> str:
    cleaned = "".join(c if c.isalnum() or c in "_-" else "_" for c in phase)
    return cleaned[:64] or "answer"


class AnthropicLLM(HttpChatLLM):
    """``LLM`` over the Anthropic Messages API."""

    name = "anthropic"
    chat_path = "/v1/messages"
    models_path = "/v1/models?limit=1000"
    answer_shape = "a Messages API object"
    _mode: OutputMode = "json_schema"  # "text" once the endpoint refused the tool
    prompt_cache = True  # False: off by the settings, or refused by the endpoint

    def __init__(self, *, prompt_cache: bool = True, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.prompt_cache = prompt_cache

    @property
    def mode(self) -> OutputMode:
        return self._mode

    @staticmethod
    def _root(base_url: str) -> str:
        return api_root(base_url)

    def _headers(self) -> dict[str, str]:
        headers = {"anthropic-version": API_VERSION, "accept": "application/json"}
        if self._api_key:
            headers["x-api-key"] = self._api_key
        return headers

    def _body(self, request: LLMRequest, mode: OutputMode, native: bool) -> dict[str, Any]:
        return message_body(
            request, model=self.model, mode=mode, native=native, prompt_cache=self.prompt_cache
        )

    def _text(self, data: Any, request: LLMRequest) -> str:
        """The phase document (tool input, as JSON) or the joined text blocks."""
        blocks = data["content"]
        for block in blocks:
            if block.get("type") == "tool_use" and block.get("name") == tool_name(request.phase):
                return json.dumps(block.get("input"), ensure_ascii=False)
        return "".join(str(b["text"]) for b in blocks if b.get("type") == "text")

    def _function_call(self, data: Any, request: LLMRequest) -> FunctionCall | None:
        names = {f.name for f in request.functions}
        for block in data["content"]:
            if block.get("type") == "tool_use" and block.get("name") in names:
                return FunctionCall(str(block["name"]), json.dumps(block.get("input")))
        return None

    def _reported_usage(self, data: Any) -> Usage | None:
        return message_usage(data)

    def _finish_reasons(self, data: Any) -> tuple[str, ...]:
        reason = data.get("stop_reason")
        return (reason,) if isinstance(reason, str) and reason else ()

    def _learn(self, mode: OutputMode, status: int, body: str) -> bool:
        if self.prompt_cache and status in REFUSAL_STATUSES and "cache_control" in body:
            self.prompt_cache = False
            return True
        if mode == "json_schema" and tool_refused(status, body):
            self._mode = "text"
            return True
        return False
