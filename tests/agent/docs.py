"""Phase documents for scripted scenarios built in code (variants of the YAML scripts)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

README_WITH_INSTALL = (
    "# Widgets\n\nA small widget library.\n\n## Installation\n\n    pip install widgets\n"
)


def action(
    task_id: str,
    tool: str,
    *,
    arguments: dict[str, Any] | None = None,
    group: int | None = None,
    dependencies: Sequence[str] = (),
    purpose: str = "",
    expected: str = "",
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "task_id": task_id,
        "action_type": "tool_call",
        "tool": tool,
        "purpose": purpose or f"run {tool}",
        "expected_outcome": expected,
        "fallback_strategy": "",
    }
    if arguments is not None:
        out["arguments"] = arguments
    if group is not None:
        out["parallel_group"] = group
    if dependencies:
        out["dependencies"] = list(dependencies)
    return out


def plan(
    actions: Sequence[dict[str, Any]],
    *,
    objective: str = "Add installation steps to README.md",
    dependencies: dict[str, list[str]] | None = None,
    subtasks: Sequence[dict[str, Any]] | None = None,
    order: Sequence[str] | None = None,
) -> dict[str, Any]:
    ids = list(dict.fromkeys(a["task_id"] for a in actions))
    deps = dependencies or {}
    if subtasks is None:
        subtasks = [
            {
                "id": task_id,
                "description": f"do {task_id}",
                "dependencies": deps.get(task_id, []),
                "estimated_complexity": "low",
                "required_tools": sorted({a["tool"] for a in actions if a["task_id"] == task_id}),
            }
            for task_id in ids
        ]
    return {
        "phase": "planning",
        "goal_understanding": {
            "main_objective": objective,
            "success_criteria": ["README.md has an Installation section"],
            "constraints": [],
            "context": "",
        },
        "task_decomposition": {"reasoning": "step by step", "subtasks": list(subtasks)},
        "action_plan": {"execution_order": list(order or ids), "actions": list(actions)},
        "comment": "Planning completed.",
    }


def readme_plan() -> dict[str, Any]:
    return plan(
        [
            action("task_1", "github_get_file_contents", arguments={"path": "README.md"}),
            action("task_2", "github_create_or_update_file", purpose="Add the section"),
        ],
        dependencies={"task_2": ["task_1"]},
    )


def execution(task_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "phase": "execution",
        "current_task": task_id,
        "function_call": {"name": name, "arguments": arguments},
        "comment": "calling",
    }


def write_readme(task_id: str = "task_2", content: str = README_WITH_INSTALL) -> dict[str, Any]:
    arguments = {"path": "README.md", "content": content, "message": "Add installation steps"}
    return execution(task_id, "github_create_or_update_file", arguments)


def reflection(
    key: str,
    *,
    status: str = "failure",
    revise: bool = False,
    reason: str = "",
    updated: Sequence[dict[str, Any]] | None = None,
    met: bool = False,
    issues: Sequence[str] = (),
) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "phase": "reflection",
        "reflection": {
            "action_evaluated": key,
            "status": status,
            "evaluation": f"{key}: {status}",
            "issues_identified": list(issues),
            "success_criteria_met": met,
            "plan_revision_needed": revise,
        },
        "comment": "reflected",
    }
    if revise:
        doc["plan_revision"] = {"reason": reason or "fix it", "changes": ["change the plan"]}
        if updated is not None:
            doc["plan_revision"]["updated_action_plan"] = {"actions": list(updated)}
    return doc


def revision(actions: Sequence[dict[str, Any]], *, reason: str = "revised") -> dict[str, Any]:
    return reflection("plan", revise=True, reason=reason, updated=actions)


def completion(*, achieved: bool = True, done: int = 2, failed: int = 0) -> dict[str, Any]:
    return {
        "phase": "completion",
        "status": "completed",
        "summary": {
            "goal_achieved": achieved,
            "tasks_completed": done,
            "tasks_failed": failed,
            "key_outcomes": ["README.md updated"],
            "lessons_learned": ["none"],
        },
        "done": True,
        "comment": "done",
    }


def intervention(*recommendations: str) -> dict[str, Any]:
    return {
        "phase": "completion",
        "status": "requires_human_intervention",
        "summary": {
            "goal_achieved": False,
            "tasks_completed": 0,
            "tasks_failed": 1,
            "revision_attempts": 0,
            "reason": "stuck",
            "current_state": "the model's view of the state",
            "recommendations": list(recommendations) or ["look at it"],
        },
        "comment": "help",
    }


def failing_then_fixed() -> list[object]:
    """A plan whose read fails (wrong path), and the reflection that revises it into a write
    of README_WITH_INSTALL through the forge."""
    read = action("task_1", "github_get_file_contents", arguments={"path": "docs/x.md"})
    fixed = action(
        "task_2",
        "github_create_or_update_file",
        arguments={"path": "README.md", "content": README_WITH_INSTALL, "message": "Add"},
    )
    return [
        plan([read]),
        reflection("task_1", revise=True, reason="wrong path", updated=[fixed]),
    ]
