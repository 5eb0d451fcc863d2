"""The OpenAI-compatible chat API's wire format, pure: what an endpoint's refusals teach
(``Quirks``, ``adjust``), the ``response_format`` of a dialect, and the parts of an answer
the provider reads (a JSON document, the usage, the first tool call). ``openai.py`` sends
and receives with these."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

from bot.llm.base import FunctionCall, Usage
from bot.llm.dialect import Dialect, ladder, next_dialect
from bot.llm.server_kind import ServerKind
from bot.llm.transport import REFUSAL_STATUSES

# Words of an error body that blame the structured-output part of the request.
_FORMAT_WORDS = (
    "response_format", "json_schema", "json_object", "guided_json", "guided", "grammar",
    "format", "schema", "unsupported", "not supported",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Quirks:
    """What this endpoint accepts: its dialect ladder and the rung in use, and what its
    refusals taught about other fields."""

    dialect: Dialect = Dialect.JSON_SCHEMA
    rungs: tuple[Dialect, ...] = ladder(ServerKind.UNKNOWN)
    length_field: str = "max_tokens"
    temperature: bool = True


def adjust(quirks: Quirks, used: Dialect, status: int, body: str) -> Quirks | None:
    """The request shape to try after a refusal, or None when nothing is left to change.

    ``used`` is the dialect of the refused request; ``body`` its error body. A 500
    reaches this only when it rejects the request's content (see ``transport.send``).
    """
    if used is Dialect.OLLAMA_FORMAT and status in (404, 405):  # no native API after all
        lower = next_dialect(quirks.rungs, used, quirks.dialect)
        return dataclasses.replace(quirks, dialect=lower) if lower is not None else None
    if status not in REFUSAL_STATUSES:
        return None
    text = body.lower()
    if quirks.length_field == "max_tokens" and "max_completion_tokens" in text:
        return dataclasses.replace(quirks, length_field="max_completion_tokens")
    if quirks.temperature and "temperature" in text:
        return dataclasses.replace(quirks, temperature=False)
    if used is not Dialect.INSTRUCTIONS and any(word in text for word in _FORMAT_WORDS):
        lower = next_dialect(quirks.rungs, used, quirks.dialect)
        return dataclasses.replace(quirks, dialect=lower) if lower is not None else None
    return None


def response_format(phase: str, schema: dict[str, Any] | None, dialect: Dialect) -> Any:
    if dialect is Dialect.JSON_SCHEMA and schema is not None:
        return {
            "type": "json_schema",
            "json_schema": {"name": phase, "schema": schema, "strict": False},
        }
    if dialect is Dialect.JSON_OBJECT:
        return {"type": "json_object"}
    return None


def is_document(text: str) -> bool:
    """Whether a probe's answer is a JSON object (the dialect held the model to it)."""
    try:
        return isinstance(json.loads(text), dict)
    except ValueError:
        return False


def chat_usage(data: dict[str, Any]) -> Usage | None:
    """A chat.completion's ``usage`` (``prompt_tokens`` includes the cached ones), or the
    counts of Ollama's native chat answer (``prompt_eval_count``, ``eval_count``)."""
    if isinstance(data.get("prompt_eval_count"), int):
        return Usage(int(data["prompt_eval_count"]), int(data.get("eval_count") or 0))
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
