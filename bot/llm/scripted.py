"""A deterministic LLM that replays a script: for tests, demos and benchmarks.

Select it from configuration with ``llm.provider: scripted`` and
``llm.script_path: path/to/script.yaml`` (YAML or JSON). The script is a list;
each item is one response, in order:

- a mapping: a phase document, returned as JSON text. If it has a ``phase`` key,
  the request must be for that phase, otherwise ``LLMError`` names both;
- a string: returned as is (to test garbage, fences, prose);
- ``{"response": <mapping or string>, "phase": <optional>}``: the explicit form,
  for answers whose own ``phase`` should not be asserted (e.g. a wrong document);
- ``{"error": "unavailable" | "bad_request", "message": <optional>, "phase": <optional>}``:
  raise ``LLMUnavailable`` / ``LLMBadRequest``.

Usage is counted locally (``bot.llm.tokens``) so budgets and benchmarks work.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from bot.config import ConfigError
from bot.llm.base import (
    HealthReport,
    LLMBadRequest,
    LLMError,
    LLMRequest,
    LLMResponse,
    LLMUnavailable,
    OutputMode,
    Usage,
)
from bot.llm.tokens import count_messages, count_tokens

_ERRORS: dict[str, type[LLMError]] = {"unavailable": LLMUnavailable, "bad_request": LLMBadRequest}
_EXPLICIT_KEYS = frozenset({"response", "phase"})
_ERROR_KEYS = frozenset({"error", "message", "phase"})


@dataclass(frozen=True, slots=True)
class ScriptItem:
    """One scripted step: text to return or an error kind to raise."""

    text: str | None
    phase: str | None = None
    error: str | None = None
    message: str = ""


def _phase_of(value: object, where: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise ConfigError(f"{where}: 'phase' must be a string")


def parse_item(raw: object, where: str) -> ScriptItem:
    """Turn one script entry into a ``ScriptItem``; ``where`` names it in errors."""
    if isinstance(raw, str):
        return ScriptItem(text=raw)
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected a mapping or a string, got {type(raw).__name__}")
    if isinstance(raw.get("error"), str) and set(raw) <= _ERROR_KEYS:
        if raw["error"] not in _ERRORS:
            raise ConfigError(f"{where}: error must be 'unavailable' or 'bad_request'")
        message = str(raw.get("message") or f"scripted {raw['error']} error")
        return ScriptItem(None, _phase_of(raw.get("phase"), where), raw["error"], message)
    if "response" in raw and set(raw) <= _EXPLICIT_KEYS:
        response = raw["response"]
        if not isinstance(response, str | dict):
            raise ConfigError(f"{where}: 'response' must be a mapping or a string")
        text = response if isinstance(response, str) else json.dumps(response, ensure_ascii=False)
        return ScriptItem(text, _phase_of(raw.get("phase"), where))
    phase = raw.get("phase")
    return ScriptItem(
        json.dumps(raw, ensure_ascii=False), phase if isinstance(phase, str) else None
    )


def load_script(path: Path) -> list[object]:
    """The list of entries in a YAML (``.yaml``/``.yml``/other) or JSON (``.json``) file."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the LLM script: {exc.strerror}") from None
    try:
        data = json.loads(text) if path.suffix.lower() == ".json" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: the LLM script is not valid: {exc}") from None
    if not isinstance(data, list):
        raise ConfigError(f"{path}: the LLM script must be a list of responses")
    return data


class ScriptedLLM:
    """``LLM`` that replays responses in order and records every request."""

    def __init__(self, script: str | Path | Sequence[object], *, skip: int = 0) -> None:
        """``skip``: the answers a run before used (a task that goes on in another
        process, as a queued evaluation task does, goes on in its script)."""
        self.name = "scripted"
        self.model = "scripted"
        if isinstance(script, str | Path):
            self.source = str(script)
            entries = load_script(Path(script))
        else:
            self.source = "<inline script>"
            entries = list(script)
        self.items = [
            parse_item(entry, f"{self.source}: item {index + 1}")
            for index, entry in enumerate(entries)
        ]
        self.requests: list[LLMRequest] = []
        self.skipped = skip

    async def complete(self, request: LLMRequest) -> LLMResponse:
        position = len(self.requests) + self.skipped
        self.requests.append(request)
        if position >= len(self.items):
            raise LLMError(f"script exhausted after {len(self.items)} responses")
        item = self.items[position]
        if item.phase is not None and item.phase != request.phase:
            raise LLMError(
                f"{self.source}: response {position + 1} expects phase {item.phase!r} "
                f"but the request is for phase {request.phase!r}"
            )
        if item.error is not None:
            raise _ERRORS[item.error](item.message)
        text = item.text or ""
        usage = Usage(count_messages(request.messages), count_tokens(text))
        mode: OutputMode = "json_schema" if request.schema is not None else "text"
        return LLMResponse(
            text=text, usage=usage, model="scripted", mode=mode, finish_reasons=("stop",)
        )

    async def health(self) -> HealthReport:
        return HealthReport(
            reachable=True,
            provider="scripted",
            base_url=self.source,
            model="scripted",
            models=("scripted",),
            model_available=True,
        )

    async def aclose(self) -> None:
        return None
