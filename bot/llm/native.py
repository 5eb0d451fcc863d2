"""Native function calling: whether a request offers its functions the endpoint's own way.

Both APIs let the model answer with a call of one of the request's functions (OpenAI
``tools`` / ``tool_calls``, Anthropic ``tools`` / ``tool_use``), which current models are
trained for. ``NativeTools`` keeps the setting (``llm.native_tools``) and what the
endpoint taught: ``auto`` offers the functions until the endpoint refuses a request that
carried them (a 4xx, or a 500 whose message rejects a tools field: many self-hosted
servers need a flag or a model that supports tools), then asks for the JSON document
instead and remembers; ``on`` never falls back (the refusal goes to the operator);
``off`` never offers them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bot.llm.base import FunctionSpec, LLMRequest, NativeTools
from bot.llm.transport import REFUSAL_STATUSES

_TOOL_WORDS = ("tool", "function")


def refuses_tools(status: int, body: str) -> bool:
    """A refusal that blames the tools of the request (its own words, not a guess)."""
    text = body.lower()
    return status in REFUSAL_STATUSES and any(word in text for word in _TOOL_WORDS)


@dataclass
class NativeToolsPolicy:
    setting: NativeTools = "auto"
    refused: bool = False  # the endpoint refused a request with tools (auto only)

    def offers(self, request: LLMRequest) -> bool:
        """Whether ``request`` goes out with its functions as native tools."""
        return bool(request.functions) and self.setting != "off" and not self.refused

    def learn(self, offered: bool, status: int, body: str) -> bool:
        """After a refusal: True when dropping the tools is worth asking again."""
        if not offered or self.setting != "auto" or not refuses_tools(status, body):
            return False
        self.refused = True
        return True


def openai_tools(functions: tuple[FunctionSpec, ...]) -> dict[str, Any]:
    """The ``tools`` and ``tool_choice`` of a chat-completions request: one function is
    named, several must be called one of (``required``)."""
    tools = [
        {
            "type": "function",
            "function": {"name": f.name, "description": f.description, "parameters": f.parameters},
        }
        for f in functions
    ]
    choice: Any = "required"
    if len(functions) == 1:
        choice = {"type": "function", "function": {"name": functions[0].name}}
    return {"tools": tools, "tool_choice": choice}


def anthropic_tools(functions: tuple[FunctionSpec, ...]) -> dict[str, Any]:
    """The ``tools`` and ``tool_choice`` of a Messages API request."""
    tools = [
        {"name": f.name, "description": f.description, "input_schema": f.parameters}
        for f in functions
    ]
    choice: dict[str, Any] = {"type": "any"}
    if len(functions) == 1:
        choice = {"type": "tool", "name": functions[0].name}
    return {"tools": tools, "tool_choice": choice}
