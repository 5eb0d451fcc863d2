"""The open tool loop (``planning.enabled: false``, docs/planning.md#without-planning). Pure.

Without planning, the model calls the task's tools one at a time until it calls
``finish``; each call is a step of an open plan that grows as it goes, so the status
comment's checklist shows the tool calls, and the record, the delivery and the
completion check read it like any plan. ``open_plan`` starts it from the issue,
``with_step`` adds a call, ``next_step`` reads the model's ``execution`` answer: the
next step, the finish, or a step that failed because the answer was unusable.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from bot.record.plan import Goal, PlanDocument, PlannedAction, Subtask
from bot.text import clip

FINISH = "finish"
OPEN_TASK = "open_loop"  # the execution document's current_task in the open loop
STEP_PREFIX = "step_"
STEPS_PER_SUBTASK = 3  # the open loop makes at most 3 x planning.max_subtasks calls
PLAN_ONLY_REFUSED = (
    "`/agent plan` needs planning, which is switched off here (planning.enabled: false)"
)
_DESCRIBED_BY = ("path", "source", "argv", "url", "query", "pattern", "paths")


@dataclass(frozen=True, slots=True)
class Offered:
    """A function offered to the model that is no tool of the registry (``finish``)."""

    name: str
    purpose: str
    schema: dict[str, Any] = field(default_factory=dict)


FINISH_TOOL = Offered(
    FINISH,
    "Call when the work is done: your changes are then committed, checked by the project's "
    "lint and tests, and proposed as a change request.",
    {"type": "object", "properties": {"summary": {"type": "string"}}},
)


def max_steps(max_subtasks: int) -> int:
    return STEPS_PER_SUBTASK * max_subtasks


def open_plan(title: str, body: str = "") -> PlanDocument:
    """The open loop's plan before its first step: the issue as the goal, no step yet."""
    objective = clip(" ".join(title.split()), 200, note="...") or "the issue"
    return PlanDocument(
        goal=Goal(objective, context=clip(body, 1000, note="...")),
        reasoning="planning is switched off: one open tool loop",
        subtasks=(),
        execution_order=(),
        actions=(),
    )


def describe(tool: str, arguments: Mapping[str, Any]) -> str:
    """A step as its checklist line: the tool and what it works on."""
    for key in _DESCRIBED_BY:
        value = arguments.get(key)
        if isinstance(value, list):
            value = " ".join(str(v) for v in value)
        if isinstance(value, str) and value.strip():
            return f"{tool} {clip(' '.join(value.split()), 60, note='...')}"
    return tool


def with_step(plan: PlanDocument, action: PlannedAction) -> PlanDocument:
    """``plan`` with one more step, the subtask its checklist line."""
    line = describe(action.tool, action.arguments or {})
    return replace(
        plan,
        subtasks=(*plan.subtasks, Subtask(action.task_id, line, required_tools=(action.tool,))),
        execution_order=(*plan.execution_order, action.task_id),
        actions=(*plan.actions, action),
    )


@dataclass(frozen=True, slots=True)
class Step:
    """The model's next step: a call (``action``), the finish, or why there is none."""

    action: PlannedAction | None = None
    finished: bool = False
    error: str = ""


def next_step(data: Mapping[str, Any] | None, error: str | None, number: int) -> Step:
    """The step the model's ``execution`` answer asks for (``data`` None: ``error``)."""
    key = f"{STEP_PREFIX}{number}"
    if data is None:
        reason = f"the model gave no valid execution document: {error or 'no answer'}"
        return Step(PlannedAction(key, key, "", purpose=reason), error=reason)
    call = data["function_call"]
    name = str(call["name"])
    if name == FINISH:
        return Step(finished=True)
    arguments = dict(call["arguments"])
    comment = str(data.get("comment") or "")
    return Step(PlannedAction(key, key, name, purpose=comment, arguments=arguments))
