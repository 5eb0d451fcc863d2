"""The phase documents of the planning specification, and how to get them.

``ask_phase`` asks the model for one document: parse (fences and prose around
the object are ignored, broken JSON is repaired), validate against the phase's schema
(``bot.llm.phase_schemas``), and re-ask once with the errors when the answer is
unusable. Garbage never raises; an unreachable or refusing endpoint does
(``LLMUnavailable`` / ``LLMBadRequest``).
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import json_repair

from bot.llm.base import LLM, FunctionCall, FunctionSpec, LLMRequest, Message, Usage
from bot.llm.phase_schemas import phase_schema, validate_phase

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\n?(.*?)```", re.DOTALL)
_MAX_STARTS = 50
_MAX_CANDIDATES = 8
REASK = (
    "Your previous answer is not a valid `{phase}` document:\n{errors}\n"
    "Answer again with the complete, corrected JSON object only."
)


def _regions(text: str) -> list[str]:
    """Where the JSON object may be: inside code fences first, then the whole text."""
    text = _THINK.sub("", text)
    return [*(m.group(1) for m in _FENCE.finditer(text)), text]


def _strict(text: str, start: int) -> tuple[dict[str, Any] | None, int]:
    """The JSON object starting at ``start`` and where it ends, or (None, start)."""
    try:
        value, end = json.JSONDecoder().raw_decode(text, start)
    except ValueError:
        return None, start
    return (value, end) if isinstance(value, dict) else (None, start)


def _repair(text: str) -> dict[str, Any] | None:
    start = text.find("{")
    if start < 0:
        return None
    try:
        value = json_repair.loads(text[start:])
    except Exception:  # the repairer's failures mean: not JSON
        return None
    return value if isinstance(value, dict) and value else None


def _later_objects(text: str) -> Iterator[dict[str, Any]]:
    """Objects that start after prose with braces in it (never ones nested in another)."""
    done = text.find("{") + 1
    for start in [i for i, char in enumerate(text) if char == "{"][1:_MAX_STARTS]:
        if start < done:
            continue
        value, done = _strict(text, start)
        if value is not None:
            yield value


def json_candidates(text: str) -> Iterator[dict[str, Any]]:
    """JSON objects a model's answer may mean, most likely first.

    Strictly parsed objects at the first brace (in fences, then anywhere), then
    repaired ones (quotes, trailing commas, truncation), then objects after prose.
    """
    regions = [region for region in _regions(text) if "{" in region]
    for region in regions:
        value, _end = _strict(region, region.find("{"))
        if value is not None:
            yield value
    for region in regions:
        repaired = _repair(region)
        if repaired is not None:
            yield repaired
    if regions:
        yield from _later_objects(regions[-1])


def extract_json(text: str) -> dict[str, Any] | None:
    """The most likely JSON object in a model's answer, or None."""
    return next(json_candidates(text), None)


def parse_answer(phase: str, text: str) -> tuple[dict[str, Any] | None, list[str]]:
    """(document, []) when ``text`` holds a valid ``phase`` document, else (None, errors).

    The errors are those of the most likely object in the answer.
    """
    first_errors: list[str] | None = None
    for doc in itertools.islice(json_candidates(text), _MAX_CANDIDATES):
        errors = validate_phase(phase, doc)
        if not errors:
            return doc, []
        first_errors = errors if first_errors is None else first_errors
    if first_errors is None:
        return None, ["the answer contains no JSON object (it could not be parsed or repaired)"]
    return None, first_errors


@dataclass
class PhaseAnswer:
    phase: str
    data: dict[str, Any] | None
    error: str | None
    usage: Usage
    calls: int
    raw: str


class CallAsDocument(Protocol):
    """Natively offered functions, and how a call of one becomes the phase document."""

    @property
    def functions(self) -> tuple[FunctionSpec, ...]: ...

    def answer(self, call: FunctionCall, comment: str) -> str: ...


async def ask_phase(
    llm: LLM,
    phase: str,
    messages: Sequence[Message],
    *,
    max_tokens: int,
    temperature: float = 0.2,
    native: CallAsDocument | None = None,
) -> PhaseAnswer:
    """Ask for a ``phase`` document; re-ask once with the validation errors if needed.
    With ``native``, its functions are offered too, and a native call is read as the
    document it stands for (validated like any other answer); a model that answered in text
    instead is re-asked for the document the usual way, without functions."""
    schema = phase_schema(phase)
    conversation = tuple(messages)
    functions = native.functions if native is not None else ()
    usage = Usage()
    errors: list[str] = []
    raw = ""
    for call in (1, 2):
        request = LLMRequest(phase, conversation, schema, max_tokens, temperature, functions)
        response = await llm.complete(request)
        usage, raw = usage + response.usage, response.text
        if native is not None and response.function_call is not None:
            raw = native.answer(response.function_call, response.text)
        elif functions:  # answered in text although it could call: re-ask for the document
            functions = ()
        doc, errors = parse_answer(phase, raw)
        if doc is not None:
            return PhaseAnswer(phase, doc, None, usage, call, raw)
        listed = "\n".join(f"- {line}" for line in errors)
        conversation = (
            *conversation,
            Message("assistant", raw if raw.strip() else "(empty answer)"),
            Message("user", REASK.format(phase=phase, errors=listed)),
        )
    error = f"no valid {phase} document after 2 answers: " + "; ".join(errors[:5])
    return PhaseAnswer(phase, None, error, usage, 2, raw)
