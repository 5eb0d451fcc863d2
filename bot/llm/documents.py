"""The four phase documents of the planning specification, and how to get them.

``phase_schema(phase)`` is the JSON schema of the ``planning``, ``execution``,
``reflection`` or ``completion`` document (docs/planning.md#model-documents). Schemas
are lenient on extra keys and on fields a model often leaves out (an action needs only
``task_id`` and ``tool``; a reflection may say ``action_id``; a completion that
``requires_human_intervention`` needs no ``done``),
and strict on required keys and on types.

``ask_phase`` asks the model for one document: parse (fences and prose around
the object are ignored, broken JSON is repaired), validate, and re-ask once
with the errors when the answer is unusable. Garbage never raises; an
unreachable or refusing endpoint does (``LLMUnavailable`` / ``LLMBadRequest``).
"""

from __future__ import annotations

import copy
import functools
import itertools
import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import json_repair
import jsonschema

from bot.llm.base import LLM, FunctionCall, FunctionSpec, LLMRequest, Message, Usage
from bot.text import clip

PHASES = ("planning", "execution", "reflection", "completion")
MAX_ERRORS = 20
_MAX_ERROR_CHARS = 240

_STR: dict[str, Any] = {"type": "string"}
_INT: dict[str, Any] = {"type": "integer", "minimum": 0}
_BOOL: dict[str, Any] = {"type": "boolean"}


def _list(items: dict[str, Any] | None = None, *, min_items: int = 0) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "array", "items": items if items is not None else _STR}
    if min_items:
        schema["minItems"] = min_items
    return schema


def _obj(required: str = "", /, **properties: Any) -> dict[str, Any]:
    """An object schema; ``required`` lists the required keys, separated by spaces."""
    return {"type": "object", "required": required.split(), "properties": properties}


def _action_plan() -> dict[str, Any]:
    action = _obj(
        "task_id tool",
        task_id=_STR,
        action_type=_STR,
        tool=_STR,
        arguments={"type": "object"},
        purpose=_STR,
        expected_outcome=_STR,
        fallback_strategy=_STR,
        parallel_group=_INT,
        can_parallelize=_BOOL,
        dependencies=_list(),
    )
    return _obj("actions", execution_order=_list(), actions=_list(action, min_items=1))


def _planning() -> dict[str, Any]:
    subtask = _obj(
        "id description dependencies estimated_complexity required_tools",
        id=_STR,
        description=_STR,
        dependencies=_list(),
        estimated_complexity={"enum": ["low", "medium", "high"]},
        required_tools=_list(),
    )
    error = _obj(
        "type message",
        type={"enum": ["unclear_goal", "decomposition_failed"]},
        message=_STR,
        clarification_needed=_list(),
        partial_plan=_obj(
            feasible_subtasks={"type": "array"},
            infeasible_subtasks={"type": "array"},
            alternative_approaches={"type": "array"},
        ),
    )
    schema = _obj(
        "phase comment",
        phase={"const": "planning"},
        goal_understanding=_obj(
            "main_objective success_criteria constraints context",
            main_objective=_STR,
            success_criteria=_list(),
            constraints=_list(),
            context=_STR,
        ),
        task_decomposition=_obj(
            "reasoning subtasks", reasoning=_STR, subtasks=_list(subtask, min_items=1)
        ),
        action_plan=_action_plan(),
        error=error,
        comment=_STR,
    )
    schema["if"] = {"required": ["error"]}
    schema["else"] = {"required": ["goal_understanding", "task_decomposition", "action_plan"]}
    return schema


def _execution() -> dict[str, Any]:
    return _obj(
        "phase current_task function_call comment",
        phase={"const": "execution"},
        current_task=_STR,
        function_call=_obj("name arguments", name=_STR, arguments={"type": "object"}),
        comment=_STR,
    )


def _reflection() -> dict[str, Any]:
    reflection = _obj(
        "status plan_revision_needed",
        action_evaluated=_STR,
        action_id=_STR,
        status={"enum": ["success", "failure", "partial"]},
        evaluation=_STR,
        alignment_with_plan=_STR,
        issues_identified=_list(),
        error=_STR,
        root_cause_analysis=_STR,
        plan_revision_needed=_BOOL,
    )
    reflection["anyOf"] = [{"required": ["action_evaluated"]}, {"required": ["action_id"]}]
    revision = _obj(
        "reason changes",
        reason=_STR,
        changes=_list({"type": ["string", "object"]}),
        updated_action_plan=_action_plan(),
    )
    schema = _obj(
        "phase reflection comment",
        phase={"const": "reflection"},
        reflection=reflection,
        plan_revision=revision,
        comment=_STR,
    )
    revising = {
        "required": ["plan_revision_needed"],
        "properties": {"plan_revision_needed": {"const": True}},
    }
    schema["if"] = {"required": ["reflection"], "properties": {"reflection": revising}}
    schema["then"] = {"required": ["plan_revision"]}
    return schema


def _completion() -> dict[str, Any]:
    summary = _obj(
        "goal_achieved tasks_completed tasks_failed",
        goal_achieved=_BOOL,
        tasks_completed=_INT,
        tasks_failed=_INT,
        key_outcomes=_list(),
        lessons_learned=_list(),
        revision_attempts=_INT,
        reason=_STR,
        current_state=_STR,
        recommendations=_list(),
        criteria=_list(_obj("criterion evidence", criterion=_STR, evidence=_STR)),
        # a review round: one answer per thread (T1, T2, ...)
        threads=_list(_obj("thread reply", thread=_STR, changed=_BOOL, reply=_STR)),
    )
    schema = _obj(
        "phase summary comment",
        phase={"const": "completion"},
        status={"enum": ["completed", "requires_human_intervention"]},
        summary=summary,
        done=_BOOL,
        comment=_STR,
    )
    intervention = {"status": {"const": "requires_human_intervention"}}
    schema["if"] = {"required": ["status"], "properties": intervention}
    schema["else"] = {
        "required": ["done"],
        "properties": {"summary": {"required": ["key_outcomes", "lessons_learned"]}},
    }
    return schema


_BUILDERS = {
    "planning": _planning,
    "execution": _execution,
    "reflection": _reflection,
    "completion": _completion,
}


def _check_phase(phase: str) -> None:
    if phase not in _BUILDERS:
        raise ValueError(f"unknown phase {phase!r} (expected one of: {', '.join(PHASES)})")


@functools.cache
def _validator(phase: str) -> jsonschema.Draft202012Validator:
    schema = _BUILDERS[phase]()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def phase_schema(phase: str) -> dict[str, Any]:
    """The JSON schema of ``phase``'s document (a fresh copy)."""
    _check_phase(phase)
    return copy.deepcopy(_validator(phase).schema)


def _where(error: jsonschema.ValidationError) -> str:
    path = "$"
    for part in error.absolute_path:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


def validate_phase(phase: str, doc: object) -> list[str]:
    """Readable problems with ``doc`` as a ``phase`` document; empty when valid."""
    _check_phase(phase)
    errors = sorted(_validator(phase).iter_errors(doc), key=lambda e: [str(p) for p in e.path])
    lines = []
    for error in errors:
        message = clip(error.message, _MAX_ERROR_CHARS, note="...")
        lines.append(f"{_where(error)}: {message}")
    if len(lines) > MAX_ERRORS:
        lines = [*lines[:MAX_ERRORS], f"... and {len(lines) - MAX_ERRORS} more"]
    return lines


# --- asking -----------------------------------------------------------------------------

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
