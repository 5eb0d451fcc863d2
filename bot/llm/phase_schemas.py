"""The JSON schemas of the four phase documents of the planning specification.

``phase_schema(phase)`` is the JSON schema of the ``planning``, ``execution``,
``reflection`` or ``completion`` document (docs/planning.md#model-documents). Schemas
are lenient on extra keys and on fields a model often leaves out (an action needs only
``task_id`` and ``tool``; a reflection may say ``action_id``; a completion that
``requires_human_intervention`` needs no ``done``),
and strict on required keys and on types. ``validate_phase`` lists a document's problems.
"""

from __future__ import annotations

import copy
import functools
from typing import Any

import jsonschema

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
