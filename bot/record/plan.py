"""The plan model (docs/planning.md#planning). Pure.

A ``PlanDocument`` is the planning answer (goal understanding, task decomposition,
action plan) in typed form. The document as the model gave it, or why it holds no plan,
is ``planning_answer.py``'s; validation and scheduling are ``plan_rules.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any, Protocol


class Allowed(Protocol):
    """What the tool policy says of a tool (``bot.tools.policy.PolicyDecision``)."""

    @property
    def allowed(self) -> bool: ...

    @property
    def reason(self) -> str: ...


ToolCheck = Callable[[str], Allowed]


class Complexity(StrEnum):
    """A task's size in tokens (docs/planning.md#plan-detail)."""

    SIMPLE = "simple"
    MODERATE = "moderate"
    COMPLEX = "complex"


class PlanFormatError(ValueError):
    """A planning document lacks the structure docs/planning.md#model-documents gives."""


@dataclass(frozen=True, slots=True)
class Goal:
    main_objective: str
    success_criteria: tuple[str, ...] = ()
    constraints: tuple[str, ...] = ()
    context: str = ""


@dataclass(frozen=True, slots=True)
class Subtask:
    id: str
    description: str
    dependencies: tuple[str, ...] = ()
    estimated_complexity: str = "medium"
    required_tools: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class PlannedAction:
    key: str
    task_id: str
    tool: str
    purpose: str = ""
    expected_outcome: str = ""
    fallback_strategy: str = ""
    arguments: dict[str, Any] | None = None
    parallel_group: int | None = None
    dependencies: tuple[str, ...] = ()
    action_type: str = "tool_call"


@dataclass(frozen=True, slots=True)
class PlanDocument:
    goal: Goal
    reasoning: str
    subtasks: tuple[Subtask, ...]
    execution_order: tuple[str, ...]
    actions: tuple[PlannedAction, ...]
    comment: str = ""
    revision: int = 0
    done_tasks: frozenset[str] = field(default=frozenset())

    def subtask(self, task_id: str) -> Subtask | None:
        return next((s for s in self.subtasks if s.id == task_id), None)

    def action(self, key: str) -> PlannedAction | None:
        return next((a for a in self.actions if a.key == key), None)

    def to_document(self) -> dict[str, Any]:
        """The planning document's JSON shape (also the checkpoint and cache form)."""
        return {
            "goal_understanding": {
                "main_objective": self.goal.main_objective,
                "success_criteria": list(self.goal.success_criteria),
                "constraints": list(self.goal.constraints),
                "context": self.goal.context,
            },
            "task_decomposition": {
                "reasoning": self.reasoning,
                "subtasks": [_subtask_dict(s) for s in self.subtasks],
            },
            "action_plan": action_plan_dict(self),
            "comment": self.comment,
            "revision": self.revision,
            "done_tasks": sorted(self.done_tasks),
        }


def _subtask_dict(subtask: Subtask) -> dict[str, Any]:
    return {
        "id": subtask.id,
        "description": subtask.description,
        "dependencies": list(subtask.dependencies),
        "estimated_complexity": subtask.estimated_complexity,
        "required_tools": list(subtask.required_tools),
    }


def _action_dict(action: PlannedAction) -> dict[str, Any]:
    out: dict[str, Any] = {
        "task_id": action.task_id,
        "action_type": action.action_type,
        "tool": action.tool,
        "purpose": action.purpose,
        "expected_outcome": action.expected_outcome,
        "fallback_strategy": action.fallback_strategy,
    }
    if action.arguments is not None:
        out["arguments"] = action.arguments
    if action.parallel_group is not None:
        out["parallel_group"] = action.parallel_group
    if action.dependencies:
        out["dependencies"] = list(action.dependencies)
    return out


def action_plan_dict(plan: PlanDocument) -> dict[str, Any]:
    return {
        "execution_order": list(plan.execution_order),
        "actions": [_action_dict(a) for a in plan.actions],
    }


# --- parsing -----------------------------------------------------------------------------------


def _mapping(doc: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    value = doc.get(name)
    if not isinstance(value, Mapping):
        raise PlanFormatError(f"{name} is missing or not an object")
    return value


def _strings(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if not isinstance(value, list):
        raise PlanFormatError(f"expected a list of strings, got {type(value).__name__}")
    return tuple(str(v) for v in value)


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else str(value)


def parse_goal(doc: Mapping[str, Any]) -> Goal:
    goal = _mapping(doc, "goal_understanding")
    objective = _text(goal.get("main_objective")).strip()
    if not objective:
        raise PlanFormatError("goal_understanding.main_objective is empty")
    return Goal(
        main_objective=objective,
        success_criteria=_strings(goal.get("success_criteria")),
        constraints=_strings(goal.get("constraints")),
        context=_text(goal.get("context")),
    )


def parse_subtasks(doc: Mapping[str, Any]) -> tuple[str, tuple[Subtask, ...]]:
    decomposition = _mapping(doc, "task_decomposition")
    raw = decomposition.get("subtasks")
    if not isinstance(raw, list):
        raise PlanFormatError("task_decomposition.subtasks is missing or not a list")
    subtasks = []
    for index, item in enumerate(raw):
        if not isinstance(item, Mapping) or not _text(item.get("id")).strip():
            raise PlanFormatError(f"subtask #{index + 1} has no id")
        subtasks.append(
            Subtask(
                id=_text(item["id"]).strip(),
                description=_text(item.get("description")),
                dependencies=_strings(item.get("dependencies")),
                estimated_complexity=_text(item.get("estimated_complexity")) or "medium",
                required_tools=_strings(item.get("required_tools")),
            )
        )
    return _text(decomposition.get("reasoning")), tuple(subtasks)


def _group(value: Any) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        raise PlanFormatError(f"parallel_group must be a number, got {value!r}") from None


def parse_actions(
    action_plan: Mapping[str, Any], revision: int
) -> tuple[tuple[str, ...], tuple[PlannedAction, ...]]:
    raw = action_plan.get("actions")
    if not isinstance(raw, list):
        raise PlanFormatError("action_plan.actions is missing or not a list")
    seen: dict[str, int] = {}
    actions = []
    for index, item in enumerate(raw):
        if not isinstance(item, Mapping):
            raise PlanFormatError(f"action #{index + 1} is not an object")
        task_id = _text(item.get("task_id")).strip()
        seen[task_id] = seen.get(task_id, 0) + 1
        key = task_id if revision == 0 else f"r{revision}/{task_id}"
        if seen[task_id] > 1:
            key = f"{key}.{seen[task_id]}"
        arguments = item.get("arguments")
        actions.append(
            PlannedAction(
                key=key,
                task_id=task_id,
                tool=_text(item.get("tool")).strip(),
                purpose=_text(item.get("purpose")),
                expected_outcome=_text(item.get("expected_outcome")),
                fallback_strategy=_text(item.get("fallback_strategy")),
                arguments=dict(arguments) if isinstance(arguments, Mapping) else None,
                parallel_group=_group(item.get("parallel_group")),
                dependencies=_strings(item.get("dependencies")),
                action_type=_text(item.get("action_type")) or "tool_call",
            )
        )
    return _strings(action_plan.get("execution_order")), tuple(actions)


def parse_plan(
    doc: Mapping[str, Any], *, revision: int = 0, done_tasks: Iterable[str] = ()
) -> PlanDocument:
    """A planning document (the LLM answer, a checkpoint or a cache entry) as a plan."""
    goal = parse_goal(doc)
    reasoning, subtasks = parse_subtasks(doc)
    order, actions = parse_actions(_mapping(doc, "action_plan"), revision)
    return PlanDocument(
        goal=goal,
        reasoning=reasoning,
        subtasks=subtasks,
        execution_order=order,
        actions=actions,
        comment=_text(doc.get("comment")),
        revision=revision,
        done_tasks=frozenset(done_tasks) - {a.task_id for a in actions},
    )


def revised_plan(
    current: PlanDocument,
    updated: Mapping[str, Any],
    *,
    revision: int,
    done_tasks: Iterable[str],
) -> PlanDocument:
    """``current`` with a new action plan (and subtasks, when the revision gives them)."""
    order, actions = parse_actions(updated, revision)
    subtasks = current.subtasks
    if isinstance(updated.get("subtasks"), list):
        _, subtasks = parse_subtasks({"task_decomposition": {"subtasks": updated["subtasks"]}})
    else:
        known = {s.id for s in subtasks}
        extra = [Subtask(id=a.task_id, description=a.purpose) for a in actions]
        subtasks = subtasks + tuple({s.id: s for s in extra if s.id not in known and s.id}.values())
    return replace(
        current,
        subtasks=subtasks,
        execution_order=order,
        actions=actions,
        revision=revision,
        done_tasks=frozenset(done_tasks) - {a.task_id for a in actions},
    )
